package scheduler_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/internal/testproc"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/storage/dbtest"
)

func TestMain(m *testing.M) { os.Exit(testproc.Run(m)) }

// holdingReceiver holds every call open until released, and records each (path, request, attempt).
type holdingReceiver struct {
	*httptest.Server
	mu      sync.Mutex
	calls   []heldCall
	release chan struct{}
}

type heldCall struct {
	path    string
	request string
	attempt int
}

func newHoldingReceiver(t *testing.T) *holdingReceiver {
	h := &holdingReceiver{release: make(chan struct{})}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reading the body lets the server notice when the caller hangs up (r.Context() ends).
		_, _ = io.Copy(io.Discard, r.Body)
		h.mu.Lock()
		h.calls = append(h.calls, heldCall{r.URL.Path, r.Header.Get("X-Adal-Request-Id"), atoiOr(r.Header.Get("X-Adal-Attempt"))})
		release := h.release
		h.mu.Unlock()
		select {
		case <-release:
			w.WriteHeader(http.StatusOK)
		case <-r.Context().Done(): // the caller went away (was killed)
		}
	}))
	t.Cleanup(func() { h.open(); h.Close() })
	return h
}

// open releases held calls and lets later ones through at once.
func (h *holdingReceiver) open() {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.release:
	default:
		close(h.release)
	}
}

func (h *holdingReceiver) received() []heldCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]heldCall(nil), h.calls...)
}

type rescuedAttempt struct {
	Number     int
	Status     string
	ErrorKind  *string
	StartedAt  time.Time
	FinishedAt time.Time
}

type rescuedDelivery struct {
	ID           string
	Status       string
	AttemptCount int
	MaxAttempts  int
	Recipient    struct{ ID, URL string }
	Attempts     []rescuedAttempt
}

// A server process killed with SIGKILL while attempts are in flight loses nothing: once restarted, its
// rescuer records each of them as an INTERRUPTED attempt (which counts) when the lease expires, and the
// deliveries go on per their schedule — retried where attempts remain, FAILED where they do not.
func TestKilledServerLosesNoDelivery(t *testing.T) {
	t.Parallel()
	const (
		requests = 5
		lease    = 3 * time.Second
	)
	env := []string{
		"ADAL_RETRY_UNIT=20ms",
		"ADAL_LEASE=" + lease.String(),
		"ADAL_RESCUE_INTERVAL=250ms",
		"ADAL_LOG_LEVEL=info",
	}
	if dbtest.Postgres() {
		env = append(env, "ADAL_DATABASE_URL="+dbtest.NewSchema(t), "ADAL_DATA_DIR=")
	} else {
		env = append(env, "ADAL_DATA_DIR="+dbtest.DataDir(t), "ADAL_DATABASE_URL=")
	}
	proc := testproc.NewServer(t, env...)
	proc.Start()
	fx := proc.Setup(100)
	rcv := newHoldingReceiver(t)
	retrying := fx.Recipient(proc, rcv.URL+"/retrying", 3) // an interrupted attempt leaves two
	lastTry := fx.Recipient(proc, rcv.URL+"/last-try", 1)  // the interrupted attempt was its only one

	for i := range requests {
		resp, err := http.Post(proc.URL+"/in/"+fx.Key, "application/json", strings.NewReader(strconv.Itoa(i)))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusAccepted, resp.StatusCode)
	}
	relaytest.Eventually(t, 20*time.Second, "every delivery's first attempt to be held by the receiver", func() bool {
		return len(rcv.received()) == 2*requests
	})
	killedAt := time.Now()
	proc.Kill()
	rcv.open()
	proc.Start()

	// Every delivery reaches a terminal state.
	var deliveries []rescuedDelivery
	relaytest.Eventually(t, 40*time.Second, "every delivery to settle", func() bool {
		var out struct {
			Requests struct {
				Edges []struct {
					Node struct{ Deliveries []rescuedDelivery }
				}
			}
		}
		proc.GraphQL(fx.Owner, `query($s: ID!){ requests(serverId: $s, first: 100){ edges { node { deliveries {
			id status attemptCount maxAttempts recipient { id url } attempts { number status errorKind startedAt finishedAt } } } } } }`,
			map[string]any{"s": fx.ServerID}, &out)
		deliveries = deliveries[:0]
		settled := len(out.Requests.Edges) == requests
		for _, e := range out.Requests.Edges {
			for _, d := range e.Node.Deliveries {
				deliveries = append(deliveries, d)
				settled = settled && (d.Status == "SUCCEEDED" || d.Status == "FAILED")
			}
		}
		return settled
	})
	t.Logf("all settled %v after the kill", time.Since(killedAt).Round(time.Millisecond))

	require.Len(t, deliveries, 2*requests, "no delivery lost")
	for _, d := range deliveries {
		require.LessOrEqual(t, d.AttemptCount, d.MaxAttempts, "delivery %s", d.ID)
		require.Len(t, d.Attempts, d.AttemptCount, "delivery %s", d.ID)
		first := d.Attempts[0]
		require.Equal(t, 1, first.Number)
		require.Equal(t, "FAILED", first.Status)
		require.NotNil(t, first.ErrorKind)
		require.Equal(t, "INTERRUPTED", *first.ErrorKind, "the attempt in flight at the kill is recorded as interrupted")
		// Rescued only once its lease had expired, and well within a minute after.
		held := first.FinishedAt.Sub(first.StartedAt)
		require.GreaterOrEqual(t, held, lease, "delivery %s rescued before its lease expired", d.ID)
		require.Less(t, held, lease+60*time.Second)
		switch d.Recipient.ID {
		case retrying:
			require.Equal(t, "SUCCEEDED", d.Status)
			require.Equal(t, 2, d.AttemptCount, "the rescue scheduled the next attempt")
			require.Equal(t, "SUCCEEDED", d.Attempts[1].Status)
			require.False(t, d.Attempts[1].StartedAt.Before(first.FinishedAt), "the retry started before the rescue")
		case lastTry:
			require.Equal(t, "FAILED", d.Status, "no attempt left after the interrupted one")
			require.Equal(t, 1, d.AttemptCount)
		default:
			t.Fatalf("delivery %s to unknown recipient %s", d.ID, d.Recipient.ID)
		}
	}

	// The receiver saw each attempt once: the five held ones per recipient, and the rescued retries.
	seen := map[heldCall]int{}
	for _, c := range rcv.received() {
		seen[c]++
	}
	for c, n := range seen {
		require.Equal(t, 1, n, "%+v received %d times", c, n)
	}
	require.Len(t, seen, 3*requests)
	for i := range seen {
		if i.path == "/last-try" {
			require.Equal(t, 1, i.attempt)
		}
	}
}
