package bulk

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/bulkjob"
	"github.com/adal-relay/adal/ent/bulkjobitem"
	"github.com/adal-relay/adal/events"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/startstop"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/viewer"
)

// Defaults of RunnerConfig.
const (
	// DefaultLease is how long a claimed job is this process's before another may take it over: the engine's.
	DefaultLease = 60 * time.Second
	// DefaultPollInterval is the longest the runner waits before looking for jobs, and a job before looking
	// whether its recipients have room again, without being woken.
	DefaultPollInterval = time.Second
	// DefaultWindow is how many of a job's retries to one recipient may be outstanding (their first attempt
	// not yet made) before it makes more: the job follows the recipient's pace instead of queueing its whole
	// backlog at once. The engine's own limits on attempts in flight apply to them as to any delivery.
	DefaultWindow = 8
	// DefaultMaxJobs is how many jobs a process runs at once.
	DefaultMaxJobs = 2
	// retryBatch and cancelBatch are the most deliveries one batch (one transaction) acts on.
	retryBatch  = 50
	cancelBatch = 200
	// maxBatchFailures is how many batches in a row may fail (the database refused them) before the job is
	// given up as FAILED.
	maxBatchFailures = 5
)

// RunnerConfig configures a Runner.
type RunnerConfig struct {
	DB       *storage.DB
	Delivery *delivery.Service
	// Events carries job progress to subscribers, and wakes a job waiting for room when its server's
	// deliveries change; may be nil (the job then looks every PollInterval).
	Events events.Bus
	// Owner names this process in leases; default a random ID.
	Owner        string
	Lease        time.Duration
	PollInterval time.Duration
	Window       int
	MaxJobs      int
	Logger       *slog.Logger
	Now          func() time.Time
}

// Runner runs bulk jobs: it claims running jobs no live process holds and works through each, a batch per
// transaction, until it ends, is canceled, or its tenant runs out of credits.
type Runner struct {
	startstop.BaseStartStop
	cfg   RunnerConfig
	wake  chan struct{}
	slots chan struct{}
}

// NewRunner returns a runner; it does nothing until Start.
func NewRunner(cfg RunnerConfig) (*Runner, error) {
	cfg.Lease = cmp.Or(cfg.Lease, DefaultLease)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, DefaultPollInterval)
	cfg.Window = cmp.Or(cfg.Window, DefaultWindow)
	cfg.MaxJobs = cmp.Or(cfg.MaxJobs, DefaultMaxJobs)
	if cfg.Owner == "" {
		cfg.Owner = storage.NewLeaseOwner()
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if cfg.Now == nil {
		cfg.Now = storage.Now
	}
	if cfg.DB == nil || cfg.Delivery == nil {
		return nil, errors.New("bulk runner: DB and Delivery are required")
	}
	return &Runner{cfg: cfg, wake: make(chan struct{}, 1), slots: make(chan struct{}, cfg.MaxJobs)}, nil
}

// Wake makes the runner look for jobs now (a job was started).
func (r *Runner) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Start looks for jobs when woken and every PollInterval, until Stop or ctx ends. Stopping ends the jobs
// under way after their batch in flight commits or rolls back, and leaves their leases to lapse: another
// process takes them over then, as it would from a process that died.
func (r *Runner) Start(ctx context.Context) error {
	return r.Run(viewer.SystemContext(ctx), nil, func(ctx context.Context) {
		var jobs sync.WaitGroup
		defer jobs.Wait()
		timer := time.NewTimer(0)
		defer timer.Stop()
		for startstop.Wait(ctx, timer.C, r.wake) {
			r.claimAndRun(ctx, &jobs)
			timer.Reset(r.cfg.PollInterval)
		}
	})
}

// claimAndRun claims as many jobs as there are free slots and runs each on a goroutine of its own.
func (r *Runner) claimAndRun(ctx context.Context, jobs *sync.WaitGroup) {
	free := cap(r.slots) - len(r.slots)
	if free == 0 {
		return
	}
	ids, err := r.claim(ctx, free)
	if err != nil {
		if ctx.Err() == nil {
			r.cfg.Logger.Warn("claim bulk jobs", "err", err)
		}
		return
	}
	for _, id := range ids {
		r.slots <- struct{}{}
		jobs.Go(func() {
			defer func() {
				<-r.slots
				r.Wake() // a slot is free: another job may be waiting
			}()
			r.run(ctx, id)
		})
	}
}

// claim takes up to limit jobs for this runner.
func (r *Runner) claim(ctx context.Context, limit int) ([]int, error) {
	now := r.cfg.Now()
	rows, err := r.cfg.DB.SQL.QueryContext(ctx, claimSQL.For(r.cfg.DB), now, limit, r.cfg.Owner, now.Add(r.cfg.Lease))
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	return storage.ScanColumn[int](rows)
}

