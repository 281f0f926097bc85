package retention_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/attempt"
	"github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/leader"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/retention"
	"github.com/adal-relay/adal/storage/dbtest"
	"github.com/adal-relay/adal/viewer"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type testBundle struct {
	db    *dbtest.DB
	ctx   context.Context // system viewer: fixtures and assertions see every tenant
	clock *relaytest.Clock
	fx    *fixture
}

func setup(t testing.TB) *testBundle {
	t.Helper()
	db := dbtest.Open(t)
	ctx := viewer.SystemContext(context.Background())
	return &testBundle{
		db:    db,
		ctx:   ctx,
		clock: relaytest.NewClock(time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)),
		fx:    newFixture(t, ctx, db.Client),
	}
}

func (b *testBundle) purger(t testing.TB, configure ...func(*retention.Config)) *retention.Purger {
	t.Helper()
	// One worker unless a test asks for more: with several, two can split the last rows between them (SKIP
	// LOCKED), and the batch counts the tests check would vary.
	cfg := retention.Config{DB: b.db.DB, Leader: leader.Always{}, Now: b.clock.Now, Logger: quiet, Workers: 1}
	for _, f := range configure {
		f(&cfg)
	}
	p, err := retention.New(cfg)
	require.NoError(t, err)
	return p
}

// expiring stores n requests that expire in from the bundle's clock (negative: already expired).
func (b *testBundle) expiring(t testing.TB, n int, in time.Duration) []*ent.Request {
	t.Helper()
	return b.fx.requests(t, b.ctx, n, b.clock.Now().Add(in))
}

// fixture is one tenant with a server and two recipients, enough to hang requests, deliveries and attempts on.
// requireLeft requires n requests to be left in the database.
func (b *testBundle) requireLeft(t testing.TB, n int, msgAndArgs ...any) {
	t.Helper()
	left, err := b.fx.client.Request.Query().Count(b.ctx)
	require.NoError(t, err)
	require.Equal(t, n, left, msgAndArgs...)
}

type fixture struct {
	client     *ent.Client
	tenantID   int
	serverID   int
	recipients [2]int
}

