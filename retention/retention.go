// Package retention purges expired requests together with their deliveries and attempts.
//
// On PostgreSQL the history is partitioned by day of expiry (storage.EnsurePartitions): a run first drops each
// day that has wholly passed, which frees its space at the cost of unlinking its files however many rows it
// holds, and creates the days ahead that intake will write into. Then it deletes, row by row, what has expired
// in the days still current (and in the default partition): a request is purged on time whatever day holds
// it. What piles up — a day's worth of history, a backlog after the purge was stopped — goes with its day, not
// through the row purge. On SQLite, with no partitions, the row purge is the whole purge.
//
// A run also deletes the aggregates behind the console's charts once they are older than stats.Retention.
//
// The row purge deletes in bounded batches, one short transaction each, so intake and the scheduler never
// queue behind a long purge, and it never waits on a row another transaction holds: such rows are left for the
// next run.
package retention

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/leader"
	"github.com/adal-relay/adal/stats"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/viewer"
)

// Defaults of Config.
const (
	// DefaultSpec runs the purge every five minutes: a request outlives its expiry by at most that much.
	DefaultSpec = "@every 5m"
	// DefaultBatchSize bounds one transaction to 1,000 requests and their history, a few thousand rows: short
	// enough that the locks it takes never stall intake noticeably, large enough to amortise the round trips.
	DefaultBatchSize = 1000
)

// Config configures a Purger.
type Config struct {
	// DB is the database to purge. Required.
	DB *storage.DB
	// Leader gates the scheduled runs: only the leader purges. Required (leader.Always{} for a lone process).
	Leader leader.Status
	// Spec is the robfig/cron schedule; default DefaultSpec.
	Spec string
	// BatchSize is the number of requests deleted per transaction; default DefaultBatchSize.
	BatchSize int
	// Workers is the number of batches purged at once on PostgreSQL; default 2: a purge is CPU-bound in the
	// database, and two workers purge at about twice the rate of one for a shorter burst of the same work;
	// more take too much of intake's share of the database meanwhile. SQLite, with its single writer, always
	// uses one.
	Workers int
	// Now is the clock that decides what has expired; default time.Now.
	Now func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *Config) validate() error {
	switch {
	case c.DB == nil:
		return errors.New("retention: Config.DB is required")
	case c.Leader == nil:
		return errors.New("retention: Config.Leader is required")
	case c.BatchSize < 1:
		return errors.New("retention: BatchSize must be positive")
	case c.Workers < 1:
		return errors.New("retention: Workers must be positive")
	}
	return nil
}

// Stats describes one purge run.
type Stats struct {
	Requests   int64 // requests deleted
	Deliveries int64 // their deliveries
	Attempts   int64 // the deliveries' attempts
	// Busy counts expired requests left for a later run because a delivery of theirs was locked by another
	// transaction (an attempt being recorded) at the time; with several workers, each batch that meets such a
	// request counts it.
	Busy int64
	// DaysCreated and DaysDropped count the history's day partitions the run created ahead and dropped (on
	// PostgreSQL), in PartitionsTook.
	DaysCreated, DaysDropped int
	PartitionsTook           time.Duration
	// Aggregates counts the rows of the charts' aggregates deleted for being older than stats.Retention.
	Aggregates int64
	// Batches is the number of transactions that deleted something.
	Batches int
	// Elapsed is the run's wall time; LongestBatch the longest single transaction, begin to commit.
	Elapsed      time.Duration
	LongestBatch time.Duration
}

// Rows is the number of rows deleted, all tables together.
func (s Stats) Rows() int64 { return s.Requests + s.Deliveries + s.Attempts }

// RequestsPerSecond is the purge rate of the run.
func (s Stats) RequestsPerSecond() float64 { return perSecond(s.Requests, s.Elapsed) }

// RowsPerSecond is the purge rate of the run counted in rows.
func (s Stats) RowsPerSecond() float64 { return perSecond(s.Rows(), s.Elapsed) }

func perSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Purger deletes expired requests with their history, on a cron schedule on the leader, or on demand.
type Purger struct {
	cfg Config
	q   queries
	job *leader.Cron
}

