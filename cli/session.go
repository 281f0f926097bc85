package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Reconnect backoff: doubling from the first wait up to the cap, back to the first after a connection that
// got as far as attaching.
const (
	firstBackoff = time.Second
	maxBackoff   = 30 * time.Second
)

// journalSweep is how often a connected CLI retries reporting journaled results.
const journalSweep = 15 * time.Second

const listenQuery = `subscription($recipientId: ID!) {
  cliListen(recipientId: $recipientId) {
    kind message deliveryId attempt leaseToken method path query headers { name value }
    bodyBase64 requestId idempotencyKey timeoutSeconds verified signatureHeaders { name value }
  }
}`

// listener is one `adal listen`: one connection at a time to the server, carrying one cliListen subscription
// per recipient, and the jobs being run, which outlive a connection. Results are reported over HTTP as soon
// as they exist; those that could not be wait in the recipient's journal for the next sweep or connection.
type listener struct {
	api       *apiClient
	routes    []*route
	out       *output
	local     *http.Client // to the local services
	now       func() time.Time
	keepAlive keepAlive
	giveUp    time.Duration
	health    *health // nil when --check-local is 0
	// journalDir holds the recipients' journals; refresh, with --server, adds the recipients created meanwhile
	// (nil: the listen keeps the recipients it started with).
	journalDir string
	refresh    *refresher

	mu        sync.Mutex
	conn      *wsClient // nil while disconnected
	jobs      sync.WaitGroup
	everReady bool
}

func newListener(api *apiClient, out *output, ka keepAlive, checkLocal, giveUp time.Duration) *listener {
	l := &listener{api: api, out: out, local: newLocalClient(), now: time.Now, keepAlive: ka, giveUp: giveUp}
	ka.onWake = func(slept time.Duration) {
		l.out.logf(yellow, "the computer was asleep for about %s: checking the connection", slept.Round(time.Second))
		l.api.http.CloseIdleConnections()
		if l.health != nil {
			l.health.checkNow()
		}
	}
	l.keepAlive = ka
	if checkLocal > 0 {
		l.health = newHealth(out, checkLocal)
	}
	return l
}

// open opens the journal of each target; a journal in use by another adal listen is refused.
func (l *listener) open(targets []target, journalDir string) error {
	l.journalDir = journalDir
	names := map[string]int{}
	for _, t := range targets {
		names[t.Name]++
	}
	for _, t := range targets {
		if _, err := l.add(t, names[t.Name] > 1); err != nil {
			l.close()
			return err
		}
	}
	return nil
}

// add opens t's journal and listens for it from the next subscription on; a recipient whose name another
// has too is labelled with its ID as well (dup).
func (l *listener) add(t target, dup bool) (*route, error) {
	j, err := openJournal(l.journalDir, l.api.base, t.RecipientID)
	if err != nil {
		return nil, err
	}
	label := t.Name
	if dup {
		label = fmt.Sprintf("%s#%s", t.Name, t.RecipientID)
	}
	r := &route{l: l, target: t, label: label, journal: j, running: map[jobKey]bool{}, reporting: map[jobKey]bool{}}
	if l.health != nil {
		r.check = l.health.watch(t.Forward)
	}
	l.routes = append(l.routes, r)
	return r, nil
}

// refresher looks, for listen --server, for CLI recipients created on the server while the listen runs.
type refresher struct {
	serverID string // by ID, so that a server renamed meanwhile is still found
	forward  string
	every    time.Duration
	skip     map[string]bool // recipients that could not be added (their journal is another listen's)
	full     bool            // the limit on recipients was reported
}

// refreshRoutes adds the CLI recipients of the server not listened for yet, and subscribes for each. A failed
// look is logged and tried again at the next refresh.
func (l *listener) refreshRoutes(ctx context.Context, subscribe func(*route) error) error {
	f := l.refresh
	s, ts, err := serverRecipients(ctx, l.api, f.serverID, f.forward, false)
	if err != nil {
		if ctx.Err() == nil {
			l.out.logf(yellow, "looking for new CLI recipients of server %s: %v (will retry)", f.serverID, err)
		}
		return nil
	}
	known, names := map[string]bool{}, map[string]bool{}
	for _, r := range l.routes {
		known[r.RecipientID], names[r.Name] = true, true
	}
	for _, t := range ts {
		if known[t.RecipientID] || f.skip[t.RecipientID] {
			continue
		}
		if len(l.live()) >= maxRecipients {
			if !f.full {
				f.full = true
				l.out.logf(yellow, "server %q has more CLI recipients than one adal listen serves (%d): not listening for %q and any others added", s.Name, maxRecipients, t.Name)
			}
			return nil
		}
		r, err := l.add(t, names[t.Name])
		if err != nil {
			f.skip[t.RecipientID] = true
			l.out.logf(yellow, "recipient %q, added to server %q: %v; not listening for it", t.Name, s.Name, err)
			continue
		}
		names[t.Name], r.added = true, true
		r.logForwarding()
		if err := subscribe(r); err != nil {
			return err
		}
	}
	return nil
}