// errLost says the job is no longer this runner's to run: canceled, or its lease taken over.
var errLost = errors.New("bulk job no longer held")

// jobRun is one claimed job being worked through.
type jobRun struct {
	r   *Runner
	job *ent.BulkJob
	// ctx carries the job's tenant as its viewer: the job acts with no more rights than a member of it.
	ctx context.Context
	// outstanding are the job's retries still taking a place of their recipient (outstandingCondition), by
	// delivery id, with their recipient.
	outstanding map[int]int
	renewed     time.Time
	failures    int
}

// run works through the job until it ends, is lost, or ctx ends.
func (r *Runner) run(ctx context.Context, id int) {
	ctx, cancel := context.WithCancel(ctx) // ends the job's subscription with it
	defer cancel()
	job, err := r.cfg.DB.Client.BulkJob.Get(ctx, id)
	if err != nil {
		if ctx.Err() == nil {
			r.cfg.Logger.Warn("load bulk job", "job", id, "err", err)
		}
		return
	}
	j := &jobRun{r: r, job: job, outstanding: map[int]int{}, renewed: r.cfg.Now(),
		ctx: viewer.NewContext(ctx, viewer.Viewer{Role: viewer.Member, TenantID: job.TenantID, Subject: "bulk job " + strconv.Itoa(id)})}
	var changed <-chan events.Event
	if job.Kind == Retry {
		if r.cfg.Events != nil {
			// A change of the server's deliveries may have freed a place: look again then, not a poll later.
			if changed, err = r.cfg.Events.Subscribe(ctx, events.Filter{TenantID: job.TenantID, ServerID: job.ServerID}); err != nil {
				changed = nil
			}
		}
		if job.DoneThrough > 0 {
			if err := j.resume(); err != nil {
				// The job stays claimed until its lease lapses; a runner takes it up again then.
				if ctx.Err() == nil {
					r.cfg.Logger.Warn("resume bulk job", "job", id, "err", err)
				}
				return
			}
		}
	}
	for ctx.Err() == nil {
		err := j.step()
		switch {
		case err == nil:
			j.failures = 0
			if j.job.Status != bulkjob.StatusRUNNING {
				return
			}
		case errors.Is(err, errLost):
			return
		case errors.Is(err, errNoRoom):
			changed = j.wait(changed)
			if err := j.renew(); err != nil {
				if !errors.Is(err, errLost) && ctx.Err() == nil {
					r.cfg.Logger.Warn("renew bulk job lease", "job", id, "err", err)
				}
				return
			}
		case ctx.Err() != nil:
			return
		case fault.KindOf(err) == fault.InsufficientCredits:
			// The balance fell between its read and the payment (intake spends it too): the next batch reads
			// it again.
		default:
			j.failures++
			r.cfg.Logger.Warn("bulk job batch failed", "job", id, "failures", j.failures, "err", err)
			if j.failures >= maxBatchFailures {
				j.failed(err)
				return
			}
			j.wait(nil)
		}
	}
}

// errNoRoom says the next deliveries go to recipients with no place for another retry now.
var errNoRoom = errors.New("no room")

// step acts on the next batch of the job's items, or ends the job when none is left.
func (j *jobRun) step() error {
	size := retryBatch
	if j.job.Kind == Cancel {
		size = cancelBatch
	}
	rows, err := j.r.cfg.DB.Client.BulkJobItem.Query().
		Where(bulkjobitem.JobID(j.job.ID), bulkjobitem.DeliveryIDGT(j.job.DoneThrough)).
		Order(bulkjobitem.ByDeliveryID()).Limit(size).All(j.ctx)
	if err != nil {
		return fmt.Errorf("read items: %w", err)
	}
	if len(rows) == 0 {
		return j.end(bulkjob.StatusSUCCEEDED, "")
	}
	items := make([]item, len(rows))
	for i, it := range rows {
		items[i] = item{DeliveryID: it.DeliveryID, RequestID: it.RequestID, RecipientID: it.RecipientID}
	}
	if j.job.Kind == Retry {
		if err := j.refresh(); err != nil {
			return err
		}
		if items = j.fitting(items); len(items) == 0 {
			return errNoRoom
		}
	}
	return j.batch(items)
}

