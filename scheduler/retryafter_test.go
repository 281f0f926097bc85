package scheduler_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/ent"
	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/outboundjob"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/viewer"
)

// TestRetryAfterMovesTheNextAttempt: a recipient answering 429 or 503 with Retry-After, in seconds or as an
// HTTP date, gets its next attempt when it asked — never earlier than the schedule, never later than twice the
// scheduled wait — for deliveries and outbound jobs alike, and the attempt counts. The clock stands still, so
// every due time is exact.
func TestRetryAfterMovesTheNextAttempt(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	env, _ := relaytest.StartAt(t, now)
	tn, srv := env.NewTenantServer(100)
	httpDate := func(d time.Duration) string { return now.Add(d).Format(http.TimeFormat) }

	// Each path answers one status and Retry-After.
	answers := map[string][2]string{
		"/seconds":     {"429", "360"},                      // QUADRATIC waits 4 min: 6 min is within twice that
		"/date":        {"503", httpDate(7 * time.Minute)},  // within
		"/too-far":     {"429", "3600"},                     // capped at twice the 4 minutes
		"/too-early":   {"429", "10"},                       // never earlier than the schedule
		"/ignored":     {"500", "360"},                      // only 429 and 503 say when to come back
		"/job-date":    {"503", httpDate(90 * time.Second)}, // STEPPED waits 1 min: 90 s is within twice that
		"/job-too-far": {"429", "600"},                      // capped at 2 min
	}
	rcv := newTarget(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		a := answers[r.URL.Path]
		w.Header().Set("Retry-After", a[1])
		status, _ := strconv.Atoi(a[0])
		w.WriteHeader(status)
	})
	want := map[string]time.Duration{ // next attempt, after the first attempt ended (now: the clock stands still)
		"/seconds":   6 * time.Minute,
		"/date":      7 * time.Minute,
		"/too-far":   8 * time.Minute,
		"/too-early": 4 * time.Minute,
		"/ignored":   4 * time.Minute,
	}
	recipients := map[int]string{}
	for path := range want {
		id, err := strconv.Atoi(env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv.URL + path}))
		require.NoError(t, err)
		recipients[id] = path
	}
	jobs := map[int]string{}
	for path := range map[string]bool{"/job-date": true, "/job-too-far": true} {
		jobs[send(t, env, tn, map[string]any{"url": rcv.URL + path})] = path
	}

	reqID := env.Send(srv.Key, "", `{}`)
	var ds []*ent.Delivery
	relaytest.Eventually(t, 20*time.Second, "every first attempt recorded", func() bool {
		ds = deliveriesOf(t, env, reqID)
		for _, d := range ds {
			if len(d.Edges.Attempts) != 1 || d.Status != entdelivery.StatusPENDING {
				return false
			}
		}
		return len(ds) == len(want)
	})
	for _, d := range ds {
		path := recipients[d.RecipientID]
		require.Equal(t, 1, d.AttemptCount, "%s: the attempt counts", path)
		require.NotNil(t, d.NextAttemptAt, path)
		require.True(t, now.Add(want[path]).Equal(*d.NextAttemptAt), "%s: next attempt at %v, want %v", path, *d.NextAttemptAt, now.Add(want[path]))
	}

	wantJobs := map[string]time.Duration{"/job-date": 90 * time.Second, "/job-too-far": 2 * time.Minute}
	ctx := viewer.SystemContext(t.Context())
	relaytest.Eventually(t, 20*time.Second, "every outbound job's first attempt recorded", func() bool {
		n, err := env.DB.Client.OutboundJob.Query().Where(outboundjob.StatusEQ(outboundjob.StatusPENDING), outboundjob.AttemptCount(1)).Count(ctx)
		require.NoError(t, err)
		return n == len(jobs)
	})
	for id, path := range jobs {
		job, err := env.DB.Client.OutboundJob.Get(ctx, id)
		require.NoError(t, err)
		require.NotNil(t, job.NextAttemptAt, path)
		require.True(t, now.Add(wantJobs[path]).Equal(*job.NextAttemptAt), "%s: next attempt at %v, want %v", path, *job.NextAttemptAt, now.Add(wantJobs[path]))
	}
}
