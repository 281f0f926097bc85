package stats_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/ledgerentry"
	"github.com/adal-relay/adal/leader"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/retention"
	"github.com/adal-relay/adal/stats"
	"github.com/adal-relay/adal/viewer"
)

// The aggregates follow what a running process records: attempts of a recipient that succeeds (some slowly)
// and of one that fails, requests through intake, a manual retry and a replay with their debits. Each chart's
// figures equal what the history holds, hour by hour and day by day; the purge of the requests leaves them as
// they were, and the purge of aggregates past their retention deletes them.
func TestAggregatesFollowTheEngine(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t, func(c *relay.Config) { c.RetryUnit = 10 * time.Millisecond })
	tn := env.NewTenant("acme", relaytest.PlanLimits{Credits: 100, RetentionDays: 1})
	srv := env.NewServer(tn, "stripe", nil)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/slow") {
			time.Sleep(120 * time.Millisecond)
		}
		if strings.HasPrefix(r.URL.Path, "/failing") {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(receiver.Close)
	good := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": receiver.URL + "/ok", "maxAttempts": 1})
	bad := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": receiver.URL + "/failing",
		"maxAttempts": 2, "retrySchedule": "STEPPED"})

	var first string
	for i := range 6 {
		path := "/fast"
		if i%3 == 0 {
			path = "/slow"
		}
		id := env.Send(srv.Key, path, fmt.Sprintf(`{"n":%d}`, i))
		if i == 0 {
			first = id
		}
	}
	ctx := viewer.SystemContext(context.Background())
	settled := func() bool {
		n, err := env.DB.Client.Delivery.Query().
			Where(entdelivery.StatusIn(entdelivery.StatusPENDING, entdelivery.StatusIN_PROGRESS)).Count(ctx)
		require.NoError(t, err)
		return n == 0
	}
	relaytest.Eventually(t, 30*time.Second, "the deliveries to settle", settled)

	// A manual retry of a failed delivery and a replay: a credit each, and more attempts.
	failed, err := env.DB.Client.Delivery.Query().
		Where(entdelivery.RecipientID(relaytest.RowID(t, bad)), entdelivery.StatusEQ(entdelivery.StatusFAILED)).
		First(ctx)
	require.NoError(t, err)
	env.MustGraphQL(tn.Member, `mutation($id: ID!){ retryDelivery(id: $id){ id } }`, map[string]any{"id": fmt.Sprint(failed.ID)}, nil)
	env.MustGraphQL(tn.Member, `mutation($id: ID!){ replayRequest(id: $id){ id } }`, map[string]any{"id": first}, nil)
	relaytest.Eventually(t, 30*time.Second, "the retry and the replay to settle", settled)

	now := time.Now().UTC()
	charts := func(at time.Time) (map[int][]stats.RecipientHour, []stats.ServerHour, []stats.CreditDay) {
		t.Helper()
		rec := map[int][]stats.RecipientHour{}
		for _, r := range []string{good, bad} {
			hs, err := stats.RecipientHours(ctx, env.DB.Client, relaytest.RowID(t, r), at, stats.MaxHours)
			require.NoError(t, err)
			rec[relaytest.RowID(t, r)] = hs
		}
		sh, err := stats.ServerHours(ctx, env.DB.Client, relaytest.RowID(t, srv.ID), at, stats.MaxHours)
		require.NoError(t, err)
		cd, err := stats.CreditDays(ctx, env.DB.Client, relaytest.RowID(t, tn.ID), at, stats.MaxDays)
		require.NoError(t, err)
		return rec, sh, cd
	}
	recipients, servers, days := charts(now)

	// Attempts, as the history holds them, by recipient and hour.
	type key struct {
		id int
		at time.Time
	}
	wantAttempts := map[key]stats.RecipientHour{}
	attempts, err := env.DB.Client.Attempt.Query().WithDelivery().All(ctx)
	require.NoError(t, err)
	var successes, failures int
	for _, a := range attempts {
		k := key{a.Edges.Delivery.RecipientID, a.FinishedAt.UTC().Truncate(time.Hour)}
		h := wantAttempts[k]
		h.Hour = k.at
		h.Attempts++
		if a.Status == "SUCCEEDED" {
			h.Successes++
			successes++
		} else {
			failures++
		}
		h.Durations[stats.Bucket(a.DurationMs)]++
		wantAttempts[k] = h
	}
	require.Equal(t, 7, successes, "6 requests and a replay to the good recipient")
	require.Equal(t, 2*8, failures, "two attempts of each to the failing one, the retry included")
	gotAttempts := map[key]stats.RecipientHour{}
	for id, hs := range recipients {
		require.Len(t, hs, stats.MaxHours)
		for _, h := range hs {
			if h.Attempts > 0 {
				gotAttempts[key{id, h.Hour}] = h
			}
		}
	}
	require.Equal(t, wantAttempts, gotAttempts)
	var slow int64
	for _, h := range recipients[relaytest.RowID(t, good)] {
		slow += h.Durations[stats.Bucket(120)]
	}
	require.GreaterOrEqual(t, slow, int64(1), "the slow attempts are counted in a bucket of their own")

	// Requests by hour of receipt.
	wantRequests := map[time.Time]stats.ServerHour{}
	reqs, err := env.DB.Client.Request.Query().All(ctx)
	require.NoError(t, err)
	require.Len(t, reqs, 7)
	for _, q := range reqs {
		at := q.ReceivedAt.UTC().Truncate(time.Hour)
		h := wantRequests[at]
		h.Hour = at
		h.Requests++
		if q.ReplayOfID != nil {
			h.Replays++
		}
		wantRequests[at] = h
	}
	gotRequests := map[time.Time]stats.ServerHour{}
	for _, h := range servers {
		if h.Requests > 0 {
			gotRequests[h.Hour] = h
		}
	}
	require.Equal(t, wantRequests, gotRequests)

	// Debits by day: the 6 requests, the retry and the replay.
	wantDays := map[time.Time]stats.CreditDay{}
	entries, err := env.DB.Client.LedgerEntry.Query().Where(ledgerentry.AmountLT(0)).All(ctx)
	require.NoError(t, err)
	for _, e := range entries {
		at := e.CreatedAt.UTC().Truncate(24 * time.Hour)
		d := wantDays[at]
		d.Day = at
		d.Credits -= e.Amount
		switch e.Reason {
		case ledgerentry.ReasonREQUEST_ACCEPTED:
			d.Requests -= e.Amount
		case ledgerentry.ReasonMANUAL_RETRY:
			d.Retries -= e.Amount
		case ledgerentry.ReasonREPLAY:
			d.Replays -= e.Amount
		}
		wantDays[at] = d
	}
	gotDays := map[time.Time]stats.CreditDay{}
	var credits int64
	for _, d := range days {
		if d.Credits > 0 {
			gotDays[d.Day] = d
			credits += d.Credits
		}
	}
	require.Equal(t, wantDays, gotDays)
	require.EqualValues(t, 8, credits)

	// The requests expire after a day: their purge leaves the aggregates as they were.
	purge := func(at time.Time) retention.Stats {
		p, err := retention.New(retention.Config{DB: env.DB.DB, Leader: leader.Always{}, Workers: 1,
			Now: func() time.Time { return at }})
		require.NoError(t, err)
		st, err := p.PurgeOnce(context.Background())
		require.NoError(t, err)
		return st
	}
	purge(now.Add(49 * time.Hour))
	left, err := env.DB.Client.Request.Query().Count(ctx)
	require.NoError(t, err)
	require.Zero(t, left, "the requests are purged")
	r2, s2, d2 := charts(now)
	require.Equal(t, recipients, r2)
	require.Equal(t, servers, s2)
	require.Equal(t, days, d2)

	// Past their retention, the aggregates go too.
	st := purge(now.Add(stats.Retention + 25*time.Hour))
	require.Positive(t, st.Aggregates)
	for _, n := range []func(context.Context) (int, error){
		env.DB.Client.RecipientHourStat.Query().Count,
		env.DB.Client.ServerHourStat.Query().Count,
		env.DB.Client.TenantDayStat.Query().Count,
	} {
		c, err := n(ctx)
		require.NoError(t, err)
		require.Zero(t, c)
	}
}
