// Package clihub is the server side of the adal CLI: it keeps track of the CLIs attached to this process (one
// cliListen subscription each), keeps their recipients' cliConnected heartbeat fresh in the database, claims
// the recipients' due deliveries and hands them to the CLIs as jobs, and records the outcomes the CLIs report.
//
// The database is the coordinator, as for the scheduler (DESIGN §5): claims use the same SKIP LOCKED pattern,
// so a CLI attached to any process receives the deliveries accepted by every process, and the heartbeat
// (recipients.cli_seen_until) tells every process whether a CLI is attached somewhere. Nothing claims a CLI
// recipient's deliveries while no CLI is attached, so they wait as PENDING without spending attempts.
package clihub

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/startstop"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/viewer"
)

// LeasePrefix starts every CLI lease token, so a report can never name a direct delivery's lease.
const LeasePrefix = "cli:"

// Config configures a Hub.
type Config struct {
	DB       *storage.DB
	Delivery *delivery.Service
	// PollInterval is the longest the claim loop waits without being woken. Default 1s.
	PollInterval time.Duration
	// MinPollGap spaces claims apart when wake-ups come in a burst (every delivery change wakes the hub).
	// Default 10ms.
	MinPollGap time.Duration
	// Heartbeat is how often cli_seen_until is pushed forward for attached recipients. Default 5s.
	Heartbeat time.Duration
	// SeenFor is how far ahead each heartbeat sets cli_seen_until: how long cliConnected stays true after
	// this process stops heartbeating without detaching (it died). Default 15s; must exceed Heartbeat.
	SeenFor time.Duration
	// Lease is how long a CLI has to report a job before the rescuer records it as INTERRUPTED: the local
	// timeout (30 s) plus room for the report, or for a reconnect that reports from the CLI's journal.
	// Default 60s.
	Lease time.Duration
	// MaxInFlight bounds the jobs one recipient's CLIs hold at a time in this process, so that a large
	// backlog is not leased all at once (leases would lapse while jobs queue). Default 8.
	MaxInFlight int
	// Owner names this process in lease tokens; default a random ID.
	Owner  string
	Logger *slog.Logger
	Now    func() time.Time
}

func (c *Config) validate() error {
	c.PollInterval = cmp.Or(c.PollInterval, time.Second)
	c.MinPollGap = cmp.Or(c.MinPollGap, 10*time.Millisecond)
	c.Heartbeat = cmp.Or(c.Heartbeat, 5*time.Second)
	c.SeenFor = cmp.Or(c.SeenFor, 15*time.Second)
	c.Lease = cmp.Or(c.Lease, delivery.DefaultTimeout+30*time.Second)
	c.MaxInFlight = cmp.Or(c.MaxInFlight, 8)
	if c.Owner == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		c.Owner = hex.EncodeToString(b[:])
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = func() time.Time { return time.Now().UTC() }
	}
	switch {
	case c.DB == nil || c.Delivery == nil:
		return errors.New("clihub: DB and Delivery are required")
	case c.SeenFor <= c.Heartbeat:
		return errors.New("clihub: SeenFor must exceed Heartbeat")
	case c.Lease <= delivery.DefaultTimeout:
		return fmt.Errorf("clihub: Lease must exceed the attempt timeout %v", delivery.DefaultTimeout)
	case c.MaxInFlight < 1:
		return errors.New("clihub: MaxInFlight must be at least 1")
	}
	return nil
}

// Job is one attempt handed to a CLI: the claim that leases it and what to send to the local service.
type Job struct {
	Claim delivery.Claim
	// LeaseToken is the claim's lease owner; the CLI passes it back with its report.
	LeaseToken string
	// Request is the stored request to forward.
	Request *ent.Request
	// IdempotencyKey is the request key when the recipient sends it, else empty.
	IdempotencyKey string
	// Timeout bounds the local call, reading the response included.
	Timeout time.Duration
}

// Hub tracks the CLIs attached to this process and feeds them jobs.
type Hub struct {
	cfg  Config
	wake chan struct{}

	mu        sync.Mutex
	listeners map[int][]*Listener // by recipient ID
	running   bool

	// seenMu orders heartbeat writes against detach clears, so a heartbeat that read the recipient list
	// just before a detach cannot mark the recipient connected again after the detach cleared it.
	seenMu sync.Mutex

	startstop.BaseStartStop
}

// New returns a hub; it does nothing until Start.
func New(cfg Config) (*Hub, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Hub{cfg: cfg, wake: make(chan struct{}, 1), listeners: map[int][]*Listener{}}, nil
}

