//go:build chaos

package chaos_test

import (
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
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
// while requests keep arriving (50/s), then keeps the load on for 12 s more. Terminating a database's backends
// is, seen from the server, what a restart of PostgreSQL does (every connection dies at once, mid-transaction
// or idle) without touching anyone else: the test's server has a database of its own, so only its backends
// are terminated. TestRestartPostgresUnderLoad restarts the real thing where CI allows it.
//
// The process must ride it out without a restart: every request is answered 202 or 503 (never a hang, never
// another status), every 202 is stored and delivered, and intake and delivery recover within 10 s of the
// last termination.
func TestTerminateBackendsUnderLoad(t *testing.T) {
	rideOut(t, func(admin *sql.DB, name string) int {
		var n int
		require.NoError(t, admin.QueryRow(`SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = $1 AND application_name <> 'adal-chaos-test'`, name).Scan(&n))
		return n
	})
}

// TestRestartPostgresUnderLoad restarts the PostgreSQL cluster twice, 5 s apart, under the same load and with
// the same demands as TestTerminateBackendsUnderLoad: while the database is away intake answers 503 at once,
// and once it is back intake and delivery recover by themselves, losing nothing accepted. The restart command
// comes from ADAL_CHAOS_PG_RESTART (CI sets it to pg_ctlcluster … restart); without it the test is skipped, as
// it stops a cluster that other work on the machine may be using.
func TestRestartPostgresUnderLoad(t *testing.T) {
	restart := os.Getenv("ADAL_CHAOS_PG_RESTART")
	if restart == "" {
		t.Skip("set ADAL_CHAOS_PG_RESTART to a command that restarts the PostgreSQL of ADAL_TEST_DATABASE_URL")
	}
	var calls int
	rideOut(t, func(*sql.DB, string) int {
		calls++
		if calls != 1 && calls != 6 {
			return 0
		}
		out, err := exec.Command("sh", "-c", restart).CombinedOutput()
		require.NoError(t, err, "restart PostgreSQL: %s", out)
		return 1
	})
}

// rideOut runs a server under load and calls disrupt once a second for 10 s; disrupt returns how many
// connections it cut. Then it checks that nothing was lost and that intake and delivery recovered.
func rideOut(t *testing.T, disrupt func(admin *sql.DB, database string) int) {
	const (
		rate     = 50
		chaos    = 10 * time.Second
		recovery = 12 * time.Second
		hang     = 10 * time.Second
	)
	db, name := newOwnDatabase(t)
	proc := newServerProcess(t, append(db.env, "ADAL_LEASE=3s", "ADAL_RESCUE_INTERVAL=500ms", "ADAL_RETRY_UNIT=50ms")...)
	proc.Start()
	fx := proc.Setup(1_000_000)
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
	fx.Recipient(proc, rcv.URL+"/hook", 10)

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
				status, id := post(client, proc.URL, fx.Key, fmt.Sprintf(`{"i":%d}`, i))
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
		terminated += disrupt(admin, name)
		time.Sleep(time.Second)
	}
	chaosEnd := time.Now()
	time.Sleep(recovery)
	close(stopLoad)
	<-loadDone
	wg.Wait()

	require.True(t, proc.Alive(), "the server process died")
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
	t.Logf("%d requests: %d accepted, %d answered 503; %d disruptions (backends terminated, or restarts) over %v; slowest answer %v; last 503 %v after the last one",
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
