package bench

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Arrival is one delivery attempt as the receiver saw it.
type Arrival struct {
	RequestID int64
	Attempt   int
	// At is when the handler began: the request line and headers have been read, the body not yet.
	At time.Time
}

// hangPath starts the URLs of recipients that never answer: the receiver holds their calls until the sender
// gives up (the recipient's timeout) or the bench lets them go (Release). They are not arrivals.
const hangPath = "/hang"

// Receiver is the recipients' endpoint: a loopback HTTP server that notes every attempt and answers at once,
// except under hangPath.
type Receiver struct {
	srv      *httptest.Server
	respond  func(requestID int64, attempt int) int
	count    atomic.Int64
	shaped   atomic.Int64 // arrivals as the shaping scenario's transformation makes them
	mu       sync.Mutex
	got      []Arrival
	released chan struct{}
	release  sync.Once
}

// newReceiver starts a receiver; respond chooses the status of each attempt (nil: always 200).
func newReceiver(respond func(requestID int64, attempt int) int) *Receiver {
	r := &Receiver{respond: respond, released: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	// Adal's sender keeps an idle connection per worker to a host (egress.NewTransport); let the receiver keep
	// them as long.
	r.srv.Config.IdleTimeout = 2 * time.Minute
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if strings.HasPrefix(req.URL.Path, hangPath) {
		select {
		case <-req.Context().Done():
		case <-r.released:
		}
		return
	}
	at := time.Now()
	id, _ := strconv.ParseInt(req.Header.Get("X-Adal-Request-Id"), 10, 64)
	attempt, _ := strconv.Atoi(req.Header.Get("X-Adal-Attempt"))
	var head [len(shapedPrefix)]byte
	n, _ := io.ReadFull(req.Body, head[:])
	_, _ = io.Copy(io.Discard, req.Body)
	if req.Header.Get(shapedHeader) != "" && string(head[:n]) == shapedPrefix {
		r.shaped.Add(1)
	}
	status := http.StatusOK
	if r.respond != nil {
		status = r.respond(id, attempt)
	}
	r.mu.Lock()
	r.got = append(r.got, Arrival{RequestID: id, Attempt: attempt, At: at})
	r.mu.Unlock()
	r.count.Add(1)
	w.WriteHeader(status)
}

// URL is the base URL recipients point at.
func (r *Receiver) URL() string { return r.srv.URL }

// Count is the number of attempts received so far.
func (r *Receiver) Count() int64 { return r.count.Load() }

// Shaped is the number of attempts received so far that carry shapedHeader and a body wrapped in shapedPrefix.
func (r *Receiver) Shaped() int64 { return r.shaped.Load() }

// Arrivals returns a copy of everything received.
func (r *Receiver) Arrivals() []Arrival {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Arrival, len(r.got))
	copy(out, r.got)
	return out
}

// Reset forgets what was received.
func (r *Receiver) Reset() {
	r.mu.Lock()
	r.got = r.got[:0]
	r.mu.Unlock()
	r.count.Store(0)
	r.shaped.Store(0)
}

// Release lets every held call go, and every later one through at once.
func (r *Receiver) Release() { r.release.Do(func() { close(r.released) }) }

// Close stops the receiver.
func (r *Receiver) Close() {
	r.Release()
	r.srv.Close()
}
