package scheduler_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/attempt"
	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/outboundjob"
	"github.com/adal-relay/adal/ent/request"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/viewer"
)

// newReceiver is a recipient endpoint that fails its first failures calls with 500, then answers 200.
func newReceiver(t *testing.T, failures int) *target { return newTarget(t, failThenOK(failures)) }

type call struct {
	at     time.Time
	method string
	path   string
	header http.Header
	body   string
}

func compressed(unit time.Duration) func(*relay.Config) {
	return func(c *relay.Config) { c.RetryUnit = unit }
}

// waitDelivered waits until the request's first delivery has SUCCEEDED, and returns it with its attempts.
func waitDelivered(t *testing.T, env *relaytest.Env, requestID string, timeout time.Duration, what string) *ent.Delivery {
	t.Helper()
	return waitDelivery(t, env, requestID, entdelivery.StatusSUCCEEDED, timeout, what)
}

// waitFailed waits until the request's first delivery has FAILED, and returns it with its attempts.
func waitFailed(t *testing.T, env *relaytest.Env, requestID string, timeout time.Duration, what string) *ent.Delivery {
	t.Helper()
	return waitDelivery(t, env, requestID, entdelivery.StatusFAILED, timeout, what)
}

func waitDelivery(t *testing.T, env *relaytest.Env, requestID string, status entdelivery.Status, timeout time.Duration, what string) *ent.Delivery {
	t.Helper()
	relaytest.Eventually(t, timeout, what, func() bool { return deliveriesOf(t, env, requestID)[0].Status == status })
	return deliveriesOf(t, env, requestID)[0]
}

// deliveriesOf reads a request's deliveries with their attempts, as the system.
func deliveriesOf(t *testing.T, env *relaytest.Env, requestID string) []*ent.Delivery {
	t.Helper()
	id := relaytest.RowID(t, requestID)
	return env.Deliveries(entdelivery.RequestID(id))
}

func requestStatus(t *testing.T, env *relaytest.Env, requestID string) request.Status {
	t.Helper()
	id := relaytest.RowID(t, requestID)
	r, err := env.DB.Client.Request.Get(viewer.SystemContext(t.Context()), id)
	require.NoError(t, err)
	return r.Status
}

func TestFailsThenSucceedsOnQuadraticSchedule(t *testing.T) {
	t.Parallel()
	const unit = 20 * time.Millisecond
	env, tn, srv := relaytest.StartWithServer(t, 10, compressed(unit))
	rcv := newReceiver(t, 3)
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv.URL + "/hook", "sendIdempotencyKey": true})

	reqID := env.Send(srv.Key, "/evt?x=1", `{"n":1}`)
	relaytest.Eventually(t, 20*time.Second, "delivery to succeed", func() bool {
		ds := deliveriesOf(t, env, reqID)
		return len(ds) == 1 && ds[0].Status == entdelivery.StatusSUCCEEDED
	})
	d := deliveriesOf(t, env, reqID)[0]
	require.Equal(t, 4, d.AttemptCount)
	require.Len(t, d.Edges.Attempts, 4)
	require.Equal(t, 4, rcv.count())
	for i, a := range d.Edges.Attempts {
		require.Equal(t, i+1, a.Number)
		if i < 3 {
			require.Equal(t, attempt.StatusFAILED, a.Status)
			require.Equal(t, 500, *a.HTTPStatus)
			require.Equal(t, attempt.ErrorKindHTTP_STATUS, *a.ErrorKind)
		} else {
			require.Equal(t, attempt.StatusSUCCEEDED, a.Status)
		}
		if i > 0 {
			// Never early: attempt n starts at least n² units after attempt n-1 ended.
			prev := d.Edges.Attempts[i-1]
			wait := time.Duration((i+1)*(i+1)) * unit
			require.GreaterOrEqual(t, a.StartedAt.Sub(prev.FinishedAt), wait, "attempt %d started early", a.Number)
		}
	}
	require.Equal(t, request.StatusDELIVERED, requestStatus(t, env, reqID))

	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	keys := map[string]bool{}
	for i, c := range rcv.calls {
		require.Equal(t, http.MethodPost, c.method)
		require.Equal(t, "/hook/evt?x=1", c.path)
		require.Equal(t, `{"n":1}`, c.body)
		require.Equal(t, reqID, c.header.Get("X-Adal-Request-Id"))
		require.Equal(t, strconv.Itoa(i+1), c.header.Get("X-Adal-Attempt"))
		keys[c.header.Get("X-Adal-Idempotency")] = true
	}
	require.Len(t, keys, 1, "the same idempotency key on every attempt")
	require.NotContains(t, keys, "")
}

