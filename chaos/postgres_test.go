//go:build chaos

package chaos_test

import (
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/storage/dbtest"
)

// sent is one request of the load and its answer.
type sent struct {
	at      time.Time
	status  int // 0: no answer within the client's timeout, or a transport error
	latency time.Duration
	id      string
}

// TestTerminateBackendsUnderLoad terminates every PostgreSQL backend of a running server once a second for 10 s
// while requests keep arriving (50/s), then keeps the load on for 12 s more. It does not restart PostgreSQL:
// the cluster is shared with other work on the machine, and terminating a database's backends is the same
// failure as seen from the server (every connection dies at once, mid-transaction or idle) without touching
// anyone else. The test's server has a database of its own, so only its backends are terminated.
//
// The process must ride it out without a restart: every request is answered 202 or 503 (never a hang, never
// another status), every 202 is stored and delivered, and intake and delivery recover within 10 s of the
// last termination.
func TestTerminateBackendsUnderLoad(t *testing.T) {
	const (
		rate     = 50
		chaos    = 10 * time.Second
		recovery = 12 * time.Second
		hang     = 10 * time.Second
	)
	db, name := newOwnDatabase(t)
	proc := newServerProcess(t, append(db.env, "ADAL_LEASE=3s", "ADAL_RESCUE_INTERVAL=500ms", "ADAL_RETRY_UNIT=50ms")...)
	proc.start()
	fx := setup(t, proc, 1_000_000)
	var mu sync.Mutex
	delivered := map[string]time.Time{}
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if _, ok := delivered[r.Header.Get("X-Adal-Request-Id")]; !ok {
			delivered[r.Header.Get("X-Adal-Request-Id")] = time.Now()
		}
		mu.Unlock()
	}))
	t.Cleanup(rcv.Close)
	fx.recipient(t, proc, rcv.URL+"/hook", 10)

	admin, err := sql.Open("postgres", os.Getenv(dbtest.EnvURL)) // on another database: never terminated
	require.NoError(t, err)
	defer admin.Close()

	client := &http.Client{Timeout: hang}
	var results []*sent
	var wg sync.WaitGroup
	stopLoad := make(chan struct{})
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		tick := time.NewTicker(time.Second / rate)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stopLoad:
				return
			case <-tick.C:
			}
			s := &sent{at: time.Now()}
			mu.Lock()
			results = append(results, s)
			mu.Unlock()
			wg.Go(func() {
				status, id := post(client, proc.url, fx.key, fmt.Sprintf(`{"i":%d}`, i))
				mu.Lock()
				s.status, s.id, s.latency = status, id, time.Since(s.at)
				mu.Unlock()
			})
		}
	}()

	time.Sleep(2 * time.Second) // the load runs normally first
	chaosStart := time.Now()
	terminated := 0
	for time.Since(chaosStart) < chaos {
		var n int
		require.NoError(t, admin.QueryRow(`SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = $1 AND application_name <> 'adal-chaos-test'`, name).Scan(&n))
		terminated += n
		time.Sleep(time.Second)
	}
	chaosEnd := time.Now()
	time.Sleep(recovery)
	close(stopLoad)
	<-loadDone
	wg.Wait()

	require.True(t, proc.alive(), "the server process died")
	// The load is over: results are final. Deliveries may still arrive; work on a copy.
	mu.Lock()
	seen := make(map[string]time.Time, len(delivered))
	for id, at := range delivered {
		seen[id] = at
	}
	mu.Unlock()
	var accepted, unavailable, lastFailure int
	var acceptedBeforeEnd []string
	var worst time.Duration
	for i, s := range results {
		worst = max(worst, s.latency)
		switch s.status {
		case http.StatusAccepted:
			accepted++
			if s.at.Before(chaosEnd) {
				acceptedBeforeEnd = append(acceptedBeforeEnd, s.id)
			}
		case http.StatusServiceUnavailable:
			unavailable++
			lastFailure = i
		default:
			t.Errorf("request at +%v: status %d after %v (want 202 or 503 within %v)", s.at.Sub(chaosStart).Round(time.Millisecond),
				s.status, s.latency.Round(time.Millisecond), hang)
		}
	}
	intakeRecovery := time.Duration(0)
	if unavailable > 0 {
		intakeRecovery = max(0, results[lastFailure].at.Sub(chaosEnd))
	}
	t.Logf("%d requests: %d accepted, %d answered 503; %d backends terminated over %v; slowest answer %v; last 503 %v after the last termination",
		len(results), accepted, unavailable, terminated, chaos, worst.Round(time.Millisecond), intakeRecovery.Round(time.Millisecond))
	require.Positive(t, terminated)
	require.LessOrEqual(t, intakeRecovery, 10*time.Second, "intake did not recover within 10 s")

	// Every 202 is stored.
	require.GreaterOrEqual(t, db.count(t, `SELECT COUNT(*) FROM requests`), accepted, "accepted requests lost")
	for _, s := range results {
		if s.status == http.StatusAccepted {
			require.Equal(t, 1, db.count(t, `SELECT COUNT(*) FROM requests WHERE id = `+mustInt(t, s.id)),
				"accepted request %s lost", s.id)
		}
	}
	// Delivery recovers: every request accepted up to the last termination reaches the receiver within 10 s
	// of it.
	deadline := chaosEnd.Add(10 * time.Second)
	var lastDelivered time.Time
	for _, id := range acceptedBeforeEnd {
		at, ok := seen[id]
		require.True(t, ok, "accepted request %s never delivered", id)
		if at.After(lastDelivered) {
			lastDelivered = at
		}
	}
	t.Logf("every request accepted during the chaos delivered %v after the last termination",
		max(0, lastDelivered.Sub(chaosEnd)).Round(time.Millisecond))
	require.False(t, lastDelivered.After(deadline), "delivery did not recover within 10 s")
	// And their deliveries are all terminal (recorded, or rescued and retried) by now, 12 s after it.
	open := db.count(t, `SELECT COUNT(*) FROM deliveries d JOIN requests r ON r.id = d.request_id
		WHERE d.status NOT IN ('SUCCEEDED', 'FAILED') AND r.received_at < '`+chaosEnd.UTC().Format(time.RFC3339Nano)+`'`)
	require.Zero(t, open, "deliveries of requests accepted during the chaos are still open")
}