func (l *listener) close() {
	for _, r := range l.routes {
		r.journal.Close()
	}
}

// live is the routes still listened for.
func (l *listener) live() []*route {
	var out []*route
	for _, r := range l.routes {
		if !r.gone {
			out = append(out, r)
		}
	}
	return out
}

// run connects, reconnecting with backoff, until ctx ends (nil), the server refuses for good (a
// configuration error), or the listen is lost for good (a *lostError).
func (l *listener) run(ctx context.Context) error {
	for _, r := range l.routes {
		r.logForwarding()
	}
	if l.health != nil {
		go l.health.run(ctx)
	}
	backoff, downSince := firstBackoff, l.now()
	var fatal error
	for {
		l.out.logf(plain, "connecting to %s …", l.api.base)
		attached, err := l.session(ctx)
		if ctx.Err() != nil {
			break
		}
		// The reports' pooled connections went the way of the websocket, most likely: a report must not
		// wait on one of them until its timeout.
		l.api.http.CloseIdleConnections()
		var lost *lostError
		if permanent(err) || errors.As(err, &lost) {
			fatal = err
			break
		}
		what := "cannot connect"
		if attached {
			what, backoff, downSince = "disconnected", firstBackoff, l.now()
		}
		if l.giveUp > 0 && l.now().Sub(downSince) >= l.giveUp {
			fatal = &lostError{fmt.Errorf("gave up after %s without the server: %w", l.giveUp, err)}
			break
		}
		l.disconnected(err, backoff, what, "")
		if !sleepCtx(ctx, backoff) {
			break
		}
		backoff = min(backoff*2, maxBackoff)
	}
	l.drain()
	if fatal != nil {
		return explainAuth(fatal)
	}
	l.out.emit(l.now(), head("stopped", l.now()), "stopped")
	return nil
}

// logForwarding says where r's deliveries go.
func (r *route) logForwarding() {
	r.l.out.logf(plain, "forwarding deliveries of recipient %s (%q of server %q) to %s (journal: %s)", r.RecipientID, r.Name, r.Server, r.Forward, r.journal.dir)
}

// permanent tells errors that retrying cannot fix.
func permanent(err error) bool {
	var auth *authError
	var gql gqlErrors
	return errors.As(err, &auth) || (errors.As(err, &gql) && gql.permanent())
}

// disconnectedEvent says the connection (or one recipient's subscription) ended, and when it is retried.
type disconnectedEvent struct {
	eventHead
	RecipientID string `json:"recipientId,omitempty"`
	Error       string `json:"error"`
	RetryInMs   int64  `json:"retryInMs"`
}

func (l *listener) disconnected(err error, retryIn time.Duration, what, recipientID string) {
	now := l.now()
	l.out.emit(now, disconnectedEvent{eventHead: head("disconnected", now), RecipientID: recipientID, Error: err.Error(), RetryInMs: retryIn.Milliseconds()},
		l.out.paint(yellow, fmt.Sprintf("%s: %v; retrying in %s", what, err, retryIn)))
}

// readyEvent says every recipient is attached: deliveries flow.
type readyEvent struct {
	eventHead
	RecipientID string           `json:"recipientId,omitempty"`
	Recipients  []readyRecipient `json:"recipients,omitempty"`
}

type readyRecipient struct {
	RecipientID string `json:"recipientId"`
	Recipient   string `json:"recipient"`
	Server      string `json:"server"`
	Forward     string `json:"forward"`
	// Connected is the server's greeting: what happens to the backlog, whether the recipient is active.
	Connected string `json:"connected"`
}

