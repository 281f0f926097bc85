package leader

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/adal-relay/adal/startstop"
)

// CronConfig configures a Cron.
type CronConfig struct {
	// Name names the job in logs. Required.
	Name string
	// Spec is a robfig/cron spec: five fields or a descriptor such as "@every 5m", evaluated in UTC. Required.
	Spec string
	// Leader says whether this process may run the job now. Required: forgetting it would run once-per-cluster
	// work on every process.
	Leader Status
	// Run is the job. Its context ends when the Cron stops. Required.
	Run func(ctx context.Context) error
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *CronConfig) validate() error {
	switch {
	case c.Name == "":
		return errors.New("leader: CronConfig.Name is required")
	case c.Leader == nil:
		return errors.New("leader: CronConfig.Leader is required")
	case c.Run == nil:
		return errors.New("leader: CronConfig.Run is required")
	}
	if _, err := cron.ParseStandard(c.Spec); err != nil {
		return fmt.Errorf("leader: cron spec %q of %s: %w", c.Spec, c.Name, err)
	}
	return nil
}

// Cron runs one job on a robfig/cron schedule, on the leader only: every process keeps the schedule, and a tick
// on a follower does nothing, so leadership moving between processes needs no rescheduling. A run still going
// when the next tick comes makes that tick skip rather than overlap.
type Cron struct {
	startstop.BaseStartStop
	cfg CronConfig
}

// NewCron validates cfg and returns a stopped Cron.
func NewCron(cfg CronConfig) (*Cron, error) {
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.Logger = cfg.Logger.With("job", cfg.Name)
	return &Cron{cfg: cfg}, nil
}

// Start schedules the job until ctx ends or Stop is called. Starting a started Cron does nothing. Stop
// unschedules the job, cancels a run in progress and waits for it to return.
func (c *Cron) Start(ctx context.Context) error {
	logger := cronLogger{c.cfg.Logger}
	cr := cron.New(
		cron.WithLocation(time.UTC),
		cron.WithLogger(logger),
		cron.WithChain(cron.Recover(logger), cron.SkipIfStillRunning(logger)),
	)
	return c.Run(ctx, func(ctx context.Context) error {
		if _, err := cr.AddFunc(c.cfg.Spec, func() { c.tick(ctx) }); err != nil {
			return fmt.Errorf("leader: schedule %s: %w", c.cfg.Name, err)
		}
		cr.Start()
		return nil
	}, func(ctx context.Context) {
		<-ctx.Done()
		<-cr.Stop().Done()
	})
}

func (c *Cron) tick(ctx context.Context) {
	if ctx.Err() != nil || !c.cfg.Leader.IsLeader() {
		return
	}
	if err := c.cfg.Run(ctx); err != nil && ctx.Err() == nil {
		c.cfg.Logger.Error("cron job failed", "err", err)
	}
}

// cronLogger hands robfig/cron's own messages (skipped runs, recovered panics) to slog.
type cronLogger struct{ l *slog.Logger }

// Info gets robfig/cron's per-tick chatter ("wake", "run", "skip"), which only debugging wants.
func (l cronLogger) Info(msg string, kv ...any) { l.l.Debug("cron: "+msg, kv...) }

// Error gets recovered panics.
func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.l.Error("cron: "+msg, append([]any{"err", err}, kv...)...)
}
