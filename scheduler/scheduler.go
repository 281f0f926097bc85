// Package scheduler is the engine that runs every kind of work: it claims due jobs under a lease (SKIP LOCKED
// on PostgreSQL), hands each to its lane's executor, records the outcomes in batches and rescues the claims
// whose process died (Rescuer: an INTERRUPTED attempt, by the same recorder). The lanes:
//   - direct deliveries (claim.go, lanes.go): executed by the HTTP Sender on the engine's workers, or handed
//     over by intake already claimed (Reserve, Run);
//   - outbound jobs (outbound.go): the slots the deliveries leave, the same Sender and workers;
//   - CLI deliveries (cli.go): claimed for the CLIs attached here and pushed to them by the CLIPusher (the CLI
//     hub); the CLI makes the attempt and its report is recorded by the hub.
//
// The direct and outbound lanes share the workers fairly: no tenant holds more than its share of them, and a
// recipient with a maxConcurrency no more attempts at once than that, across processes (fair.go, claim.go).
// What follows an attempt of either kind is delivery.NextAttempt; the defaults of every lane are in config.go.
package scheduler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/startstop"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/tracing"
	"github.com/adal-relay/adal/viewer"
	"github.com/adal-relay/adal/webhook"
)

// Sender makes one direct HTTP attempt.
type Sender interface {
	Send(ctx context.Context, out delivery.Outgoing) delivery.Outcome
}

// Observer hears what the scheduler does, for metrics; every method must be cheap and safe for concurrent use.
type Observer interface {
	Claimed(n int)
	Attempted(o delivery.Outcome)
}

// Config configures a Scheduler.
type Config struct {
	DB       *storage.DB
	Delivery *delivery.Service
	Sender   Sender
	// Outbound runs the outbound lane; nil leaves outbound jobs alone (tests of deliveries only).
	Outbound Outbound
	// CLI is the CLI lane's executor (clihub.Hub); nil runs no CLI lane.
	CLI CLIPusher
	// Workers bounds attempts in flight in this process. Default DefaultWorkers.
	Workers int
	// TenantShare is the share of Workers one tenant may hold while no other tenant has work here, in (0, 1];
	// while others do, each holds at most an equal share of them (fairShare). Default DefaultTenantShare.
	TenantShare float64
	// PollInterval is the longest a lane's loop waits without being woken. Default DefaultPollInterval.
	PollInterval time.Duration
	// MinPollGap spaces the CLI lane's claims apart when wake-ups come in a burst (every delivery change wakes
	// it). Default DefaultMinPollGap.
	MinPollGap time.Duration
	// Lease is how long a claim is this process's before the rescuer may take it. An attempt must end, and
	// be recorded, before its lease lapses, so attempts are cut at AttemptBudget(Lease) — three quarters of
	// the lease — whatever the recipient's timeout: with the default 60s the 30 s limit always fits; a
	// shorter lease (ADAL_LEASE, for tests and demos of the rescuer) shortens long attempts. At least 1s.
	// Default DefaultLease.
	Lease time.Duration
	// CLILease is how long a CLI has to report a job before the rescuer records it as INTERRUPTED; it must
	// exceed the attempt timeout. Default DefaultCLILease.
	CLILease time.Duration
	// Owner names this process in leases; default a random ID.
	Owner    string
	Observer Observer
	// Tracer makes each claim and attempt of a delivery a span of its request's trace (nil: off).
	Tracer *tracing.Tracer
	Logger *slog.Logger
	Now    func() time.Time
}

