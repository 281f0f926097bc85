//go:build chaos

package chaos_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestKillMidBulkRetry kills the server with SIGKILL five times while a bulk retry job runs, restarting it on
// the same database in between. The job is taken over after each kill once its lease lapses and ends
// SUCCEEDED: every matched delivery retried exactly once (one MANUAL_RETRY delivery, one debit naming it),
// nothing else retried, the balance the sum of the ledger.
func TestKillMidBulkRetry(t *testing.T) {
	const (
		kills    = 5
		requests = 90 // under the 100 attempts after which failing ones disable the recipient
		lease    = 2 * time.Second
	)
	db := newDatabase(t)
	proc := newServerProcess(t, append(db.env, "ADAL_LEASE="+lease.String(), "ADAL_RESCUE_INTERVAL=200ms")...)
	proc.Start()
	fx := proc.Setup(10_000)
	// Fails every first delivery; then holds each retry a random 0–200 ms before answering 200, so the job goes
	// at the receiver's pace and a kill finds it under way.
	var failing atomic.Bool
	failing.Store(true)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		select {
		case <-time.After(time.Duration(rand.IntN(200)) * time.Millisecond):
			w.WriteHeader(http.StatusOK)
		case <-req.Context().Done():
		}
	}))
	t.Cleanup(rcv.Close)
	fx.Recipient(proc, rcv.URL, 1)
	client := &http.Client{Timeout: 10 * time.Second}
	for i := range requests {
		status, _ := post(client, proc.URL, fx.Key, fmt.Sprintf(`{"i":%d}`, i))
		require.Equal(t, http.StatusAccepted, status)
	}
	waitFor(t, 30*time.Second, "every delivery to fail", func() bool {
		return db.count(t, `SELECT COUNT(*) FROM deliveries WHERE status = 'FAILED'`) == requests
	})
	failing.Store(false)

	var job struct{ BulkRetry struct{ ID string } }
	proc.GraphQL(fx.Owner, `mutation($s: ID!){ bulkRetry(filter: {serverId: $s, status: FAILED}){ id } }`,
		map[string]any{"s": fx.ServerID}, &job)
	done := func() int {
		return db.count(t, `SELECT done FROM bulk_jobs WHERE id = `+mustInt(t, job.BulkRetry.ID))
	}
	for k := range kills {
		if k > 0 {
			proc.Start()
		}
		before := done()
		waitFor(t, 60*time.Second, "the job to go on", func() bool { return done() > before })
		proc.Kill()
		db.settled(t)
		t.Logf("kill %d: %d of %d retried", k+1, done(), requests)
	}
	proc.Start()
	waitFor(t, 90*time.Second, "the job to succeed", func() bool {
		return db.count(t, `SELECT COUNT(*) FROM bulk_jobs WHERE status = 'SUCCEEDED' AND done = `+fmt.Sprint(requests)) == 1
	})

	require.Equal(t, requests, db.count(t, `SELECT COUNT(*) FROM deliveries WHERE trigger = 'MANUAL_RETRY'`))
	require.Zero(t, db.count(t, `SELECT COUNT(*) FROM (SELECT request_id FROM deliveries WHERE trigger = 'MANUAL_RETRY'
		GROUP BY request_id HAVING COUNT(*) > 1) twice`), "a request retried twice")
	require.Equal(t, requests, db.count(t, `SELECT COUNT(*) FROM deliveries WHERE trigger = 'AUTOMATIC' AND superseded`))
	require.Equal(t, requests, db.count(t, `SELECT COUNT(DISTINCT reference) FROM ledger_entries WHERE reason = 'MANUAL_RETRY'`))
	require.Equal(t, requests, db.count(t, `SELECT COUNT(*) FROM ledger_entries WHERE reason = 'MANUAL_RETRY'`), "one debit per retry")
	require.Zero(t, db.count(t, `SELECT COUNT(*) FROM ledger_entries l WHERE l.reason = 'MANUAL_RETRY' AND NOT EXISTS
		(SELECT 1 FROM deliveries d WHERE l.reference = 'delivery:' || d.id AND d.superseded)`), "a debit naming no retried delivery")
	require.Zero(t, db.count(t, `SELECT COUNT(*) FROM tenants t WHERE t.credit_balance <>
		(SELECT COALESCE(SUM(amount), 0) FROM ledger_entries l WHERE l.tenant_id = t.id)`), "balance and ledger disagree")
	require.Equal(t, requests, db.count(t, `SELECT credits_spent FROM bulk_jobs`))
	require.Zero(t, db.count(t, `SELECT COUNT(*) FROM bulk_job_items`))
}