// announce says that every live recipient is attached: ready the first time, reconnected afterwards.
func (l *listener) announce() {
	now := l.now()
	ev := readyEvent{eventHead: head("ready", now)}
	for _, r := range l.live() {
		ev.Recipients = append(ev.Recipients, readyRecipient{RecipientID: r.RecipientID, Recipient: r.Name, Server: r.Server, Forward: r.Forward, Connected: r.greeting})
	}
	text := "ready — waiting for deliveries (Ctrl-C to stop)"
	if n := len(ev.Recipients); n > 1 {
		text = fmt.Sprintf("ready — listening for %d recipients, waiting for deliveries (Ctrl-C to stop)", n)
	}
	if l.everReady {
		ev.Type, text = "reconnected", "reconnected — waiting for deliveries"
	}
	l.everReady = true
	l.out.emit(now, ev, l.out.paint(green, text))
}

// opMessage is a message of one recipient's subscription; end marks its channel closed.
type opMessage struct {
	r   *route
	id  string
	m   wsMessage
	end bool
}

// session is one connection: report what the journals hold, subscribe for every live recipient, then run
// jobs until the connection ends (an error), a recipient refuses for good (an error), or ctx ends (nil; the
// connection is then kept for drain to report the last results).
func (l *listener) session(ctx context.Context) (attached bool, err error) {
	c, err := dialWS(ctx, l.api.base, l.api.token, l.keepAlive)
	if err != nil {
		return false, err
	}
	keep := false
	quit := make(chan struct{})
	defer func() {
		close(quit)
		if !keep {
			l.setConn(c, false)
			c.Close()
		}
	}()
	l.setConn(c, true)
	for _, r := range l.live() {
		if err := r.reportJournal(ctx); err != nil {
			return false, err
		}
	}
	merged := make(chan opMessage)
	subscribe := func(r *route) error {
		id, ch, err := c.start(ctx, listenQuery, map[string]any{"recipientId": r.RecipientID})
		if err != nil {
			return err
		}
		r.op, r.attached, r.retryAt = id, false, time.Time{}
		go func() {
			// Keep draining after quit: the reader waits for each message to be taken.
			for m := range ch {
				select {
				case merged <- opMessage{r: r, id: id, m: m}:
				case <-quit:
				}
			}
			select {
			case merged <- opMessage{r: r, id: id, end: true}:
			case <-quit:
			}
		}()
		return nil
	}
	for _, r := range l.live() {
		if err := subscribe(r); err != nil {
			return false, err
		}
	}
	announced := false
	sweep := time.NewTicker(journalSweep)
	defer sweep.Stop()
	resub := time.NewTimer(time.Hour)
	resub.Stop()
	defer resub.Stop()
	var refresh <-chan time.Time // nil: never
	if l.refresh != nil {
		t := time.NewTicker(l.refresh.every)
		defer t.Stop()
		refresh = t.C
	}
	// rearm sets the timer for the next subscription due again.
	rearm := func() {
		var next time.Time
		for _, r := range l.live() {
			if r.op == "" && !r.retryAt.IsZero() && (next.IsZero() || r.retryAt.Before(next)) {
				next = r.retryAt
			}
		}
		if !next.IsZero() {
			resub.Reset(max(next.Sub(l.now()), 0))
		}
	}
	// later schedules r's subscription again after its backoff.
	later := func(r *route, why error) {
		r.op, r.attached = "", false
		r.backoff = min(max(r.backoff*2, firstBackoff), maxBackoff)
		r.retryAt = l.now().Add(r.backoff)
		l.disconnected(fmt.Errorf("recipient %q: %w", r.label, why), r.backoff, "disconnected", r.RecipientID)
		rearm()
	}
	for {
		select {
		case <-sweep.C:
			for _, r := range l.live() {
				if err := r.reportJournal(ctx); err != nil {
					if permanent(err) {
						return attached, err
					}
					l.out.logf(yellow, "reporting from the journal of recipient %q: %v (will retry)", r.label, err)
				}
			}
		case <-ctx.Done():
			for _, r := range l.routes {
				if r.op != "" {
					c.stop(r.op)
				}
			}
			keep = true
			return attached, nil
		case <-c.Done():
			return attached, c.Err()
		case <-refresh:
			if err := l.refreshRoutes(ctx, subscribe); err != nil {
				return attached, err
			}
		case <-resub.C:
			for _, r := range l.live() {
				if r.op == "" && !r.retryAt.IsZero() && !l.now().Before(r.retryAt) {
					if err := subscribe(r); err != nil {
						return attached, err
					}
				}
			}
			rearm()
		case om := <-merged:
			r := om.r
			if om.id != r.op {
				continue // an earlier subscription of r
			}
			switch {
			case om.end:
				// The reader closes every channel when the connection ends; c.Done follows.
				<-c.Done()
				return attached, c.Err()
			case om.m.Type == "complete":
				later(r, errors.New("the server ended the subscription (the recipient was deleted, or the server is restarting)"))
			case om.m.Type == "error":
				var errs gqlErrors
				_ = json.Unmarshal(om.m.Payload, &errs)
				if err := l.refused(r, errs, later); err != nil {
					return attached, err
				}
			case om.m.Type == "next":
				var res struct {
					Data   struct{ CliListen *job }
					Errors gqlErrors
				}
				if err := json.Unmarshal(om.m.Payload, &res); err != nil {
					return attached, fmt.Errorf("undecodable message: %w", err)
				}
				if len(res.Errors) > 0 {
					c.stop(r.op)
					if err := l.refused(r, res.Errors, later); err != nil {
						return attached, err
					}
					continue
				}
				j := res.Data.CliListen
				switch {
				case j == nil:
				case j.Kind == "CONNECTED":
					first := !r.everAttached
					attached, r.attached, r.everAttached, r.backoff, r.greeting = true, true, true, 0, j.Message
					l.out.logf(plain, "connected: %s", j.Message)
					switch {
					case announced && first: // added by a refresh
						now := l.now()
						l.out.emit(now, readyEvent{eventHead: head("ready", now), RecipientID: r.RecipientID, Recipients: []readyRecipient{{
							RecipientID: r.RecipientID, Recipient: r.Name, Server: r.Server, Forward: r.Forward, Connected: j.Message,
						}}}, l.out.paint(green, fmt.Sprintf("recipient %q ready — waiting for its deliveries", r.label)))
					case announced:
						now := l.now()
						l.out.emit(now, readyEvent{eventHead: head("reconnected", now), RecipientID: r.RecipientID},
							l.out.paint(green, fmt.Sprintf("recipient %q reconnected", r.label)))
					case l.allAttached():
						announced = true
						l.announce()
					}
				case j.Kind == "JOB":
					r.accept(j)
				}
			}
		}
		if !announced && attached && l.allAttached() {
			// A recipient dropped for good while the others were attached.
			announced = true
			l.announce()
		}
	}
}