func (c *Config) validate() error {
	c.Workers = cmp.Or(c.Workers, DefaultWorkers)
	c.TenantShare = cmp.Or(c.TenantShare, DefaultTenantShare)
	c.PollInterval = cmp.Or(c.PollInterval, DefaultPollInterval)
	c.MinPollGap = cmp.Or(c.MinPollGap, DefaultMinPollGap)
	c.Lease = cmp.Or(c.Lease, DefaultLease)
	c.CLILease = cmp.Or(c.CLILease, DefaultCLILease)
	if c.Owner == "" {
		c.Owner = storage.NewLeaseOwner()
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Now == nil {
		c.Now = storage.Now
	}
	switch {
	case c.DB == nil || c.Delivery == nil || c.Sender == nil:
		return errors.New("scheduler: DB, Delivery and Sender are required")
	case c.Workers < 1:
		return errors.New("scheduler: Workers must be at least 1")
	case c.TenantShare <= 0 || c.TenantShare > 1:
		return fmt.Errorf("scheduler: TenantShare must be above 0 and at most 1, got %v", c.TenantShare)
	case c.Lease < time.Second:
		return fmt.Errorf("scheduler: Lease must be at least 1s, got %v", c.Lease)
	case c.CLILease <= delivery.DefaultTimeout:
		return fmt.Errorf("scheduler: CLILease must exceed the attempt timeout %v", delivery.DefaultTimeout)
	}
	if budget := AttemptBudget(c.Lease); budget < delivery.DefaultTimeout {
		c.Logger.Warn("lease shorter than the longest attempt: attempts are cut to fit in the lease",
			"lease", c.Lease, "attempt_limit", budget, "default_timeout", delivery.DefaultTimeout)
	}
	return nil
}

// AttemptBudget is the longest an attempt may run under a lease of the given length: three quarters of it,
// leaving the rest for recording the outcome, so a live process never has an attempt in flight whose lease
// the rescuer could take (which would record it as INTERRUPTED while it still runs, and send it again).
func AttemptBudget(lease time.Duration) time.Duration { return lease - lease/4 }

// Scheduler is the engine of one process: its lanes' claim loops, the workers and the completer.
type Scheduler struct {
	cfg      Config
	programs *programs // the transformations attempts run, compiled
	wake     chan struct{}
	wakeCLI  chan struct{}
	slots    chan struct{} // one token per attempt in flight
	fair     *fairShare    // the attempts in flight by tenant, within each one's share of the slots

	// idle hands an attempt to a worker waiting for one (spawn). Workers outlive their attempts: a goroutine
	// started per attempt grew its stack anew through the HTTP client's calls every time, a cost visible in
	// dispatch. workers counts them (never more than Workers); done, closed once nothing is in flight, lets
	// them end.
	idle    chan job
	workers atomic.Int32
	done    chan struct{}
	// attemptCtx is the context attempts run on: the system's, and its own, so that a shutdown lets an
	// attempt finish (it is bounded by its timeout) rather than cutting it off unrecorded. Made once: it never
	// changes.
	attemptCtx context.Context

	// completions carries finished delivery attempts to the completer, which records them in batches, as
	// River's completer does. An attempt frees its slot once its outcome is queued here, so the next claim
	// does not wait for the previous batch's commit; the queue holds at most Workers outcomes, and an attempt
	// that finds it full keeps its slot until there is room: when recording falls behind, claiming slows down
	// with it. At most 3×Workers claims are outstanding: in flight, queued, and in the batch being recorded.
	completions chan completion
	// wakeAt is how many slots must be free before a finished attempt wakes the claim loop, so that under load
	// claims come in batches rather than one slot at a time.
	wakeAt int
	// more is set while the last claim filled every free slot: more may be due, and a finished attempt wakes
	// the loop to claim it. After a short claim nothing else is due; new work wakes the loop itself (Wake),
	// and a finished attempt waking it would only run an empty claim.
	more atomic.Bool
	// outboundDue is set when an outbound job may have become due (WakeOutbound, or the loop's timer): the
	// outbound claim runs then, or once per PollInterval, not on every wake for deliveries.
	outboundDue atomic.Bool

	// lanesDue is set when a recipient became active again (WakeLanes): its parked deliveries are moved back to
	// their lane before the next claim rather than at the next poll.
	lanesDue atomic.Bool

	// Owned by the claim loop: when the probe turns, the outbound jobs and the lanes were last looked at, and
	// whether the lanes of every recipient have been looked at since the process started.
	lastProbe, lastOutbound, lastLanes time.Time
	lanesSwept                         bool

	startstop.BaseStartStop
	mu        sync.Mutex
	started   bool           // under mu: set by the first Start
	stopped   bool           // under mu: Reserve offers nothing once the run began to stop
	flights   sync.WaitGroup // attempts in flight or waiting to be recorded
	completer sync.WaitGroup
	rec       *recorder
}

// New returns a scheduler; it does nothing until Start.
func New(cfg Config) (*Scheduler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Scheduler{
		cfg:         cfg,
		programs:    newPrograms(cfg.DB.Client),
		wake:        make(chan struct{}, 1),
		wakeCLI:     make(chan struct{}, 1),
		slots:       make(chan struct{}, cfg.Workers),
		completions: make(chan completion, cfg.Workers),
		wakeAt:      max(1, cfg.Workers/8),
		fair:        newFairShare(cfg.Workers, cfg.TenantShare, max(1, cfg.Workers/8)),
		idle:        make(chan job),
		done:        make(chan struct{}),
		attemptCtx:  viewer.SystemContext(context.Background()),
	}
	s.rec = newRecorder(cfg.DB, cfg.Delivery, cfg.Logger, s.WakeOutbound, s.Wake)
	return s, nil
}

// Owner is the lease owner name of this scheduler.
func (s *Scheduler) Owner() string { return s.cfg.Owner }

// Wake makes the loop look for due work now (a request was accepted, a delivery became due). It never blocks.
func (s *Scheduler) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// WakeLanes makes the loop reconcile deliveries' lanes, then claim: a recipient was resumed or enabled.
func (s *Scheduler) WakeLanes() {
	s.lanesDue.Store(true)
	s.Wake()
}

// WakeOutbound makes the loop look for due outbound jobs now (one was submitted or rescheduled).
func (s *Scheduler) WakeOutbound() {
	s.outboundDue.Store(true)
	s.Wake()
}

// Start runs the lanes' claim loops until Stop or ctx ends. A scheduler runs once: a stopped one is not
// started again.
func (s *Scheduler) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errors.New("scheduler: stopped; a scheduler runs once")
	}
	ctx, ok, stopped := s.StartInit(viewer.SystemContext(ctx))
	if !ok {
		return nil
	}
	s.started = true
	s.completer.Add(1)
	go func() {
		defer s.completer.Done()
		s.complete()
	}()
	var loops sync.WaitGroup
	loops.Add(1)
	go func() {
		defer loops.Done()
		s.run(ctx)
	}()
	if s.cfg.CLI != nil {
		loops.Add(1)
		go func() {
			defer loops.Done()
			s.runCLI(ctx)
		}()
	}
	go func() {
		defer stopped()
		loops.Wait()
		s.drain()
	}()
	return nil
}