func newFixture(t testing.TB, ctx context.Context, client *ent.Client) *fixture {
	t.Helper()
	plan, err := client.Plan.Create().SetName("plan-" + randomHex(4)).SetMonthlyCredits(1000).
		SetRetentionDays(7).SetMaxServers(10).SetMaxRecipientsPerServer(10).Save(ctx)
	require.NoError(t, err)
	tn, err := client.Tenant.Create().SetName("acme").SetPlanID(plan.ID).Save(ctx)
	require.NoError(t, err)
	srv, err := client.Server.Create().SetTenantID(tn.ID).SetName("stripe").SetInboundKey(randomHex(16)).Save(ctx)
	require.NoError(t, err)
	fx := &fixture{client: client, tenantID: tn.ID, serverID: srv.ID}
	for i := range fx.recipients {
		r, err := client.Recipient.Create().SetTenantID(tn.ID).SetServerID(srv.ID).SetName("r" + randomHex(2)).
			SetMethod(recipient.MethodDIRECT_HTTP).SetURL("http://127.0.0.1:1/hook").Save(ctx)
		require.NoError(t, err)
		fx.recipients[i] = r.ID
	}
	return fx
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// requests creates n requests expiring at expiresAt, in bulk.
func (fx *fixture) requests(t testing.TB, ctx context.Context, n int, expiresAt time.Time) []*ent.Request {
	t.Helper()
	var all []*ent.Request
	for done := 0; done < n; {
		chunk := min(500, n-done)
		builders := make([]*ent.RequestCreate, chunk)
		for i := range builders {
			builders[i] = fx.client.Request.Create().
				SetTenantID(fx.tenantID).SetServerID(fx.serverID).SetKey(randomHex(16)).
				SetMethod(http.MethodPost).SetHeaders(http.Header{"Content-Type": {"application/json"}}).
				SetBody([]byte(`{"id":"evt"}`)).SetReceivedAt(expiresAt.Add(-24 * time.Hour)).SetExpiresAt(expiresAt)
		}
		reqs, err := fx.client.Request.CreateBulk(builders...).Save(ctx)
		require.NoError(t, err)
		all = append(all, reqs...)
		done += chunk
	}
	return all
}

// history gives a request one delivery per recipient with the given number of attempts; status is the
// deliveries' status.
func (fx *fixture) history(t testing.TB, ctx context.Context, req *ent.Request, status delivery.Status, attempts int) []*ent.Delivery {
	t.Helper()
	var ds []*ent.Delivery
	for _, rcp := range fx.recipients {
		d, err := fx.client.Delivery.Create().SetTenantID(fx.tenantID).SetRequestID(req.ID).SetRecipientID(rcp).
			SetExpiresAt(req.ExpiresAt).SetStatus(status).SetAttemptCount(attempts).SetMaxAttempts(10).
			SetRetrySchedule(delivery.RetryScheduleQUADRATIC).Save(ctx)
		require.NoError(t, err)
		for n := 1; n <= attempts; n++ {
			_, err := fx.client.Attempt.Create().SetTenantID(fx.tenantID).SetDeliveryID(d.ID).SetNumber(n).SetExpiresAt(req.ExpiresAt).
				SetStartedAt(req.ReceivedAt).SetFinishedAt(req.ReceivedAt).SetStatus(attempt.StatusFAILED).
				SetHTTPStatus(500).SetDurationMs(3).Save(ctx)
			require.NoError(t, err)
		}
		ds = append(ds, d)
	}
	return ds
}

func TestConfigValidated(t *testing.T) {
	t.Parallel()
	_, err := retention.New(retention.Config{Leader: leader.Always{}})
	require.ErrorContains(t, err, "DB is required")
	b := setup(t)
	_, err = retention.New(retention.Config{DB: b.db.DB})
	require.ErrorContains(t, err, "Leader is required")
	_, err = retention.New(retention.Config{DB: b.db.DB, Leader: leader.Always{}, Spec: "sometimes"})
	require.ErrorContains(t, err, "cron spec")
	_, err = retention.New(retention.Config{DB: b.db.DB, Leader: leader.Always{}, Workers: -1})
	require.ErrorContains(t, err, "Workers")
}

func TestPurgeDeletesExpiredRequestsWithHistory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, fx, now := b.ctx, b.fx, b.clock.Now()

	expired := fx.requests(t, ctx, 1, now.Add(-time.Hour))[0]
	expiredHistory := fx.history(t, ctx, expired, delivery.StatusFAILED, 3)
	// Expiring exactly now counts as expired; a pending delivery never attempted goes with its request.
	atExpiry := fx.requests(t, ctx, 1, now)[0]
	pending := fx.history(t, ctx, atExpiry, delivery.StatusPENDING, 0)
	kept := fx.requests(t, ctx, 1, now.Add(time.Second))[0]
	keptHistory := fx.history(t, ctx, kept, delivery.StatusSUCCEEDED, 1)
	// A replay outlives its original: the link is cleared, the replay stays.
	replay, err := fx.client.Request.Create().SetTenantID(fx.tenantID).SetServerID(fx.serverID).SetKey(randomHex(16)).
		SetMethod(http.MethodPost).SetHeaders(http.Header{}).SetBody([]byte{}).SetReceivedAt(now).
		SetExpiresAt(now.Add(time.Hour)).SetReplayOfID(expired.ID).Save(ctx)
	require.NoError(t, err)

	st, err := b.purger(t).PurgeOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(2), st.Requests)
	require.Equal(t, int64(4), st.Deliveries)
	require.Equal(t, int64(6), st.Attempts)
	require.Equal(t, 1, st.Batches)
	require.Zero(t, st.Busy)

	ids, err := fx.client.Request.Query().IDs(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, []int{kept.ID, replay.ID}, ids)
	for _, d := range append(expiredHistory, pending...) {
		_, err := fx.client.Delivery.Get(ctx, d.ID)
		require.True(t, ent.IsNotFound(err), "delivery %d of a purged request survived", d.ID)
	}
	n, err := fx.client.Attempt.Query().Where(attempt.HasDeliveryWith(delivery.RequestID(expired.ID))).Count(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	left, err := fx.client.Delivery.Query().IDs(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, []int{keptHistory[0].ID, keptHistory[1].ID}, left)
	n, err = fx.client.Attempt.Query().Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n, "the unexpired request's attempts are untouched")
	replay, err = fx.client.Request.Get(ctx, replay.ID)
	require.NoError(t, err)
	require.Nil(t, replay.ReplayOfID)

	// Nothing else has expired: a second run deletes nothing.
	st, err = b.purger(t).PurgeOnce(context.Background())
	require.NoError(t, err)
	require.Zero(t, st.Requests)
	require.Zero(t, st.Batches)
}