func TestAlwaysFailingExhaustsAttempts(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartWithServer(t, 10, compressed(5*time.Millisecond))
	rcv := newReceiver(t, 1000)
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv.URL, "maxAttempts": 3, "retrySchedule": "STEPPED"})

	reqID := env.Send(srv.Key, "", `{}`)
	d := waitFailed(t, env, reqID, 20*time.Second, "delivery to fail")
	require.Equal(t, 3, d.AttemptCount)
	require.Len(t, d.Edges.Attempts, 3)
	require.Nil(t, d.NextAttemptAt)
	require.NotNil(t, d.FinishedAt)
	require.Equal(t, 3, rcv.count())
	require.Equal(t, request.StatusFAILED, requestStatus(t, env, reqID))
}

func TestRecipientsAreIndependent(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartWithServer(t, 10, compressed(5*time.Millisecond))
	good := newReceiver(t, 0)
	bad := newReceiver(t, 1000)
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": good.URL, "maxAttempts": 2})
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": bad.URL, "maxAttempts": 2})

	reqID := env.Send(srv.Key, "", `{}`)
	relaytest.Eventually(t, 20*time.Second, "both deliveries final", func() bool {
		ds := deliveriesOf(t, env, reqID)
		return ds[0].FinishedAt != nil && ds[1].FinishedAt != nil
	})
	ds := deliveriesOf(t, env, reqID)
	require.Equal(t, entdelivery.StatusSUCCEEDED, ds[0].Status)
	require.Equal(t, 1, ds[0].AttemptCount)
	require.Equal(t, entdelivery.StatusFAILED, ds[1].Status)
	require.Equal(t, 2, ds[1].AttemptCount)
	require.Equal(t, request.StatusPARTIAL, requestStatus(t, env, reqID))
}

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
		id := relaytest.RowID(t, env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv.URL + path}))
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

// TestExponentialTwelveAttempts runs a whole EXPONENTIAL schedule through the engine on a compressed unit: a
// recipient that always fails gets 12 attempts, retry k starting no earlier than ((2^k)−1)·84.8 s (in units
// of a minute) after the first attempt, and then the delivery fails. The delivery keeps the maximum it was
// created with when the recipient is changed meanwhile.
func TestExponentialTwelveAttempts(t *testing.T) {
	t.Parallel()
	const unit = time.Millisecond // the whole schedule: 2047·84.8 s/60 s·1 ms ≈ 2.9 s
	env, tn, srv := relaytest.StartWithServer(t, 10, compressed(unit))
	rcv := newReceiver(t, 1000)
	id := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv.URL,
		"retrySchedule": "EXPONENTIAL", "maxAttempts": 12})

	reqID := env.Send(srv.Key, "", `{}`)
	env.MustGraphQL(tn.Owner, `mutation($id: ID!){ updateRecipient(id: $id, input: {maxAttempts: 3, retrySchedule: STEPPED}){ id } }`,
		map[string]any{"id": id}, nil)

	d := waitFailed(t, env, reqID, 60*time.Second, "all 12 attempts to fail")
	require.Equal(t, 12, d.MaxAttempts, "the delivery keeps the maximum it was created with")
	require.Equal(t, entdelivery.RetryScheduleEXPONENTIAL, d.RetrySchedule)
	require.Equal(t, 12, d.AttemptCount)
	require.Len(t, d.Edges.Attempts, 12)
	require.Equal(t, 12, rcv.count())
	require.NotNil(t, d.FirstAttemptAt)
	first := *d.FirstAttemptAt
	for k := 1; k <= 11; k++ {
		a := d.Edges.Attempts[k]
		require.Equal(t, k+1, a.Number)
		// 84.8 s per minute of schedule is 84.8/60 units; in nanoseconds of this unit, exact to the nanosecond.
		due := first.Add(time.Duration(((1 << k) - 1) * 848 * int64(unit) / 600))
		require.False(t, a.StartedAt.Before(due), "retry %d started at %v, due %v", k, a.StartedAt, due)
		require.False(t, a.StartedAt.Before(d.Edges.Attempts[k-1].FinishedAt), "retry %d overlaps the attempt before it", k)
	}
}