// Owner is the lease token prefix of this hub's claims.
func (h *Hub) Owner() string { return LeasePrefix + h.cfg.Owner + ":" }

// Wake makes the hub look for due jobs now (a delivery was created or rescheduled). It never blocks.
func (h *Hub) Wake() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Start runs the claim loop and the heartbeat until Stop or ctx ends. When they end, every CLI is detached:
// their subscriptions complete, so they reconnect to another process, and the jobs they had not received yet
// are given back.
func (h *Hub) Start(ctx context.Context) error {
	ctx, ok, stopped := h.StartInit(viewer.SystemContext(ctx))
	if !ok {
		return nil
	}
	h.mu.Lock()
	h.running = true
	h.mu.Unlock()
	var loops sync.WaitGroup
	loops.Add(2)
	go func() {
		defer loops.Done()
		h.run(ctx)
	}()
	go func() {
		defer loops.Done()
		h.heartbeat(ctx)
	}()
	go func() {
		defer stopped()
		loops.Wait()
		h.detachAll()
	}()
	return nil
}

// detachAll detaches every CLI once the loops have ended.
func (h *Hub) detachAll() {
	h.mu.Lock()
	h.running = false
	var all []*Listener
	for _, ls := range h.listeners {
		all = append(all, ls...)
	}
	h.mu.Unlock()
	for _, l := range all {
		l.Detach()
	}
}

// Attach registers a CLI for recipientID (the caller has checked that the viewer may attach to it and that it
// is a live CLI recipient) and marks the recipient connected before returning, so that requests accepted
// from now on are not backlog. Detach the listener when the CLI goes away.
func (h *Hub) Attach(ctx context.Context, recipientID int) (*Listener, error) {
	l := &Listener{
		hub:         h,
		RecipientID: recipientID,
		since:       h.cfg.Now(),
		inflight:    map[string]time.Time{},
		ready:       make(chan struct{}, 1),
		closed:      make(chan struct{}),
	}
	h.seenMu.Lock()
	h.mu.Lock()
	if !h.running {
		h.mu.Unlock()
		h.seenMu.Unlock()
		return nil, errors.New("clihub: not running")
	}
	h.listeners[recipientID] = append(h.listeners[recipientID], l)
	h.mu.Unlock()
	err := h.markSeen(ctx, []int{recipientID})
	h.seenMu.Unlock()
	if err != nil {
		l.Detach()
		return nil, err
	}
	h.cfg.Logger.Info("cli attached", "recipient", recipientID)
	h.Wake()
	return l, nil
}

// detach removes l; the last CLI of a recipient to leave clears its heartbeat, so cliConnected turns false
// at once rather than when the heartbeat lapses.
func (h *Hub) detach(l *Listener) {
	h.seenMu.Lock()
	defer h.seenMu.Unlock()
	h.mu.Lock()
	ls := h.listeners[l.RecipientID]
	for i, x := range ls {
		if x == l {
			ls = append(ls[:i:i], ls[i+1:]...)
			break
		}
	}
	last := len(ls) == 0
	if last {
		delete(h.listeners, l.RecipientID)
	} else {
		h.listeners[l.RecipientID] = ls
	}
	h.mu.Unlock()
	if !last {
		return
	}
	ctx, cancel := context.WithTimeout(viewer.SystemContext(context.Background()), 5*time.Second)
	defer cancel()
	err := h.cfg.DB.Client.Recipient.Update().Where(recipient.ID(l.RecipientID)).ClearCliSeenUntil().Exec(ctx)
	if err != nil {
		h.cfg.Logger.Warn("clear cli heartbeat", "recipient", l.RecipientID, "err", err)
	}
}

// markSeen pushes the heartbeat of the given recipients forward.
func (h *Hub) markSeen(ctx context.Context, ids []int) error {
	if len(ids) == 0 {
		return nil
	}
	err := h.cfg.DB.Client.Recipient.Update().
		Where(recipient.IDIn(ids...)).
		SetCliSeenUntil(h.cfg.Now().Add(h.cfg.SeenFor)).
		Exec(viewer.SystemContext(ctx))
	if err != nil {
		return fmt.Errorf("cli heartbeat: %w", err)
	}
	return nil
}

