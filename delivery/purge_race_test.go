package delivery_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/storage/dbtest"
)

// The database does not check that a retry's delivery or a replay's link points at a stored request
// (storage.unenforcedForeignKeys). A retry and a replay that meet a purge of their request wait for it, then
// find the request gone: NOT_FOUND, nothing stored, no credit spent.
func TestRetryAndReplayWaitForThePurge(t *testing.T) {
	t.Parallel()
	dbtest.SkipUnlessPostgres(t)
	env, tn, srv := relaytest.StartWithServer(t, 10)
	down := newHook(t, always(http.StatusInternalServerError))
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": down.URL, "maxAttempts": 1})
	reqID := env.Send(srv.Key, "/evt", `{"n":1}`)
	r := waitRequest(t, env, tn.Member, reqID, "request failed", func(r requestView) bool { return r.Status == "FAILED" })
	require.Equal(t, 9, balance(t, env, tn))

	// A purge batch holding the request and its delivery, as retention does, until it commits.
	ctx := context.Background()
	purge, err := env.DB.SQL.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer purge.Rollback()
	var pid int
	require.NoError(t, purge.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
	_, err = purge.ExecContext(ctx, `SELECT id FROM requests WHERE id = $1 FOR UPDATE`, reqID)
	require.NoError(t, err)
	_, err = purge.ExecContext(ctx, `SELECT id FROM deliveries WHERE request_id = $1 FOR UPDATE`, reqID)
	require.NoError(t, err)

	codes := make(chan string, 2)
	go func() {
		_, code := mutateDelivery(t, env, tn.Member, "retryDelivery", r.Deliveries[0].ID)
		codes <- code
	}()
	go func() {
		_, code := replay(t, env, tn.Member, reqID)
		codes <- code
	}()
	relaytest.Eventually(t, 10*time.Second, "retry and replay waiting for the purge", func() bool {
		var waiting int
		err := env.DB.SQL.QueryRowContext(ctx,
			`SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, pid).Scan(&waiting)
		require.NoError(t, err)
		return waiting == 2
	})
	for _, q := range []string{
		`DELETE FROM attempts WHERE delivery_id IN (SELECT id FROM deliveries WHERE request_id = $1)`,
		`DELETE FROM deliveries WHERE request_id = $1`,
		`DELETE FROM requests WHERE id = $1`,
	} {
		_, err := purge.ExecContext(ctx, q, reqID)
		require.NoError(t, err)
	}
	require.NoError(t, purge.Commit())

	require.Equal(t, "NOT_FOUND", <-codes)
	require.Equal(t, "NOT_FOUND", <-codes)
	var deliveries, replays int
	require.NoError(t, env.DB.SQL.QueryRowContext(ctx,
		`SELECT (SELECT count(*) FROM deliveries WHERE request_id = $1), (SELECT count(*) FROM requests WHERE replay_of_id = $1)`,
		reqID).Scan(&deliveries, &replays))
	require.Zero(t, deliveries, "no delivery of a purged request")
	require.Zero(t, replays, "no replay of a purged request")
	require.Equal(t, 9, balance(t, env, tn), "no credit spent")
}