// Stop ends the claim loop and waits for attempts in flight to finish and be recorded (each is bounded by
// its timeout), so a graceful shutdown leaves nothing for the rescuer.
func (s *Scheduler) Stop() {
	s.mu.Lock()
	s.stopped = s.started
	s.mu.Unlock()
	s.BaseStartStop.Stop()
}

// drain, once the claim loop has ended, waits for the attempts in flight and their records.
func (s *Scheduler) drain() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.flights.Wait()
	// Every attempt is recorded: nothing will be sent to the completer, nor to a worker, any more.
	close(s.completions)
	close(s.done)
	s.completer.Wait()
}

func (s *Scheduler) run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		free := s.cfg.Workers - len(s.slots)
		full := free == 0 // no slot to claim with: more may be due, and the next finished attempt must wake us
		if free > 0 {
			var n int
			var err error
			if perr := startstop.Recover(s.cfg.Logger, "claim", func() { n, err = s.dispatch(ctx, free) }); perr != nil {
				err = perr // what it claimed and did not start waits for its lease to lapse, as after a crash
			}
			if err != nil && ctx.Err() == nil {
				s.cfg.Logger.Warn("claim due deliveries", "err", err)
			}
			full = n == free
		}
		s.more.Store(full)
		wait := s.cfg.PollInterval
		if full {
			wait = 0 // more may be due right now; go again as soon as a slot frees
		} else if due, ok, err := s.earliestDue(ctx, s.cfg.Now()); err == nil && ok { // deliveries and outbound jobs
			if d := due.Sub(s.cfg.Now()); d < wait {
				wait = max(d, time.Millisecond)
			}
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		if wait > 0 || len(s.slots) == s.cfg.Workers {
			timer.Reset(max(wait, time.Millisecond))
			select {
			case <-ctx.Done():
				return
			case <-s.wake:
			case <-timer.C:
				s.outboundDue.Store(true) // the earliest due time passed: it may be an outbound job's
			}
		} else if ctx.Err() != nil {
			return
		}
	}
}

