//go:build chaos

package chaos_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestKillRightAfterAccept kills the server with SIGKILL the moment the first of a burst of concurrent requests
// is answered 202, five times. After each restart every request answered 202 is stored with exactly one
// REQUEST_ACCEPTED debit, no debit names a request that is not stored (a request cut before its commit left
// nothing behind, one cut after its commit but before its answer is stored and debited once — its sender,
// who got no answer, retries), and the tenant's balance is the sum of its ledger.
func TestKillRightAfterAccept(t *testing.T) {
	const (
		rounds  = 5
		burst   = 40
		credits = 10_000
	)
	db := newDatabase(t)
	proc := newServerProcess(t, db.env...)
	proc.Start()
	fx := proc.Setup(credits)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(rcv.Close)
	fx.Recipient(proc, rcv.URL+"/hook", 3)

	client := &http.Client{Timeout: 10 * time.Second}
	answered := map[string]bool{}
	for round := range rounds {
		first := make(chan struct{})
		var once sync.Once
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range burst {
			wg.Go(func() {
				status, id := post(client, proc.URL, fx.Key, fmt.Sprintf(`{"round":%d,"i":%d}`, round, i))
				if status == http.StatusAccepted {
					mu.Lock()
					answered[id] = true
					mu.Unlock()
					once.Do(func() { close(first) })
				}
			})
		}
		select {
		case <-first:
		case <-time.After(20 * time.Second):
			t.Fatal("no request accepted")
		}
		proc.Kill()
		wg.Wait() // the others fail (connection reset or refused) or were answered before the kill
		db.settled(t)
		proc.Start()

		for id := range answered {
			require.Equal(t, 1, db.count(t, `SELECT COUNT(*) FROM requests WHERE id = `+mustInt(t, id)), "request %s answered 202", id)
			require.Equal(t, 1, db.count(t, `SELECT COUNT(*) FROM ledger_entries WHERE reason = 'REQUEST_ACCEPTED'
				AND reference = 'request:`+mustInt(t, id)+`'`), "request %s debited once", id)
		}
		stored := db.count(t, `SELECT COUNT(*) FROM requests`)
		debits := db.count(t, `SELECT COUNT(*) FROM ledger_entries WHERE reason = 'REQUEST_ACCEPTED'`)
		require.Equal(t, stored, debits, "one debit per stored request")
		require.Zero(t, db.count(t, `SELECT COUNT(*) FROM ledger_entries l WHERE l.reason = 'REQUEST_ACCEPTED'
			AND NOT EXISTS (SELECT 1 FROM requests r WHERE l.reference = 'request:' || r.id)`), "a debit without its request")
		require.Zero(t, db.count(t, `SELECT COUNT(*) FROM tenants t WHERE t.credit_balance <>
			(SELECT COALESCE(SUM(amount), 0) FROM ledger_entries l WHERE l.tenant_id = t.id)`), "balance and ledger disagree")
		t.Logf("round %d: %d answered 202 so far, %d stored", round+1, len(answered), stored)
	}
}
