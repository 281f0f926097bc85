package stats_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/attempt"
	"github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/ledgerentry"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/stats"
	"github.com/adal-relay/adal/storage/dbtest"
	"github.com/adal-relay/adal/viewer"
)

// world is one tenant with a server, two recipients and a request delivered to both, written with ent as the
// system: enough to hang attempts and ledger entries on.
type world struct {
	tenantID, serverID int
	recipients         [2]int
	deliveries         [2]*ent.Delivery
}

// Its request was received at at.
func newWorld(t *testing.T, ctx context.Context, client *ent.Client, name string, at time.Time) world {
	t.Helper()
	plan, err := client.Plan.Create().SetName(name + "-" + randomHex(4)).SetMonthlyCredits(1000).SetRetentionDays(7).
		SetMaxServers(10).SetMaxRecipientsPerServer(10).Save(ctx)
	require.NoError(t, err)
	tn, err := client.Tenant.Create().SetName(name).SetPlanID(plan.ID).Save(ctx)
	require.NoError(t, err)
	srv, err := client.Server.Create().SetTenantID(tn.ID).SetName(name).SetInboundKey(randomHex(16)).Save(ctx)
	require.NoError(t, err)
	w := world{tenantID: tn.ID, serverID: srv.ID}
	expires := at.Add(48 * time.Hour)
	req, err := client.Request.Create().SetTenantID(tn.ID).SetServerID(srv.ID).SetKey(randomHex(16)).
		SetMethod(http.MethodPost).SetHeaders(http.Header{}).SetBody([]byte(`{}`)).SetReceivedAt(at).
		SetExpiresAt(expires).Save(ctx)
	require.NoError(t, err)
	for i := range w.recipients {
		r, err := client.Recipient.Create().SetTenantID(tn.ID).SetServerID(srv.ID).SetName("r" + randomHex(2)).
			SetMethod(recipient.MethodDIRECT_HTTP).SetURL("http://127.0.0.1:1/hook").Save(ctx)
		require.NoError(t, err)
		w.recipients[i] = r.ID
		d, err := client.Delivery.Create().SetTenantID(tn.ID).SetRequestID(req.ID).SetRecipientID(r.ID).
			SetExpiresAt(expires).SetMaxAttempts(10).SetRetrySchedule(delivery.RetryScheduleQUADRATIC).Save(ctx)
		require.NoError(t, err)
		w.deliveries[i] = d
	}
	return w
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// The attempts trigger counts each attempt for its delivery's recipient, in the UTC hour it finished, with its
// duration in the bucket stats.Bucket names (at each bound and just past it); several attempts in one
// statement, of two recipients and two hours, are grouped before they are added. Another tenant's viewer
// reads zeros.
func TestAttemptsAreCountedByRecipientHourAndBucket(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t)
	ctx := viewer.SystemContext(context.Background())
	now := time.Now().UTC()
	w := newWorld(t, ctx, db.Client, "acme", now)
	other := newWorld(t, ctx, db.Client, "globex", now)

	hour := now.Truncate(time.Hour)
	durations := []int64{0, 10, 11, 25, 26, 50, 51, 100, 101, 250, 251, 500, 501, 1000, 1001, 2500, 2501, 5000,
		5001, 10000, 10001, 30000, 30001, 120000}
	type key struct {
		recipient int
		hour      time.Time
	}
	want := map[key]*stats.RecipientHour{}
	var builders []*ent.AttemptCreate
	number := [2]int{}
	for i, ms := range durations {
		k := i % 2
		finished := now
		if i%3 == 0 {
			finished = hour.Add(-30 * time.Minute) // the hour before
		}
		ok := i%4 != 0
		number[k]++
		d := w.deliveries[k]
		b := db.Client.Attempt.Create().SetTenantID(w.tenantID).SetDeliveryID(d.ID).SetExpiresAt(d.ExpiresAt).
			SetNumber(number[k]).SetStartedAt(finished.Add(-time.Duration(ms) * time.Millisecond)).
			SetFinishedAt(finished).SetDurationMs(ms)
		if ok {
			b.SetStatus(attempt.StatusSUCCEEDED).SetHTTPStatus(200)
		} else {
			b.SetStatus(attempt.StatusFAILED).SetHTTPStatus(502).SetErrorKind(attempt.ErrorKindHTTP_STATUS)
		}
		builders = append(builders, b)
		kk := key{w.recipients[k], finished.Truncate(time.Hour)}
		if want[kk] == nil {
			want[kk] = &stats.RecipientHour{Hour: kk.hour}
		}
		want[kk].Attempts++
		if ok {
			want[kk].Successes++
		}
		want[kk].Durations[stats.Bucket(ms)]++
	}
	// Half in one statement, the rest in another: the second adds to the rows the first made.
	require.NoError(t, db.Client.Attempt.CreateBulk(builders[:10]...).Exec(ctx))
	require.NoError(t, db.Client.Attempt.CreateBulk(builders[10:]...).Exec(ctx))

	for _, r := range w.recipients {
		hours, err := stats.RecipientHours(ctx, db.Client, r, now, 3)
		require.NoError(t, err)
		require.Len(t, hours, 3)
		require.Equal(t, hour.Add(-2*time.Hour), hours[0].Hour)
		require.Equal(t, stats.RecipientHour{Hour: hours[0].Hour}, hours[0], "no attempt two hours ago")
		for _, h := range hours[1:] {
			exp := want[key{r, h.Hour}]
			require.NotNil(t, exp, "hour %v", h.Hour)
			require.Equal(t, *exp, h, "recipient %d, hour %v", r, h.Hour)
		}
	}
	var all [stats.Buckets]int64
	for _, h := range want {
		for i, n := range h.Durations {
			all[i] += n
		}
	}
	for i, n := range all {
		require.Positive(t, n, "bucket %d has a duration of the test", i)
	}

	// Tenancy: another tenant's viewer reads A's recipient as zeros; A's member reads its figures.
	otherViewer := viewer.NewContext(context.Background(), viewer.Viewer{Role: viewer.Owner, TenantID: other.tenantID})
	hours, err := stats.RecipientHours(otherViewer, db.Client, w.recipients[0], now, 3)
	require.NoError(t, err)
	for _, h := range hours {
		require.Zero(t, h.Attempts)
	}
	member := viewer.NewContext(context.Background(), viewer.Viewer{Role: viewer.Member, TenantID: w.tenantID})
	hours, err = stats.RecipientHours(member, db.Client, w.recipients[0], now, 3)
	require.NoError(t, err)
	require.Equal(t, want[key{w.recipients[0], hour}].Attempts, hours[2].Attempts)
}