func TestPurgeFollowsTheClock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := b.expiring(t, 1, 24*time.Hour)[0]
	b.fx.history(t, b.ctx, req, delivery.StatusPENDING, 0)
	p := b.purger(t)

	st, err := p.PurgeOnce(context.Background())
	require.NoError(t, err)
	require.Zero(t, st.Requests)

	b.clock.Advance(24*time.Hour - time.Second)
	st, err = p.PurgeOnce(context.Background())
	require.NoError(t, err)
	require.Zero(t, st.Requests, "one second before expiry")

	b.clock.Advance(time.Second)
	st, err = p.PurgeOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Requests)
	require.Equal(t, int64(2), st.Deliveries)
	_, err = b.fx.client.Request.Get(b.ctx, req.ID)
	require.True(t, ent.IsNotFound(err))
}

func TestPurgeInBoundedBatches(t *testing.T) {
	t.Parallel()
	b := setup(t)
	n, size := 2500, 0 // the default batch size, 1,000
	b.expiring(t, n, -time.Minute)
	b.expiring(t, 10, time.Minute)

	st, err := b.purger(t, func(c *retention.Config) { c.BatchSize = size }).PurgeOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(n), st.Requests)
	require.Equal(t, 3, st.Batches, "two full batches and a short one")
	require.Positive(t, st.LongestBatch)
	b.requireLeft(t, 10, "the unexpired requests")
}

// Workers take disjoint batches (SKIP LOCKED) and together purge everything once.
func TestPurgeWithConcurrentWorkers(t *testing.T) {
	t.Parallel()
	dbtest.SkipUnlessPostgres(t)
	b := setup(t)
	reqs := b.expiring(t, 2500, -time.Minute)
	for _, r := range reqs[:50] {
		b.fx.history(t, b.ctx, r, delivery.StatusFAILED, 2)
	}
	b.expiring(t, 10, time.Minute)

	st, err := b.purger(t, func(c *retention.Config) { c.BatchSize = 200; c.Workers = 3 }).PurgeOnce(t.Context())
	require.NoError(t, err)
	require.Equal(t, int64(2500), st.Requests)
	require.Equal(t, int64(100), st.Deliveries)
	require.Equal(t, int64(200), st.Attempts)
	require.GreaterOrEqual(t, st.Batches, 13)
	b.requireLeft(t, 10)
}

func TestPurgeExactMultipleOfBatchSize(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.expiring(t, 6, -time.Minute)

	st, err := b.purger(t, func(c *retention.Config) { c.BatchSize = 3 }).PurgeOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(6), st.Requests)
	require.Equal(t, 2, st.Batches, "the empty third batch that ends the run deletes nothing and does not count")
}

// A delivery locked by another transaction (an attempt being recorded) makes the purge skip its request
// instead of waiting for it; the next run takes it.
func TestPurgeSkipsRequestsWithLockedDeliveries(t *testing.T) {
	t.Parallel()
	dbtest.SkipUnlessPostgres(t)
	b := setup(t)
	reqs := b.expiring(t, 3, -time.Minute)
	var busy *ent.Delivery
	for i, r := range reqs {
		ds := b.fx.history(t, b.ctx, r, delivery.StatusIN_PROGRESS, 1)
		if i == 1 {
			busy = ds[0]
		}
	}
	tx, err := b.db.SQL.BeginTx(t.Context(), nil)
	require.NoError(t, err)
	defer tx.Rollback()
	_, err = tx.ExecContext(t.Context(), `UPDATE deliveries SET attempt_count = attempt_count + 1 WHERE id = $1`, busy.ID)
	require.NoError(t, err)

	// One worker: a second one starting after the first commits would meet the busy request again and count it
	// once more.
	p := b.purger(t, func(c *retention.Config) { c.Workers = 1 })
	st, err := p.PurgeOnce(t.Context())
	require.NoError(t, err)
	require.Equal(t, int64(2), st.Requests)
	require.Equal(t, int64(1), st.Busy)
	_, err = b.fx.client.Request.Get(b.ctx, reqs[1].ID)
	require.NoError(t, err, "the busy request is left for later")

	require.NoError(t, tx.Commit())
	st, err = p.PurgeOnce(t.Context())
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Requests)
	require.Equal(t, int64(2), st.Deliveries)
	require.Equal(t, int64(2), st.Attempts)
}

func TestScheduledPurgeRunsOnTheLeader(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := b.expiring(t, 1, -time.Minute)[0]
	p := b.purger(t, func(c *retention.Config) { c.Spec = "@every 1s" })
	require.NoError(t, p.Start(t.Context()))
	t.Cleanup(p.Stop)

	require.Eventually(t, func() bool {
		_, err := b.fx.client.Request.Get(b.ctx, req.ID)
		return ent.IsNotFound(err)
	}, 10*time.Second, 20*time.Millisecond)
	p.Stop()
}