// dispatch claims up to free deliveries and starts an attempt for each. Disabled recipients whose probe turn
// came get one delivery each first.
func (s *Scheduler) dispatch(ctx context.Context, free int) (int, error) {
	now := s.cfg.Now()
	var claims []job
	if s.lanesDue.Swap(false) || now.Sub(s.lastLanes) >= s.cfg.PollInterval {
		s.lastLanes = now
		_, done, err := reconcileLanes(ctx, s.cfg.DB, now, !s.lanesSwept)
		if err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("reconcile delivery lanes", "err", err)
		}
		s.lanesSwept = s.lanesSwept || done
	}
	// Probe turns come every ProbeEvery (10 minutes by default): looking once per poll interval, or a tenth of
	// that, is soon enough, and spares every claim round the update.
	var probes []int
	if every := s.cfg.Delivery.ProbeEvery(); now.Sub(s.lastProbe) >= min(s.cfg.PollInterval, every/10) {
		s.lastProbe = now
		var err error
		if probes, err = probeTurn(ctx, s.cfg.DB, now, every); err != nil {
			return 0, err
		}
	}
	for _, rid := range probes {
		if len(claims) == free {
			break
		}
		began := s.traceBegin()
		c, err := claimProbe(ctx, s.cfg.DB, now, s.cfg.Lease, s.cfg.Owner, rid)
		if err != nil {
			return 0, err
		}
		s.traceClaims(c, delivery.ClaimProbe, began)
		claims = append(claims, c...)
	}
	if rest := free - len(claims); rest > 0 {
		sh := s.fair.rooms()
		began := s.traceBegin()
		more, left, err := claim(ctx, s.cfg.DB, now, rest, s.cfg.Lease, s.cfg.Owner, sh)
		if err != nil {
			s.start(claims)
			return len(claims), err
		}
		s.traceClaims(more, delivery.ClaimDirect, began)
		s.fair.claimed(sh, tookBy(more), left, len(more) == rest)
		claims = append(claims, more...)
	}
	if s.cfg.Observer != nil {
		s.cfg.Observer.Claimed(len(claims))
	}
	s.start(claims)
	// Outbound jobs (outbound.go) take the slots the deliveries left.
	if rest := free - len(claims); rest > 0 && (s.outboundDue.Load() || now.Sub(s.lastOutbound) >= s.cfg.PollInterval) {
		s.outboundDue.Store(false)
		s.lastOutbound = now
		n, err := s.dispatchOutbound(ctx, rest)
		if n == rest {
			s.outboundDue.Store(true) // more may be due
		}
		return len(claims) + n, err
	}
	return len(claims), nil
}

