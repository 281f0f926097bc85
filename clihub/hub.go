// Package clihub is the server side of the adal CLI: it keeps track of the CLIs attached to this process (one
// cliListen subscription each), keeps their recipients' cliConnected heartbeat fresh in the database, pushes
// the jobs the engine's CLI lane claims for them (it is that lane's executor, scheduler.CLIPusher), and
// records the outcomes the CLIs report.
//
// The database is the coordinator: a CLI attached to any process receives the deliveries accepted by every
// process, and the heartbeat (recipients.cli_seen_until) tells every process whether a CLI is attached
// somewhere. Nothing claims a CLI recipient's deliveries while no CLI is attached, so they wait as PENDING
// without spending attempts.
package clihub

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/scheduler"
	"github.com/adal-relay/adal/startstop"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/tracing"
	"github.com/adal-relay/adal/viewer"
)

// LeasePrefix starts every CLI lease token, so a report can never name a direct delivery's lease.
const LeasePrefix = scheduler.CLILeasePrefix

// Config configures a Hub.
type Config struct {
	DB       *storage.DB
	Delivery *delivery.Service
	// Wake tells the engine's CLI lane that a CLI attached, or has room again (Scheduler.WakeCLI); may be nil.
	Wake func()
	// Heartbeat is how often cli_seen_until is pushed forward for attached recipients. Default 5s.
	Heartbeat time.Duration
	// SeenFor is how far ahead each heartbeat sets cli_seen_until: how long cliConnected stays true after
	// this process stops heartbeating without detaching (it died). Default 15s; must exceed Heartbeat.
	SeenFor time.Duration
	// MaxInFlight bounds the jobs one recipient's CLIs hold at a time in this process. Default
	// scheduler.DefaultCLIMaxInFlight.
	MaxInFlight int
	// Tracer makes each attempt a CLI reports a span of its request's trace (nil: off).
	Tracer *tracing.Tracer
	Logger *slog.Logger
	Now    func() time.Time
}

func (c *Config) validate() error {
	c.Heartbeat = cmp.Or(c.Heartbeat, 5*time.Second)
	c.SeenFor = cmp.Or(c.SeenFor, 15*time.Second)
	c.MaxInFlight = cmp.Or(c.MaxInFlight, scheduler.DefaultCLIMaxInFlight)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Now == nil {
		c.Now = storage.Now
	}
	switch {
	case c.DB == nil || c.Delivery == nil:
		return errors.New("clihub: DB and Delivery are required")
	case c.SeenFor <= c.Heartbeat:
		return errors.New("clihub: SeenFor must exceed Heartbeat")
	case c.MaxInFlight < 1:
		return errors.New("clihub: MaxInFlight must be at least 1")
	}
	return nil
}

// Job is one attempt handed to a CLI: the claim that leases it and what to send to the local service.
type Job = scheduler.CLIJob

// Hub tracks the CLIs attached to this process and feeds them jobs.
type Hub struct {
	cfg Config

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
	return &Hub{cfg: cfg, listeners: map[int][]*Listener{}}, nil
}

var _ scheduler.CLIPusher = (*Hub)(nil)

// wake tells the engine's CLI lane to look for jobs for this hub's CLIs now.
func (h *Hub) wake() {
	if h.cfg.Wake != nil {
		h.cfg.Wake()
	}
}

// Start runs the heartbeat until Stop or ctx ends. When it ends, every CLI is detached:
// their subscriptions complete, so they reconnect to another process, and the jobs they had not received yet
// are given back.
func (h *Hub) Start(ctx context.Context) error {
	return h.Run(viewer.SystemContext(ctx), func(context.Context) error {
		h.mu.Lock()
		h.running = true
		h.mu.Unlock()
		return nil
	}, func(ctx context.Context) {
		h.heartbeat(ctx)
		h.detachAll()
	})
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
	h.wake()
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
	startstop.Every(ctx, h.cfg.Logger, "CLI heartbeat", h.cfg.Heartbeat, h.beat)
}

// beat marks the recipients of the CLIs attached here as seen, and drops those whose recipient is gone.
func (h *Hub) beat(ctx context.Context) {
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

// Ready lists the attached recipients whose CLIs have room for more jobs (scheduler.CLIPusher).
func (h *Hub) Ready(now time.Time) []scheduler.CLIReady {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ready []scheduler.CLIReady
	for id, ls := range h.listeners {
		r := scheduler.CLIReady{RecipientID: id, Since: now}
		for _, l := range ls {
			r.Free += l.free(now)
			if l.since.Before(r.Since) {
				r.Since = l.since
			}
		}
		if r.Free > 0 {
			ready = append(ready, r)
		}
	}
	return ready
}

// Push queues j on the recipient's listener with the most room, the newest on a tie
// (scheduler.CLIPusher): a CLI that reconnects after its computer slept leaves behind a connection this
// process has not yet found dead, and jobs pushed there would wait for their lease to lapse.
func (h *Hub) Push(j Job, leaseExpiry time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.cfg.Now()
	var best *Listener
	bestFree := -1
	ls := h.listeners[j.Claim.RecipientID]
	for i := len(ls) - 1; i >= 0; i-- {
		if f := ls[i].free(now); f > bestFree {
			best, bestFree = ls[i], f
		}
	}
	return best != nil && best.push(j, leaseExpiry)
}

// settle frees the slot of a reported job, if this process handed it out.
func (h *Hub) settle(recipientID int, token string) {
	h.mu.Lock()
	for _, l := range h.listeners[recipientID] {
		l.settle(token)
	}
	h.mu.Unlock()
	h.wake()
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
	if err := scheduler.ReleaseCLI(ctx, l.hub.cfg.DB, j.Claim); err != nil {
		l.hub.cfg.Logger.Warn("release CLI job", "delivery", j.Claim.DeliveryID, "err", err)
	}
	l.hub.wake()
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
			if err := scheduler.ReleaseCLI(ctx, l.hub.cfg.DB, j.Claim); err != nil {
				l.hub.cfg.Logger.Warn("release CLI job", "delivery", j.Claim.DeliveryID, "err", err)
			}
		}
		l.hub.cfg.Logger.Info("cli detached", "recipient", l.RecipientID, "released", len(queued))
		l.hub.wake()
	})
}
