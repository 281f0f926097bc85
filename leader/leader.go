// Package leader decides which process of a cluster runs the once-per-cluster work (the cron jobs). On
// PostgreSQL the leader is the process whose dedicated connection holds a session-level advisory lock: the lock
// dies with the session, so a killed process hands leadership over without any bookkeeping. On SQLite there is
// only one process, and it always leads.
package leader

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"

	"sync/atomic"
	"time"

	"github.com/adal-relay/adal/startstop"
	"github.com/adal-relay/adal/storage"
)

// Defaults of Config.
const (
	// DefaultRetryInterval is how often a follower tries to take the lock: the longest a cluster runs without a
	// leader after the leader died.
	DefaultRetryInterval = 5 * time.Second
	// DefaultPingInterval is how often the leader checks its connection: the longest it may believe it leads
	// after Postgres dropped its session (and with it the lock).
	DefaultPingInterval = 5 * time.Second
	// DefaultPingTimeout is how long a ping may take before the leader counts its connection as lost.
	DefaultPingTimeout = 5 * time.Second
)

// Status is what a job asks before doing once-per-cluster work.
type Status interface {
	IsLeader() bool
}

// Always is a Status that always leads: for a process known to be alone (and for tests of the jobs themselves).
type Always struct{}

// IsLeader reports true.
func (Always) IsLeader() bool { return true }

// Config configures an Elector.
type Config struct {
	// DB is the database whose processes elect a leader. Required.
	DB *storage.DB
	// Key is the advisory lock key. Zero derives it from the connection's current schema, so that deployments
	// (and test runs) sharing one database in different schemas elect their leaders independently — advisory
	// locks are per database, not per schema.
	Key int64
	// RetryInterval is how often a follower tries to acquire the lock; default DefaultRetryInterval.
	RetryInterval time.Duration
	// PingInterval is how often the leader verifies its connection; default DefaultPingInterval.
	PingInterval time.Duration
	// PingTimeout bounds a ping (and the unlock on Stop); default DefaultPingTimeout. A slower ping counts as a
	// lost connection: better to step down than to lead on a session Postgres may already have dropped.
	PingTimeout time.Duration
	// OnChange, if set, is called with the new state each time leadership is gained or lost. It runs on the
	// elector's goroutine: it must not block for long.
	OnChange func(leader bool)
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *Config) validate() error {
	switch {
	case c.DB == nil:
		return errors.New("leader: Config.DB is required")
	case c.RetryInterval <= 0:
		return errors.New("leader: RetryInterval must be positive")
	case c.PingInterval <= 0:
		return errors.New("leader: PingInterval must be positive")
	case c.PingTimeout <= 0:
		return errors.New("leader: PingTimeout must be positive")
	}
	return nil
}

// Elector takes part in the election of one leader among the processes sharing a database. Start it once per
// process; IsLeader is cheap and safe to call from any goroutine.
type Elector struct {
	startstop.BaseStartStop
	cfg    Config
	leader atomic.Bool
}

// New returns an elector; it does nothing until Start. Zero durations take the defaults.
func New(cfg Config) (*Elector, error) {
	cfg.RetryInterval = cmp.Or(cfg.RetryInterval, DefaultRetryInterval)
	cfg.PingInterval = cmp.Or(cfg.PingInterval, DefaultPingInterval)
	cfg.PingTimeout = cmp.Or(cfg.PingTimeout, DefaultPingTimeout)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Elector{cfg: cfg}, nil
}

// IsLeader reports whether this process currently leads.
func (e *Elector) IsLeader() bool { return e.leader.Load() }

// Start begins campaigning in the background until ctx ends or Stop is called. Starting a started elector does
// nothing. Stop gives leadership up (releasing the lock at once, so another process can take over on its next
// retry) and waits for the elector's goroutine to end.
func (e *Elector) Start(ctx context.Context) error {
	return e.Run(ctx, nil, func(ctx context.Context) {
		// A campaign that panicked has let its lock go (its deferred release): step down, and campaign again.
		for startstop.Recover(e.cfg.Logger, "leader campaign", func() { campaigns.For(e.cfg.DB)(e, ctx) }) != nil {
			e.set(false)
			select {
			case <-ctx.Done():
			case <-time.After(e.cfg.RetryInterval):
			}
		}
		e.set(false)
	})
}