func (h *Hub) heartbeat(ctx context.Context) {
	ticker := time.NewTicker(h.cfg.Heartbeat)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		h.seenMu.Lock()
		h.mu.Lock()
		ids := make([]int, 0, len(h.listeners))
		for id := range h.listeners {
			ids = append(ids, id)
		}
		h.mu.Unlock()
		if err := h.markSeen(ctx, ids); err != nil && ctx.Err() == nil {
			h.cfg.Logger.Warn("cli heartbeat", "err", err)
		}
		h.seenMu.Unlock()
		h.dropGone(ctx, ids)
	}
}

// dropGone detaches the CLIs of recipients that were deleted (or stopped being CLI recipients) while they
// were attached: their subscription ends, and the CLI's reconnect is answered NOT_FOUND, which tells the
// developer instead of leaving them waiting for deliveries that will never come.
func (h *Hub) dropGone(ctx context.Context, ids []int) {
	if len(ids) == 0 {
		return
	}
	gone, err := h.cfg.DB.Client.Recipient.Query().
		Where(recipient.IDIn(ids...), recipient.Or(recipient.DeletedAtNotNil(), recipient.MethodNEQ(recipient.MethodCLI))).
		IDs(viewer.SystemContext(ctx))
	if err != nil {
		if ctx.Err() == nil {
			h.cfg.Logger.Warn("cli heartbeat: deleted recipients", "err", err)
		}
		return
	}
	for _, id := range gone {
		h.mu.Lock()
		ls := append([]*Listener(nil), h.listeners[id]...)
		h.mu.Unlock()
		for _, l := range ls {
			l.Detach()
		}
	}
}

func (h *Hub) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	gap := time.NewTimer(time.Hour)
	defer gap.Stop()
	for {
		wait := h.cfg.PollInterval
		full, ids, err := h.dispatch(ctx)
		if err != nil && ctx.Err() == nil {
			h.cfg.Logger.Warn("claim CLI deliveries", "err", err)
		}
		if full {
			wait = 0 // more may be due right now
		} else if due, ok, err := nextDue(ctx, h.cfg.DB, h.cfg.Now(), ids); err == nil && ok {
			wait = min(wait, due.Sub(h.cfg.Now()))
		}
		// Every delivery change wakes the hub; a burst of wake-ups is served by one claim per gap.
		gap.Reset(h.cfg.MinPollGap)
		select {
		case <-ctx.Done():
			return
		case <-gap.C:
		}
		if wait -= h.cfg.MinPollGap; wait <= 0 {
			continue
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-h.wake:
		case <-timer.C:
		}
	}
}

// dispatch claims due jobs for the attached recipients with free slots and queues them on their listeners.
// It reports whether every free slot was filled (more may be due) and the recipients it looked at.
func (h *Hub) dispatch(ctx context.Context) (full bool, ids []int, err error) {
	now := h.cfg.Now()
	var recipients []attached
	free := 0
	h.mu.Lock()
	for id, ls := range h.listeners {
		f := 0
		since := now
		for _, l := range ls {
			f += l.free(now)
			if l.since.Before(since) {
				since = l.since
			}
		}
		if f > 0 {
			recipients = append(recipients, attached{recipientID: id, since: since})
			ids = append(ids, id)
			free += f
		}
	}
	h.mu.Unlock()
	if free == 0 {
		return false, nil, nil
	}
	sort.Ints(ids)
	claims, err := claim(ctx, h.cfg.DB, now, free, h.cfg.Lease, h.Owner(), recipients)
	if err != nil {
		return false, ids, err
	}
	if len(claims) == 0 {
		return false, ids, nil
	}
	jobs, err := h.load(ctx, claims)
	if err != nil {
		// The claims stay leased; the rescuer records them as interrupted and they are retried.
		return true, ids, err
	}
	for _, j := range jobs {
		if !h.hand(j, now) {
			// The CLI left between the claim and now: the attempt never started.
			if err := release(ctx, h.cfg.DB, j.Claim); err != nil {
				h.cfg.Logger.Warn("release CLI job", "delivery", j.Claim.DeliveryID, "err", err)
			}
		}
	}
	return len(claims) == free, ids, nil
}

// hand queues j on the recipient's listener with the most free slots.
func (h *Hub) hand(j Job, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	var best *Listener
	bestFree := -1
	for _, l := range h.listeners[j.Claim.RecipientID] {
		if f := l.free(now); f > bestFree {
			best, bestFree = l, f
		}
	}
	return best != nil && best.push(j, now.Add(h.cfg.Lease))
}