// Reserve offers intake worker slots free now for deliveries it stores already claimed (delivery.Handoff): up
// to want[t] of them for tenant t's, within the tenant's fair share of the workers. It offers none while the
// scheduler is not running, and none while its last claim filled every free slot: then due deliveries may be
// waiting in the table, and they go first, in due order; for the same reason a tenant whose due deliveries the
// last claim left waiting gets none. Every slot offered comes back through Run.
func (s *Scheduler) Reserve(want map[int]int) delivery.Handoff {
	h := delivery.Handoff{Owner: s.cfg.Owner, Lease: s.cfg.Lease, Tenants: map[int]int{}}
	n := 0
	for _, k := range want {
		n += k
	}
	if n <= 0 || s.more.Load() {
		return h
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started || s.stopped {
		return h
	}
	taken := 0
take:
	for taken < n {
		select {
		case s.slots <- struct{}{}:
			taken++
		default:
			break take
		}
	}
	h.Tenants, h.Slots = s.fair.reserve(want, taken)
	for range taken - h.Slots {
		<-s.slots
	}
	// Counted in flight from now on, so that Stop waits for them to be run and recorded, or given back.
	s.flights.Add(h.Slots)
	return h
}

// Run starts the deliveries intake stored claimed under h, each on one of its slots, and frees the slots
// they did not take.
func (s *Scheduler) Run(h delivery.Handoff, claimed []delivery.Claimed) {
	if len(claimed) > h.Slots {
		panic(fmt.Sprintf("scheduler: %d deliveries claimed on %d reserved slots", len(claimed), h.Slots))
	}
	if s.cfg.Observer != nil && len(claimed) > 0 {
		s.cfg.Observer.Claimed(len(claimed))
	}
	if s.cfg.Tracer.On() {
		end := time.Now()
		for _, c := range claimed {
			// Claimed by the intake commit that stored it, which began when the claim says it started.
			delivery.TraceClaim(s.cfg.Tracer, c.Request.TraceParent, c.Claim, delivery.ClaimHandoff, len(claimed), c.Claim.StartedAt, end)
		}
	}
	unused := maps.Clone(h.Tenants)
	for _, c := range claimed {
		unused[c.Claim.TenantID]--
		s.spawn(job{claim: c.Claim, request: c.Request, recipient: c.Recipient})
	}
	for t, n := range unused {
		if n > 0 {
			s.fair.done(t, n)
		}
	}
	for range h.Slots - len(claimed) {
		<-s.slots
		s.flights.Done()
	}
}

// start runs each claimed attempt on a worker slot.
func (s *Scheduler) start(jobs []job) {
	for t, n := range tookBy(jobs) {
		s.fair.add(t, n)
	}
	for _, j := range jobs {
		s.slots <- struct{}{}
		s.flights.Add(1)
		s.spawn(j)
	}
}

// tookBy counts jobs by tenant.
func tookBy(jobs []job) map[int]int {
	took := make(map[int]int, 4)
	for _, j := range jobs {
		took[j.tenant()]++
	}
	return took
}

// spawn runs j, which holds a slot, on an idle worker, or on a new one while there are fewer than Workers.
// With Workers of them, one is always idle or about to be: j's slot was free, so at most Workers-1 attempts
// hold one, and an attempt frees its slot just before its worker looks for the next.
func (s *Scheduler) spawn(j job) {
	select {
	case s.idle <- j:
		return
	default:
	}
	if int(s.workers.Add(1)) <= s.cfg.Workers {
		go s.work(j)
		return
	}
	s.workers.Add(-1)
	s.idle <- j
}

// work runs attempts until Stop: j, then each one spawn hands it. A panic of the executor is an outcome of
// its attempt (attempt); one of the engine's own is logged and the worker goes on.
func (s *Scheduler) work(j job) {
	for {
		_ = startstop.Recover(s.cfg.Logger, "worker", func() { s.attempt(j) }) // frees the slot once its outcome is queued
		select {
		case j = <-s.idle:
		case <-s.done:
			return
		}
	}
}

// job is one claimed attempt of a lane: a delivery's (claim, request, recipient) or, when outbound is set, an
// outbound job's.
type job struct {
	claim     delivery.Claim
	request   *ent.Request
	recipient *ent.Recipient
	outbound  *outboundJob
}

// tenant is whose attempt j is.
func (j job) tenant() int {
	if j.outbound != nil {
		return j.outbound.claim.TenantID
	}
	return j.claim.TenantID
}

// completion is a finished attempt waiting for the completer: a delivery's, or an outbound job's when outbound
// is set (Claim is then zero).
type completion struct {
	delivery.Completion
	outbound *outboundClaim
	// traceParent is the trace of the delivery's request, for the rescuer, which makes the span of the
	// interrupted attempt it records; a worker ends its attempt's span itself.
	traceParent string
}

// tenant is whose attempt c is.
func (c completion) tenant() int {
	if c.outbound != nil {
		return c.outbound.TenantID
	}
	return c.Claim.TenantID
}

// logArgs name the attempt in logs.
func (c completion) logArgs() []any {
	if c.outbound != nil {
		return []any{"job", c.outbound.JobID, "attempt", c.outbound.Attempt}
	}
	return []any{"delivery", c.Claim.DeliveryID, "attempt", c.Claim.Attempt}
}

// load reads the requests and recipients of a batch of claims (delivery.LoadClaimed).
func load(ctx context.Context, client *ent.Client, claims []delivery.Claim) ([]job, error) {
	loaded, err := delivery.LoadClaimed(ctx, client, claims)
	if err != nil {
		return nil, err
	}
	jobs := make([]job, len(loaded))
	for i, l := range loaded {
		jobs[i] = job{claim: l.Claim, request: l.Request, recipient: l.Recipient}
	}
	return jobs, nil
}

// attempt runs j through its lane's executor, on attemptCtx, and queues its outcome for the completer.
func (s *Scheduler) attempt(j job) {
	if j.outbound != nil {
		s.attemptOutbound(j.outbound)
		return
	}
	ctx := s.attemptCtx
	out := delivery.Outgoing{
		Method:    j.request.Method,
		Header:    j.request.Headers,
		Body:      j.request.Body,
		RequestID: strconv.Itoa(j.request.ID),
		Attempt:   j.claim.Attempt,
		Timeout:   time.Duration(j.recipient.TimeoutSeconds) * time.Second,
		Verified:  j.request.Verified,
	}
	if out.Timeout <= 0 {
		out.Timeout = delivery.DefaultTimeout
	}
	// The lease began when the delivery was claimed, which may be a while ago (a claim handed over by intake
	// waited for its batch's commit): the attempt gets what is left of its budget, and none once that is
	// spent — the lease then lapses unused and the rescuer records the attempt as interrupted, rather than
	// this process sending it while the rescuer may already have taken it.
	left := j.claim.StartedAt.Add(AttemptBudget(s.cfg.Lease)).Sub(s.cfg.Now()).Truncate(time.Millisecond)
	if left <= 0 {
		s.cfg.Logger.Warn("claim's lease nearly spent before its attempt started; leaving it to the rescuer",
			"delivery", j.claim.DeliveryID, "attempt", j.claim.Attempt)
		s.release(j.tenant())
		s.flights.Done()
		return
	}
	out.Timeout = min(out.Timeout, AttemptBudget(s.cfg.Lease), left)
	if j.recipient.SendIdempotencyKey {
		out.IdempotencyKey = j.request.Key
	}
	out.Signer = delivery.SignerOf(j.recipient, j.request.Key, s.cfg.Now())
	span := delivery.StartAttempt(s.cfg.Tracer, j.request.TraceParent, j.claim, time.Time{}, trace.SpanID{})
	if span != nil && j.recipient.SendTraceparent {
		out.Traceparent = tracing.TraceParent(span.SpanContext())
	}
	out.Auth = delivery.AuthOf(j.recipient)
	var o delivery.Outcome
	if dest := delivery.TargetOf(j.recipient); dest != nil {
		out.Destination, out.Path = dest, webhook.PathWithQuery(j.request.Path, j.request.Query)
		out.MessageID = j.request.Key + "." + strconv.Itoa(j.claim.DeliveryID)
		o = s.transformAndSend(ctx, j, out)
	} else if target, err := webhook.JoinTarget(j.recipient.URL, j.request.Path, j.request.Query); err != nil {
		now := s.cfg.Now()
		o = delivery.Outcome{StartedAt: now, FinishedAt: now, ErrorKind: delivery.ErrConnection,
			ErrorMessage: "invalid target URL: " + err.Error()}
	} else {
		out.URL = target
		o = s.transformAndSend(ctx, j, out)
	}
	if span != nil {
		delivery.EndAttempt(span, o, time.Time{})
	}
	if s.cfg.Observer != nil {
		s.cfg.Observer.Attempted(o)
	}
	s.finish(completion{Completion: delivery.Completion{Claim: j.claim, Outcome: o}})
}

// transformAndSend runs the recipient's transformation, if it has one, and sends what it made; the outcome
// names the version that ran.
func (s *Scheduler) transformAndSend(ctx context.Context, j job, out delivery.Outgoing) delivery.Outcome {
	version, ended := s.transformed(ctx, j, &out)
	if ended != nil {
		return *ended
	}
	o := s.send(ctx, out, "delivery attempt")
	o.TransformVersion = version
	return o
}

// send makes one attempt through the Sender. An attempt whose sender panicked ends as an INTERRUPTED one — as
// the rescuer would record it after a crash, since whether it reached the recipient is not known — recorded at
// once by the completer, which gives back its worker and, for a capped recipient, its slot.
func (s *Scheduler) send(ctx context.Context, out delivery.Outgoing, what string) delivery.Outcome {
	var o delivery.Outcome
	started := s.cfg.Now()
	if err := startstop.Recover(s.cfg.Logger, what, func() { o = s.cfg.Sender.Send(ctx, out) }); err != nil {
		o = interrupted(started, s.cfg.Now())
		o.ErrorMessage = "the attempt stopped in an internal error before its outcome was known: " + err.Error()
	}
	return o
}

// finish queues a finished attempt for the completer and frees its slot.
func (s *Scheduler) finish(c completion) {
	s.completions <- c
	s.release(c.tenant())
}

// release frees the slot of an attempt of tenant, and wakes the claim loop when enough slots came free for
// work that waits: any due work while the last claim filled every slot, or a tenant's due work the last claim
// left for want of room in its share.
func (s *Scheduler) release(tenant int) {
	<-s.slots
	waiting := s.fair.done(tenant, 1)
	if waiting || (s.more.Load() && s.cfg.Workers-len(s.slots) >= s.wakeAt) {
		s.Wake()
	}
}

// complete records finished attempts in batches: it takes whatever has finished when it is free — a lone
// outcome is recorded at once, outcomes that finish together share one transaction and a handful of statements
// (delivery.RecordBatch; outbound jobs' in a transaction of their own). It runs until Stop, after the last
// attempt is recorded.
func (s *Scheduler) complete() {
	ctx := viewer.SystemContext(context.Background())
	batch := make([]completion, 0, s.cfg.Workers)
	for c := range s.completions {
		batch = append(batch[:0], c)
	fill:
		for len(batch) < cap(batch) {
			select {
			case c, ok := <-s.completions:
				if !ok {
					break fill
				}
				batch = append(batch, c)
			default:
				break fill
			}
		}
		// A batch whose recording panicked stays as its claims left it: their leases lapse and the rescuer
		// records the attempts as interrupted, as after a crash.
		_ = startstop.Recover(s.cfg.Logger, "record attempts", func() { s.rec.record(ctx, batch) })
		for range batch {
			s.flights.Done()
		}
	}
}

// traceBegin is when a claim statement begins, for its spans; zero when tracing is off.
func (s *Scheduler) traceBegin() time.Time {
	if !s.cfg.Tracer.On() {
		return time.Time{}
	}
	return time.Now()
}

// traceClaims records the claim of each of jobs, taken by lane in a statement that began at began, in its
// request's trace.
func (s *Scheduler) traceClaims(jobs []job, lane string, began time.Time) {
	if !s.cfg.Tracer.On() || len(jobs) == 0 {
		return
	}
	end := time.Now()
	for _, j := range jobs {
		delivery.TraceClaim(s.cfg.Tracer, j.request.TraceParent, j.claim, lane, len(jobs), began, end)
	}
}