// campaigns are how a process leads on each dialect: on PostgreSQL by holding an advisory lock, on SQLite —
// one process's file, nobody to compete with — from the start.
var campaigns = storage.PerDialect[func(*Elector, context.Context)]{
	Postgres: (*Elector).campaign,
	SQLite:   (*Elector).alone,
}

func (e *Elector) alone(ctx context.Context) {
	e.set(true)
	<-ctx.Done()
}

func (e *Elector) set(leader bool) {
	if e.leader.Swap(leader) == leader {
		return
	}
	e.cfg.Logger.Info("leadership changed", "leader", leader)
	if e.cfg.OnChange != nil {
		e.cfg.OnChange(leader)
	}
}

// campaign is the Postgres loop: while following, try the lock every RetryInterval; while leading, ping the
// lock's connection every PingInterval and step down as soon as it fails.
func (e *Elector) campaign(ctx context.Context) {
	var held *sql.Conn
	defer func() {
		if held != nil {
			e.release(held)
		}
	}()
	key := e.cfg.Key
	timer := time.NewTimer(0)
	defer timer.Stop()
	for startstop.Wait(ctx, timer.C, nil) {
		if held == nil {
			if key == 0 {
				k, err := e.deriveKey(ctx)
				if err != nil {
					e.cfg.Logger.Warn("leader: derive lock key", "err", err)
					timer.Reset(e.cfg.RetryInterval)
					continue
				}
				key = k
			}
			conn, err := e.acquire(ctx, key)
			if err != nil && ctx.Err() == nil {
				e.cfg.Logger.Warn("leader: try lock", "err", err)
			}
			if conn != nil {
				held = conn
				e.set(true)
				timer.Reset(e.cfg.PingInterval)
			} else {
				timer.Reset(e.cfg.RetryInterval)
			}
			continue
		}
		if err := e.ping(ctx, held); err != nil {
			if ctx.Err() != nil {
				return // stopping: the deferred release steps down
			}
			e.cfg.Logger.Warn("leader: lost the lock's connection", "err", err)
			discard(held)
			held = nil
			e.set(false)
			timer.Reset(e.cfg.RetryInterval)
			continue
		}
		timer.Reset(e.cfg.PingInterval)
	}
}

// acquire takes a connection out of the pool and tries the lock on it; it returns the connection only when the
// lock is held. A connection that failed mid-statement is discarded, never returned to the pool: it might hold
// the lock without our knowing, and a pooled connection holding it would make the lock unreleasable.
func (e *Elector) acquire(ctx context.Context, key int64) (*sql.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.PingTimeout)
	defer cancel()
	conn, err := e.cfg.DB.SQL.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("get connection: %w", err)
	}
	var ok bool
	if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&ok); err != nil {
		discard(conn)
		return nil, err
	}
	if !ok {
		conn.Close() // holds nothing: back to the pool
		return nil, nil
	}
	return conn, nil
}

func (e *Elector) ping(ctx context.Context, conn *sql.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.PingTimeout)
	defer cancel()
	_, err := conn.ExecContext(ctx, `SELECT 1`)
	return err
}

// release unlocks explicitly, so a follower's next try succeeds without waiting for the session to end, then
// discards the connection either way.
func (e *Elector) release(conn *sql.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.PingTimeout)
	defer cancel()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_unlock_all()`); err != nil {
		e.cfg.Logger.Warn("leader: unlock", "err", err)
	}
	discard(conn)
}

// deriveKey names the lock after the schema the pool's connections use.
func (e *Elector) deriveKey(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.PingTimeout)
	defer cancel()
	var schema string
	if err := e.cfg.DB.SQL.QueryRowContext(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return 0, err
	}
	return KeyFor(schema), nil
}

// KeyFor is the advisory lock key an Elector with Config.Key zero uses for a schema.
func KeyFor(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("adal/leader/" + schema))
	return int64(h.Sum64())
}

// discard closes the connection's session instead of returning it to the pool: returning driver.ErrBadConn
// from Raw is database/sql's way of retiring a connection, and closing the session is what frees a session lock.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}
