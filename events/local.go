package events

import (
	"context"

	"github.com/adal-relay/adal/startstop"
)

// Local is the in-process Bus for a single process (the SQLite deployment): Publish fans out directly to the
// subscribers of this process.
type Local struct {
	startstop.BaseStartStop
	hub *hub
}

var _ Service = (*Local)(nil)

// NewLocal returns a stopped in-process bus; call Start before Subscribe.
func NewLocal(opts ...Option) *Local {
	c := newConfig(opts)
	return &Local{hub: newHub(c.buffer)}
}

// Start lets subscribers in. The bus runs until ctx is done or Stop is called; starting a running bus does
// nothing, and a stopped bus can be started again. Stop closes every subscriber's channel. Publish keeps
// working (there is nobody to deliver to) so code that publishes during shutdown does not have to care about
// ordering against Stop.
func (l *Local) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return l.Run(ctx, func(context.Context) error {
		l.hub.start()
		return nil
	}, func(ctx context.Context) {
		<-ctx.Done()
		l.hub.stop()
	})
}

// Publish delivers evs to the matching subscribers of this process, in order. It does no I/O, so it ignores
// ctx and never fails.
func (l *Local) Publish(_ context.Context, evs ...Event) error {
	l.hub.publish(evs)
	return nil
}

// Subscribe returns a channel of the events matching f, closed when ctx is done or the bus stops. It fails with
// ErrNotRunning before Start or after Stop, and with ctx's error if ctx is already done.
func (l *Local) Subscribe(ctx context.Context, f Filter) (<-chan Event, error) {
	return l.hub.subscribe(ctx, f)
}