// New validates cfg and returns a stopped Purger.
func New(cfg Config) (*Purger, error) {
	cfg.Spec = cmp.Or(cfg.Spec, DefaultSpec)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, DefaultBatchSize)
	cfg.Workers = cmp.Or(cfg.Workers, 2)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.Workers = cfg.DB.Writers(cfg.Workers)
	p := &Purger{cfg: cfg, q: dialectQueries.For(cfg.DB)}
	job, err := leader.NewCron(leader.CronConfig{
		Name:   "retention",
		Spec:   cfg.Spec,
		Leader: cfg.Leader,
		Run:    p.run,
		Logger: cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	p.job = job
	return p, nil
}

// Start schedules the purge until ctx ends or Stop is called.
func (p *Purger) Start(ctx context.Context) error { return p.job.Start(ctx) }

// Stop unschedules the purge and waits for a run in progress, which stops after its current batch.
func (p *Purger) Stop() { p.job.Stop() }

func (p *Purger) run(ctx context.Context) error {
	st, err := p.PurgeOnce(ctx)
	level := slog.LevelDebug
	if st.Requests > 0 || st.DaysCreated > 0 || st.DaysDropped > 0 || st.Aggregates > 0 || err != nil {
		level = slog.LevelInfo
	}
	p.cfg.Logger.Log(ctx, level, "retention purge",
		"requests", st.Requests, "deliveries", st.Deliveries, "attempts", st.Attempts, "busy", st.Busy,
		"days_created", st.DaysCreated, "days_dropped", st.DaysDropped, "partitions_took", st.PartitionsTook, "aggregates", st.Aggregates,
		"batches", st.Batches, "elapsed", st.Elapsed,
		"requests_per_s", int64(st.RequestsPerSecond()), "rows_per_s", int64(st.RowsPerSecond()),
		"longest_batch", st.LongestBatch)
	return err
}

// PurgeOnce deletes everything that has expired by now, batch after batch, until a batch comes back short. It
// returns what it deleted even when a later batch fails.
func (p *Purger) PurgeOnce(ctx context.Context) (Stats, error) {
	ctx = viewer.SystemContext(ctx)
	now := p.cfg.Now()
	start := time.Now() // wall time for the figures, whatever the injected clock says
	var (
		mu   sync.Mutex
		st   Stats
		errs []error
		wg   sync.WaitGroup
	)
	if err := p.maintainPartitions(ctx, now, &st); err != nil {
		errs = append(errs, err)
	}
	n, err := stats.Purge(ctx, p.cfg.DB, now)
	st.Aggregates = n
	if err != nil {
		errs = append(errs, fmt.Errorf("retention: %w", err))
	}
	// Workers need no coordination: SKIP LOCKED hands each its own batch, and each stops at its first short one.
	for range p.cfg.Workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				b, err := p.purgeBatch(ctx, now)
				mu.Lock()
				st.add(b)
				if err != nil {
					errs = append(errs, fmt.Errorf("retention: purge batch: %w", err))
				}
				mu.Unlock()
				// A short batch means nothing else has expired. A full batch that deleted nothing is all busy
				// rows: the next run will find them free.
				if err != nil || b.selected < p.cfg.BatchSize || b.requests == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	st.Elapsed = time.Since(start)
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return st, errors.Join(errs...)
}

// maintainPartitions drops the history's days that have passed, and creates its day partitions from now's day
// through the horizon. A day that cannot be dropped or created now is by a later run; meanwhile the row purge
// deletes what expired in it, or its rows wait in the default partition.
func (p *Purger) maintainPartitions(ctx context.Context, now time.Time, st *Stats) error {
	if !p.cfg.DB.Postgres() {
		return nil
	}
	defer func(start time.Time) { st.PartitionsTook = time.Since(start) }(time.Now())
	var errs []error
	dropped, err := storage.DropExpiredPartitions(ctx, p.cfg.DB, now)
	st.DaysDropped = len(dropped)
	if err != nil {
		errs = append(errs, fmt.Errorf("retention: drop partitions: %w", err))
	}
	horizon, err := storage.PartitionHorizon(ctx, p.cfg.DB, now)
	if err == nil {
		st.DaysCreated, err = storage.EnsurePartitions(ctx, p.cfg.DB, now, horizon)
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("retention: create partitions: %w", err))
	}
	return errors.Join(errs...)
}

func (s *Stats) add(b batch) {
	s.Busy += b.busy
	if b.requests > 0 {
		s.Requests += b.requests
		s.Deliveries += b.deliveries
		s.Attempts += b.attempts
		s.Batches++
		s.LongestBatch = max(s.LongestBatch, b.took)
	}
}

type batch struct {
	selected                       int
	busy                           int64
	requests, deliveries, attempts int64
	took                           time.Duration
}