// batch acts on items in one transaction that also moves the job past them, counts them and extends the
// lease. A retry batch takes no more items than the tenant's balance pays for (delivery.RetryBatch pays for
// them all at its end); at a balance of zero it ends the job as STOPPED_NO_CREDITS instead.
func (j *jobRun) batch(items []item) error {
	var retried map[int]int
	var job *ent.BulkJob
	err := storage.InTx(j.ctx, j.r.cfg.DB.Client, func(ctx context.Context, tx *ent.Client) error {
		current, err := j.hold(ctx, tx)
		if err != nil {
			return err
		}
		retried = map[int]int{}
		var done, failed int
		stop := ""
		if j.job.Kind == Retry {
			done, failed, stop, err = j.retry(ctx, tx, current, &items, retried)
		} else {
			done, failed, err = j.cancel(ctx, tx, items)
		}
		if err != nil {
			return err
		}
		now := j.r.cfg.Now()
		upd := tx.BulkJob.UpdateOneID(current.ID).AddDone(done).AddFailed(failed).SetUpdatedAt(now).
			SetLeaseExpiresAt(now.Add(j.r.cfg.Lease))
		if len(items) > 0 {
			upd.SetDoneThrough(items[len(items)-1].DeliveryID)
		}
		if j.job.Kind == Retry {
			upd.AddCreditsSpent(int64(done))
		}
		if stop != "" {
			upd.SetStatus(bulkjob.StatusSTOPPED_NO_CREDITS).SetErrorMessage(stop).SetFinishedAt(now).
				SetLeaseOwner("").ClearLeaseExpiresAt()
			if _, err := tx.BulkJobItem.Delete().Where(bulkjobitem.JobID(current.ID)).Exec(ctx); err != nil {
				return fmt.Errorf("delete items: %w", err)
			}
		}
		if job, err = upd.Save(ctx); err != nil {
			return fmt.Errorf("record progress: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	j.job, j.renewed = job, j.r.cfg.Now()
	for id, rcp := range retried {
		j.outstanding[id] = rcp
	}
	publish(j.r.cfg.Events, j.r.cfg.Logger, job)
	return nil
}

// retry retries as many of items as the balance pays for (cutting items to them) and records the new
// deliveries in retried; stop says why the job ends here, when the balance is spent.
func (j *jobRun) retry(ctx context.Context, tx *ent.Client, job *ent.BulkJob, items *[]item, retried map[int]int) (done, failed int, stop string, err error) {
	t, err := tx.Tenant.Get(ctx, job.TenantID)
	if err != nil {
		return 0, 0, "", fmt.Errorf("read balance: %w", err)
	}
	if t.CreditBalance <= 0 {
		*items = nil
		return 0, 0, fmt.Sprintf("the tenant ran out of credits after %d retries", job.Done), nil
	}
	if int64(len(*items)) > t.CreditBalance {
		*items = (*items)[:t.CreditBalance]
	}
	ids := make([]int, len(*items))
	for i, it := range *items {
		ids[i] = it.DeliveryID
	}
	outcomes, err := j.r.cfg.Delivery.RetryBatch(ctx, tx, job.TenantID, ids)
	if err != nil {
		return 0, 0, "", err // INSUFFICIENT_CREDITS too: the balance changed since it was read; try again
	}
	for i, o := range outcomes {
		if o.Err != nil {
			failed++
			continue
		}
		done++
		retried[o.Retry.ID] = (*items)[i].RecipientID
	}
	return done, failed, "", nil
}

// cancel cancels items (delivery.CancelBatch).
func (j *jobRun) cancel(ctx context.Context, tx *ent.Client, items []item) (done, failed int, err error) {
	ids := make([]int, len(items))
	for i, it := range items {
		ids[i] = it.DeliveryID
	}
	outcomes, err := j.r.cfg.Delivery.CancelBatch(ctx, tx, ids)
	if err != nil {
		return 0, 0, err
	}
	for _, o := range outcomes {
		if o != nil {
			failed++
		} else {
			done++
		}
	}
	return done, failed, nil
}

// hold reads the job in tx, locked until the commit, if it is still running under this runner's lease.
func (j *jobRun) hold(ctx context.Context, tx *ent.Client) (*ent.BulkJob, error) {
	q := tx.BulkJob.Query().Where(bulkjob.ID(j.job.ID), bulkjob.LeaseOwner(j.r.cfg.Owner),
		bulkjob.StatusEQ(bulkjob.StatusRUNNING))
	q.Modify(storage.RowLocksOf(j.r.cfg.DB.Dialect).NoKeyUpdate)
	job, err := q.Only(ctx)
	if ent.IsNotFound(err) {
		return nil, errLost
	}
	if err != nil {
		return nil, fmt.Errorf("hold job: %w", err)
	}
	return job, nil
}

// end finishes the job with status (SUCCEEDED when its items ran out, FAILED) and drops its items.
func (j *jobRun) end(status bulkjob.Status, message string) error {
	var job *ent.BulkJob
	err := storage.InTx(j.ctx, j.r.cfg.DB.Client, func(ctx context.Context, tx *ent.Client) error {
		current, err := j.hold(ctx, tx)
		if err != nil {
			return err
		}
		now := j.r.cfg.Now()
		if job, err = tx.BulkJob.UpdateOne(current).SetStatus(status).SetErrorMessage(message).
			SetFinishedAt(now).SetUpdatedAt(now).SetLeaseOwner("").ClearLeaseExpiresAt().Save(ctx); err != nil {
			return fmt.Errorf("end job: %w", err)
		}
		if _, err := tx.BulkJobItem.Delete().Where(bulkjobitem.JobID(current.ID)).Exec(ctx); err != nil {
			return fmt.Errorf("delete items: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	j.job = job
	publish(j.r.cfg.Events, j.r.cfg.Logger, job)
	return nil
}

// failed ends the job as FAILED, with what went wrong.
func (j *jobRun) failed(err error) {
	if j.ctx.Err() != nil || errors.Is(err, errLost) {
		return
	}
	j.r.cfg.Logger.Warn("bulk job failed", "job", j.job.ID, "err", err)
	if err := j.end(bulkjob.StatusFAILED, "stopped after repeated errors: "+fault.Message(err)); err != nil && j.ctx.Err() == nil {
		j.r.cfg.Logger.Warn("end failed bulk job", "job", j.job.ID, "err", err)
	}
}

// renew extends the lease of a job that waits, at most once per poll interval; errLost when the job was
// canceled or taken over meanwhile.
func (j *jobRun) renew() error {
	now := j.r.cfg.Now()
	if now.Sub(j.renewed) < j.r.cfg.PollInterval {
		return nil
	}
	n, err := j.r.cfg.DB.Client.BulkJob.Update().
		Where(bulkjob.ID(j.job.ID), bulkjob.LeaseOwner(j.r.cfg.Owner), bulkjob.StatusEQ(bulkjob.StatusRUNNING)).
		SetLeaseExpiresAt(now.Add(j.r.cfg.Lease)).Save(j.ctx)
	if err != nil {
		return err
	}
	if n == 0 {
		return errLost
	}
	j.renewed = now
	return nil
}

// wait returns when changed says the server's deliveries changed, after PollInterval, or when the job's
// context ends. It returns changed, or nil once the bus closed it.
func (j *jobRun) wait(changed <-chan events.Event) <-chan events.Event {
	timer := time.NewTimer(j.r.cfg.PollInterval)
	defer timer.Stop()
	select {
	case <-j.ctx.Done():
	case <-timer.C:
	case _, ok := <-changed:
		if !ok {
			return nil
		}
		for range len(changed) { // what else is queued says the same
			<-changed
		}
	}
	return changed
}

// fitting is the longest run of items, in order, whose recipients each have a place for one more retry.
func (j *jobRun) fitting(items []item) []item {
	taken := map[int]int{}
	for _, rcp := range j.outstanding {
		taken[rcp]++
	}
	for i, it := range items {
		if taken[it.RecipientID] >= j.r.cfg.Window {
			return items[:i]
		}
		taken[it.RecipientID]++
	}
	return items
}

// refresh forgets the retries that no longer take a place.
func (j *jobRun) refresh() error {
	if len(j.outstanding) == 0 {
		return nil
	}
	ids := make([]string, 0, len(j.outstanding))
	for id := range j.outstanding {
		ids = append(ids, strconv.Itoa(id))
	}
	// The ids are ints: writing them into the statement is safe, and keeps it one statement whatever their number.
	return j.load(`SELECT d.id, d.recipient_id FROM deliveries d WHERE d.id IN (` + strings.Join(ids, ", ") + `) AND ` + outstandingCondition)
}

// resume finds the outstanding retries of a job taken over from another process.
func (j *jobRun) resume() error {
	return j.load(resumedSQL.For(j.r.cfg.DB), j.job.ID, j.job.DoneThrough)
}

// load replaces the outstanding retries with those query returns (delivery id, recipient id).
func (j *jobRun) load(query string, args ...any) error {
	rows, err := j.r.cfg.DB.SQL.QueryContext(j.ctx, query, args...)
	if err != nil {
		return fmt.Errorf("outstanding retries: %w", err)
	}
	defer rows.Close()
	clear(j.outstanding)
	for rows.Next() {
		var id, rcp int
		if err := rows.Scan(&id, &rcp); err != nil {
			return err
		}
		j.outstanding[id] = rcp
	}
	return rows.Err()
}