func (l *listener) allAttached() bool {
	for _, r := range l.live() {
		if !r.attached {
			return false
		}
	}
	return true
}

// refused handles a recipient's subscription refused by the server. A refused token ends the listen; a
// recipient that is gone (NOT_FOUND, INVALID_INPUT) ends it too if it was named at the start and never
// attached — a configuration error — and is dropped otherwise, the listen going on for the others until none
// is left (lost for good). Other errors are retried.
func (l *listener) refused(r *route, errs gqlErrors, later func(*route, error)) error {
	switch {
	case errs.has("UNAUTHENTICATED"), errs.has("FORBIDDEN"):
		return errs
	case !errs.permanent():
		later(r, errs)
		return nil
	case !r.everAttached && !r.added:
		return fmt.Errorf("cannot listen to recipient %s: %w", r.RecipientID, errs)
	}
	r.gone, r.op, r.attached = true, "", false
	left := len(l.live())
	now := l.now()
	msg := fmt.Sprintf("recipient %q is gone (%v): no longer listening for it", r.label, errs)
	if left > 0 {
		msg += fmt.Sprintf("; still listening for %d other(s)", left)
	}
	l.out.emit(now, errorEvent{eventHead: head("error", now), Message: msg, RecipientID: r.RecipientID}, l.out.paint(red, msg))
	if left == 0 {
		return &lostError{fmt.Errorf("every recipient is gone; the last: %q: %w", r.label, errs)}
	}
	return nil
}

func (l *listener) setConn(c *wsClient, on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if on {
		l.conn = c
	} else if l.conn == c {
		l.conn = nil
	}
}

func (l *listener) currentConn() *wsClient {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conn
}

// drain lets the local calls in flight finish and report, then closes the connection. A second Ctrl-C
// kills the process; the journal then has the rest.
func (l *listener) drain() {
	l.mu.Lock()
	n := 0
	for _, r := range l.routes {
		n += len(r.running)
	}
	l.mu.Unlock()
	if n > 0 {
		l.out.logf(plain, "finishing %d local call(s) in flight (Ctrl-C again to quit now; the journal keeps them)", n)
	}
	l.jobs.Wait()
	if c := l.currentConn(); c != nil {
		l.setConn(c, false)
		c.Close()
	}
}