// load reads the requests and recipients of a batch of claims (delivery.LoadClaimed) and makes them jobs.
func (h *Hub) load(ctx context.Context, claims []delivery.Claim) ([]Job, error) {
	loaded, err := delivery.LoadClaimed(ctx, h.cfg.DB.Client, claims)
	if err != nil {
		return nil, err
	}
	jobs := make([]Job, 0, len(loaded))
	for _, l := range loaded {
		c, req, rec := l.Claim, l.Request, l.Recipient
		j := Job{
			Claim:      c,
			LeaseToken: c.Owner,
			Request:    req,
			Timeout:    min(time.Duration(rec.TimeoutSeconds)*time.Second, delivery.DefaultTimeout),
		}
		if j.Timeout <= 0 {
			j.Timeout = delivery.DefaultTimeout
		}
		if rec.SendIdempotencyKey {
			j.IdempotencyKey = req.Key
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// settle frees the slot of a reported job, if this process handed it out.
func (h *Hub) settle(recipientID int, token string) {
	h.mu.Lock()
	for _, l := range h.listeners[recipientID] {
		l.settle(token)
	}
	h.mu.Unlock()
	h.Wake()
}

// Listener is one attached CLI: the jobs claimed for it, in order, and the slots they hold.
type Listener struct {
	hub *Hub
	// RecipientID is the recipient the CLI attached to.
	RecipientID int
	since       time.Time

	mu       sync.Mutex
	queue    []Job                // claimed, not yet taken by the subscription
	inflight map[string]time.Time // lease token → lease expiry, for queued and handed-out jobs
	detached bool
	ready    chan struct{} // signalled when queue becomes non-empty
	closed   chan struct{} // closed on Detach
	once     sync.Once
}

// free is how many more jobs the listener may hold; expired leases no longer count (the rescuer settles
// them). Called with the hub's lock held.
func (l *Listener) free(now time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.detached {
		return 0
	}
	for token, exp := range l.inflight {
		if !exp.After(now) {
			delete(l.inflight, token)
		}
	}
	return l.hub.cfg.MaxInFlight - len(l.inflight)
}

func (l *Listener) push(j Job, leaseExpiry time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.detached {
		return false
	}
	l.queue = append(l.queue, j)
	l.inflight[j.LeaseToken] = leaseExpiry
	select {
	case l.ready <- struct{}{}:
	default:
	}
	return true
}

func (l *Listener) settle(token string) {
	l.mu.Lock()
	delete(l.inflight, token)
	l.mu.Unlock()
}

// Next returns the next job for the CLI, waiting for one; ok is false once ctx ends or the listener is
// detached (the hub stopped).
func (l *Listener) Next(ctx context.Context) (j Job, ok bool) {
	for {
		l.mu.Lock()
		if l.detached {
			l.mu.Unlock()
			return Job{}, false
		}
		if len(l.queue) > 0 {
			j = l.queue[0]
			l.queue[0] = Job{}
			l.queue = l.queue[1:]
			l.mu.Unlock()
			return j, true
		}
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return Job{}, false
		case <-l.closed:
			return Job{}, false
		case <-l.ready:
		}
	}
}

// Return gives back a job taken with Next that could not be sent to the CLI (it went away meanwhile): the
// attempt never started, so it is not spent.
func (l *Listener) Return(j Job) {
	l.settle(j.LeaseToken)
	ctx, cancel := context.WithTimeout(viewer.SystemContext(context.Background()), 5*time.Second)
	defer cancel()
	if err := release(ctx, l.hub.cfg.DB, j.Claim); err != nil {
		l.hub.cfg.Logger.Warn("release CLI job", "delivery", j.Claim.DeliveryID, "err", err)
	}
	l.hub.Wake()
}

// Detach ends the listener: jobs it had not handed out yet are given back (no attempt started), jobs
// handed out keep their lease so the CLI can still report them (from its journal, after a reconnect), and
// the recipient's heartbeat is cleared if it was the last CLI for it here. Safe to call more than once.
func (l *Listener) Detach() {
	l.once.Do(func() {
		l.mu.Lock()
		l.detached = true
		queued := l.queue
		l.queue = nil
		l.mu.Unlock()
		close(l.closed)
		l.hub.detach(l)
		ctx, cancel := context.WithTimeout(viewer.SystemContext(context.Background()), 5*time.Second)
		defer cancel()
		for _, j := range queued {
			if err := release(ctx, l.hub.cfg.DB, j.Claim); err != nil {
				l.hub.cfg.Logger.Warn("release CLI job", "delivery", j.Claim.DeliveryID, "err", err)
			}
		}
		l.hub.cfg.Logger.Info("cli detached", "recipient", l.RecipientID, "released", len(queued))
		l.hub.Wake()
	})
}
