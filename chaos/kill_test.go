//go:build chaos

package chaos_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// reception is one attempt as the receiver saw it.
type reception struct {
	path    string // which recipient
	request string
	attempt int
}

// slowReceiver answers 200, after holding each call open for a random 0–400 ms, so that a kill always finds
// attempts in flight. It counts calls it is holding.
type slowReceiver struct {
	*httptest.Server
	mu      sync.Mutex
	got     []reception
	holding atomic.Int64
}

func newSlowReceiver(t *testing.T) *slowReceiver {
	r := &slowReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		attempt, _ := strconv.Atoi(req.Header.Get("X-Adal-Attempt"))
		r.mu.Lock()
		r.got = append(r.got, reception{req.URL.Path, req.Header.Get("X-Adal-Request-Id"), attempt})
		r.mu.Unlock()
		r.holding.Add(1)
		defer r.holding.Add(-1)
		select {
		case <-time.After(time.Duration(rand.IntN(400)) * time.Millisecond):
			w.WriteHeader(http.StatusOK)
		case <-req.Context().Done(): // the process was killed
		}
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *slowReceiver) receptions() []reception {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]reception(nil), r.got...)
}

// TestKillMidDeliveryTenTimes kills the server with SIGKILL ten times in a row, each time while the receiver
// holds attempts open, restarting it on the same database in between and accepting more requests each round.
// In the end: no accepted request or delivery is lost, every delivery is terminal, no delivery has more
// attempts than maxAttempts (nor attempt rows other than its count), every attempt cut by a kill is recorded as
// INTERRUPTED after its lease lapsed and within 60 s, the receiver never saw the same attempt of a delivery
// twice, and it saw a delivery again only as often as attempts were in flight at the kills.
func TestKillMidDeliveryTenTimes(t *testing.T) {
	const (
		kills       = 10
		perRound    = 15
		maxAttempts = 10
		lease       = 2 * time.Second
	)
	db := newDatabase(t)
	proc := newServerProcess(t, append(db.env,
		"ADAL_LEASE="+lease.String(),
		"ADAL_RESCUE_INTERVAL=200ms",
		"ADAL_RETRY_UNIT=20ms", // retries after a rescue come quickly: 4, 9, 16… × 20 ms
	)...)
	proc.Start()
	fx := proc.Setup(100_000)
	rcv := newSlowReceiver(t)
	recipients := []string{"/a", "/b"}
	for _, path := range recipients {
		fx.Recipient(proc, rcv.URL+path, maxAttempts)
	}

	client := &http.Client{Timeout: 10 * time.Second}
	accepted := map[string]bool{}
	cut := map[string]bool{} // "delivery:attempt" of every attempt in flight at a kill
	started := time.Now()
	for round := range kills {
		if round > 0 {
			proc.Start()
		}
		for i := range perRound {
			status, id := post(client, proc.URL, fx.Key, fmt.Sprintf(`{"round":%d,"i":%d}`, round, i))
			require.Equal(t, http.StatusAccepted, status, "round %d request %d", round, i)
			accepted[id] = true
		}
		waitFor(t, 20*time.Second, "attempts in flight at the receiver", func() bool { return rcv.holding.Load() > 0 })
		proc.Kill()
		db.settled(t)
		// The dead process's database state is frozen: what is IN_PROGRESS now is every attempt the kill cut.
		// (One cut by the previous kill may still be waiting for its lease to lapse: it counts once.)
		rows, err := db.SQL.Query(`SELECT id, attempt_count FROM deliveries WHERE status = 'IN_PROGRESS'`)
		require.NoError(t, err)
		inFlight := 0
		for rows.Next() {
			var id, attempt int64
			require.NoError(t, rows.Scan(&id, &attempt))
			cut[fmt.Sprintf("%d:%d", id, attempt)] = true
			inFlight++
		}
		require.NoError(t, rows.Close())
		t.Logf("kill %d: %d attempts in flight, receiver holding %d", round+1, inFlight, rcv.holding.Load())
	}
	proc.Start()
	waitFor(t, 90*time.Second, "every delivery to be terminal", func() bool {
		return db.count(t, `SELECT COUNT(*) FROM deliveries WHERE status NOT IN ('SUCCEEDED', 'FAILED')`) == 0
	})
	t.Logf("%d kills, %d requests accepted, all settled %v after the first start", kills, len(accepted),
		time.Since(started).Round(time.Millisecond))

	// Nothing lost: every 202 is a stored request with one delivery per recipient.
	require.Equal(t, len(accepted), db.count(t, `SELECT COUNT(*) FROM requests`))
	for id := range accepted {
		n := db.count(t, `SELECT COUNT(*) FROM deliveries WHERE request_id = `+mustInt(t, id))
		require.Equal(t, len(recipients), n, "request %s", id)
	}
	// Attempts: never more than allowed, and the rows match the count.
	require.Zero(t, db.count(t, `SELECT COUNT(*) FROM deliveries WHERE attempt_count > max_attempts`))
	require.Zero(t, db.count(t, `SELECT COUNT(*) FROM deliveries d WHERE attempt_count <>
		(SELECT COUNT(*) FROM attempts a WHERE a.delivery_id = d.id)`))
	// Every attempt a kill cut is rescued: recorded INTERRUPTED, after its lease and within 60 s of it lapsing.
	interrupted := db.count(t, `SELECT COUNT(*) FROM attempts WHERE error_kind = 'INTERRUPTED'`)
	inFlightAtKills := len(cut)
	require.Positive(t, inFlightAtKills)
	require.Equal(t, inFlightAtKills, interrupted, "every attempt in flight at a kill is recorded as interrupted, once")
	rows, err := db.SQL.Query(`SELECT started_at, finished_at FROM attempts WHERE error_kind = 'INTERRUPTED'`)
	require.NoError(t, err)
	for rows.Next() {
		var start, end time.Time
		require.NoError(t, rows.Scan(&start, &end))
		held := end.Sub(start)
		require.GreaterOrEqual(t, held, lease-time.Millisecond, "rescued before its lease lapsed")
		require.Less(t, held, lease+60*time.Second, "rescued more than 60 s after its lease lapsed")
	}
	require.NoError(t, rows.Close())

	// At the receiver: an attempt is never sent twice, and a delivery is seen more than once only for the
	// attempts the kills cut (their outcome was lost, so they were sent again).
	seen := map[reception]int{}
	perDelivery := map[[2]string]int{}
	for _, r := range rcv.receptions() {
		seen[r]++
		perDelivery[[2]string{r.path, r.request}]++
	}
	for r, n := range seen {
		require.Equal(t, 1, n, "attempt %+v sent %d times", r, n)
	}
	duplicates := 0
	for _, n := range perDelivery {
		duplicates += n - 1
	}
	t.Logf("%d attempts in flight at the kills, %d recorded interrupted, %d deliveries seen again at the receiver",
		inFlightAtKills, interrupted, duplicates)
	require.LessOrEqual(t, duplicates, inFlightAtKills)
	// Every delivery reached the receiver, unless each of its attempts was cut by a kill before it was sent
	// (then it FAILED with only interrupted attempts, which is also not a loss).
	unreceived := len(accepted)*len(recipients) - len(perDelivery)
	onlyCut := db.count(t, `SELECT COUNT(*) FROM deliveries d WHERE d.status = 'FAILED' AND NOT EXISTS
		(SELECT 1 FROM attempts a WHERE a.delivery_id = d.id AND (a.error_kind IS NULL OR a.error_kind <> 'INTERRUPTED'))`)
	require.LessOrEqual(t, unreceived, onlyCut, "deliveries that never reached the receiver")
	require.Zero(t, db.count(t, `SELECT COUNT(*) FROM deliveries WHERE status = 'FAILED' AND attempt_count < max_attempts`),
		"a delivery failed with attempts left")
	require.Equal(t, kills+1, proc.Starts)
}

func mustInt(t *testing.T, s string) string {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err, "id %q", s)
	return strconv.FormatInt(n, 10)
}