// The requests trigger counts each stored request in its server's UTC hour of receipt, replays also apart;
// the ledger's counts each debit in its tenant's UTC day, by what it paid for, and grants not at all.
func TestRequestsAndDebitsAreCounted(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t)
	ctx := viewer.SystemContext(context.Background())
	now := time.Now().UTC()
	w := newWorld(t, ctx, db.Client, "acme", now)
	hour := now.Truncate(time.Hour)
	received := []time.Time{now, now, hour.Add(-time.Minute), hour.Add(-5 * time.Hour), now.Add(-40 * 24 * time.Hour)}
	var builders []*ent.RequestCreate
	for i, at := range received {
		b := db.Client.Request.Create().SetTenantID(w.tenantID).SetServerID(w.serverID).SetKey(randomHex(16)).
			SetMethod(http.MethodPost).SetHeaders(http.Header{}).SetBody([]byte(`{}`)).SetReceivedAt(at).
			SetExpiresAt(now.Add(24 * time.Hour))
		if i == 1 {
			b.SetReplayOfID(1)
		}
		builders = append(builders, b)
	}
	require.NoError(t, db.Client.Request.CreateBulk(builders...).Exec(ctx))

	hours, err := stats.ServerHours(ctx, db.Client, w.serverID, now, stats.MaxHours)
	require.NoError(t, err)
	require.Len(t, hours, stats.MaxHours)
	require.Equal(t, hour, hours[len(hours)-1].Hour)
	// newWorld's own request was received now too.
	require.Equal(t, stats.ServerHour{Hour: hour, Requests: 3, Replays: 1}, hours[len(hours)-1])
	require.Equal(t, stats.ServerHour{Hour: hour.Add(-time.Hour), Requests: 1}, hours[len(hours)-2])
	require.Equal(t, stats.ServerHour{Hour: hour.Add(-5 * time.Hour), Requests: 1}, hours[len(hours)-6])
	var total int64
	for _, h := range hours {
		total += h.Requests
	}
	require.EqualValues(t, 5, total, "the request of 40 days ago is outside the range")

	// Debits of every kind and a grant, through billing.
	svc := billing.New(db.Dialect, func() time.Time { return now })
	tx, err := db.Client.Tx(ctx)
	require.NoError(t, err)
	_, err = svc.Credit(ctx, tx.Client(), w.tenantID, 100, billing.ReasonCreditGrant, "grant", nil)
	require.NoError(t, err)
	for _, reason := range []ledgerentry.Reason{billing.ReasonRequestAccepted, billing.ReasonRequestAccepted,
		billing.ReasonManualRetry, billing.ReasonReplay, ledgerentry.ReasonOUTBOUND} {
		_, err = svc.Debit(ctx, tx.Client(), w.tenantID, 1, reason, "x")
		require.NoError(t, err)
	}
	rs, err := svc.Reserve(ctx, tx.Client(), []billing.Want{{TenantID: w.tenantID, N: 3}})
	require.NoError(t, err)
	require.NoError(t, svc.Settle(ctx, tx.Client(), rs, billing.ReasonRequestAccepted, [][]string{{"a", "b", "c"}}))
	require.NoError(t, tx.Commit())

	days, err := stats.CreditDays(ctx, db.Client, w.tenantID, now, stats.MaxDays)
	require.NoError(t, err)
	require.Len(t, days, stats.MaxDays)
	today := now.Truncate(24 * time.Hour)
	require.Equal(t, stats.CreditDay{Day: today, Credits: 8, Requests: 5, Retries: 1, Replays: 1, Outbound: 1}, days[len(days)-1])
	require.Equal(t, stats.CreditDay{Day: today.Add(-24 * time.Hour)}, days[len(days)-2])

	// A rolled-back debit leaves no trace in the aggregates.
	tx, err = db.Client.Tx(ctx)
	require.NoError(t, err)
	_, err = svc.Debit(ctx, tx.Client(), w.tenantID, 1, billing.ReasonReplay, "y")
	require.NoError(t, err)
	require.NoError(t, tx.Rollback())
	days, err = stats.CreditDays(ctx, db.Client, w.tenantID, now, 1)
	require.NoError(t, err)
	require.EqualValues(t, 8, days[0].Credits)

	// Ranges out of bounds are refused.
	_, err = stats.ServerHours(ctx, db.Client, w.serverID, now, stats.MaxHours+1)
	require.Equal(t, fault.InvalidInput, fault.KindOf(err))
	_, err = stats.RecipientHours(ctx, db.Client, w.recipients[0], now, 0)
	require.Equal(t, fault.InvalidInput, fault.KindOf(err))
	_, err = stats.CreditDays(ctx, db.Client, w.tenantID, now, stats.MaxDays+1)
	require.Equal(t, fault.InvalidInput, fault.KindOf(err))
}

// Statements of many transactions at once, racing to make an hour's row, add up exactly: the one that loses
// the race adds to the row the winner made.
func TestConcurrentStatementsAddUp(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t)
	ctx := viewer.SystemContext(context.Background())
	now := time.Now().UTC()
	w := newWorld(t, ctx, db.Client, "acme", now)
	const writers, statements, rows = 8, 5, 3
	var wg sync.WaitGroup
	errs := make(chan error, writers*statements)
	for range writers {
		wg.Go(func() {
			for range statements {
				builders := make([]*ent.RequestCreate, rows)
				for i := range builders {
					builders[i] = db.Client.Request.Create().SetTenantID(w.tenantID).SetServerID(w.serverID).
						SetKey(randomHex(16)).SetMethod(http.MethodPost).SetHeaders(http.Header{}).SetBody([]byte(`{}`)).
						SetReceivedAt(now).SetExpiresAt(now.Add(24 * time.Hour))
				}
				errs <- db.Client.Request.CreateBulk(builders...).Exec(ctx)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	hours, err := stats.ServerHours(ctx, db.Client, w.serverID, now, 1)
	require.NoError(t, err)
	require.EqualValues(t, writers*statements*rows+1, hours[0].Requests, "and newWorld's request")
}