// purgeBatch deletes up to BatchSize expired requests, oldest expiry first, in one transaction. On PostgreSQL
// it locks the requests and then their deliveries with SKIP LOCKED: a request whose delivery is being worked on
// (an attempt being recorded) is left alone rather than waited for, so the purge neither blocks nor deadlocks
// with the scheduler; and once locked, no new delivery or attempt can be attached to what it deletes (those
// writers take their parent's lock first, see storage.unenforcedForeignKeys). Replays of a purged request keep
// existing, unlinked from it.
func (p *Purger) purgeBatch(ctx context.Context, now time.Time) (batch, error) {
	var b batch
	start := time.Now()
	err := storage.InTx(ctx, p.cfg.DB.Client, func(ctx context.Context, tx *ent.Client) error {
		b = batch{}
		if p.q.asyncCommit != "" {
			if _, err := tx.ExecContext(ctx, p.q.asyncCommit); err != nil {
				return fmt.Errorf("async commit: %w", err)
			}
		}
		reqIDs, err := queryIDs(ctx, tx, p.q.selectExpired, now, p.cfg.BatchSize)
		if err != nil {
			return fmt.Errorf("select expired requests: %w", err)
		}
		b.selected = len(reqIDs)
		if len(reqIDs) == 0 {
			return nil
		}
		deliveries, err := queryDeliveries(ctx, tx, p.q.lockDeliveries, p.q.list(reqIDs))
		if err != nil {
			return fmt.Errorf("lock deliveries: %w", err)
		}
		busy := make(map[int64]bool)
		for _, d := range deliveries {
			if !d.locked {
				busy[d.requestID] = true
			}
		}
		b.busy = int64(len(busy))
		purge := reqIDs
		if len(busy) > 0 {
			purge = make([]int64, 0, len(reqIDs))
			for _, id := range reqIDs {
				if !busy[id] {
					purge = append(purge, id)
				}
			}
		}
		purgeDeliveries := make([]int64, 0, len(deliveries))
		for _, d := range deliveries {
			if !busy[d.requestID] {
				purgeDeliveries = append(purgeDeliveries, d.id)
			}
		}
		if len(purge) == 0 {
			return nil
		}
		if len(purgeDeliveries) > 0 {
			if b.attempts, err = exec(ctx, tx, p.q.deleteAttempts, p.q.list(purgeDeliveries)); err != nil {
				return fmt.Errorf("delete attempts: %w", err)
			}
			if b.deliveries, err = exec(ctx, tx, p.q.deleteDeliveries, p.q.list(purgeDeliveries)); err != nil {
				return fmt.Errorf("delete deliveries: %w", err)
			}
		}
		if _, err = exec(ctx, tx, p.q.unlinkReplays, p.q.list(purge)); err != nil {
			return fmt.Errorf("unlink replays: %w", err)
		}
		if b.requests, err = exec(ctx, tx, p.q.deleteRequests, p.q.list(purge)); err != nil {
			return fmt.Errorf("delete requests: %w", err)
		}
		return nil
	})
	b.took = time.Since(start)
	return b, err
}

// queries are the statements of a batch in one dialect. Raw SQL because ent cannot say FOR UPDATE SKIP LOCKED
// portably, and because an id list travels as one array (or JSON) parameter instead of thousands of
// placeholders.
type queries struct {
	asyncCommit      string // no parameters; run first, or empty
	selectExpired    string // $1 now, $2 limit → request ids
	lockDeliveries   string // $1 request ids → (delivery id, request id, whether this transaction locked it)
	deleteAttempts   string // $1 delivery ids
	deleteDeliveries string // $1 delivery ids
	unlinkReplays    string // $1 request ids: clears replay_of_id of their replays
	deleteRequests   string // $1 request ids
	list             func([]int64) any
}

var dialectQueries = storage.PerDialect[queries]{Postgres: postgresQueries, SQLite: sqliteQueries}

func queryIDs(ctx context.Context, tx *ent.Client, query string, args ...any) ([]int64, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return storage.ScanColumn[int64](rows)
}

type lockedDelivery struct {
	id, requestID int64
	locked        bool
}

func queryDeliveries(ctx context.Context, tx *ent.Client, query string, args ...any) ([]lockedDelivery, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ds []lockedDelivery
	for rows.Next() {
		var d lockedDelivery
		if err := rows.Scan(&d.id, &d.requestID, &d.locked); err != nil {
			return nil, err
		}
		ds = append(ds, d)
	}
	return ds, rows.Err()
}

func exec(ctx context.Context, tx *ent.Client, query string, args ...any) (int64, error) {
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
