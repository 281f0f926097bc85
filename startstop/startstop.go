// Package startstop gives every background service of a process the same lifecycle: Start(ctx) runs it until
// Stop or ctx ends, Stop waits for it, and both are idempotent. A service embeds BaseStartStop and calls
// StartInit at the top of its Start, or Run when its run is one goroutine.
package startstop

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Service is a background service.
type Service interface {
	// Start runs the service in the background until Stop or ctx ends; starting a running service does
	// nothing.
	Start(ctx context.Context) error
	// Stop ends the service and waits for it; stopping a stopped service does nothing.
	Stop()
}

// BaseStartStop is the bookkeeping of one run at a time: its context, and a channel closed once the run's
// goroutines have all ended. Once a run has ended the service may be started again.
type BaseStartStop struct {
	mu      sync.Mutex
	run     context.Context
	cancel  context.CancelFunc
	stopped chan struct{}
}

// StartInit begins a run. When the service already runs it returns ok false and nothing else to do.
// Otherwise ctx is the run's context, ended by Stop or by the parent, and the service must call stopped
// exactly once, when every goroutine of the run has ended (at once when its start failed). A run whose
// context has ended but whose goroutines have not is waited for, so a Start right after a run's parent
// context ended starts a new run rather than keeping one that is about to stop.
func (b *BaseStartStop) StartInit(parent context.Context) (ctx context.Context, ok bool, stopped func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.stopped != nil {
		if b.run.Err() == nil {
			return parent, false, nil
		}
		ending := b.stopped
		b.mu.Unlock()
		<-ending
		b.mu.Lock()
	}
	ctx, cancel := context.WithCancel(parent)
	ch := make(chan struct{})
	b.run, b.cancel, b.stopped = ctx, cancel, ch
	var once sync.Once
	return ctx, true, func() {
		once.Do(func() {
			cancel()
			b.mu.Lock()
			if b.stopped == ch {
				b.run, b.cancel, b.stopped = nil, nil, nil
			}
			b.mu.Unlock()
			close(ch)
		})
	}
}

// Run is the body of a Start whose run is one goroutine: it begins a run (nothing, when one is under way),
// calls setup, if any, before returning — a failed setup ends the run and its error is returned — and then
// runs fn on a goroutine of its own, the run ending when fn returns.
func (b *BaseStartStop) Run(parent context.Context, setup func(ctx context.Context) error, fn func(ctx context.Context)) error {
	ctx, ok, stopped := b.StartInit(parent)
	if !ok {
		return nil
	}
	if setup != nil {
		if err := setup(ctx); err != nil {
			stopped()
			return err
		}
	}
	go func() {
		defer stopped()
		fn(ctx)
	}()
	return nil
}

// Stop ends the current run, if any, and waits until it has stopped.
func (b *BaseStartStop) Stop() {
	b.mu.Lock()
	cancel, stopped := b.cancel, b.stopped
	b.mu.Unlock()
	if stopped == nil {
		return
	}
	cancel()
	<-stopped
}

// Running reports whether a run has begun and not yet stopped.
func (b *BaseStartStop) Running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stopped != nil
}

// Stopped returns a channel closed once the current run has stopped; closed already when none runs.
func (b *BaseStartStop) Stopped() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped == nil {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return b.stopped
}

// Every calls fn each interval until ctx ends: the loop of every service that works on a period. The first
// call comes one interval after Every is called. A call that panics is recovered and logged (Recover, naming
// what), and the next comes on time.
func Every(ctx context.Context, logger *slog.Logger, what string, interval time.Duration, fn func(ctx context.Context)) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for Wait(ctx, ticker.C, nil) {
		_ = Recover(logger, what, func() { fn(ctx) })
	}
}

// Wait blocks until tick fires or wake receives, and reports true then; false once ctx has ended. A nil wake
// never receives.
func Wait(ctx context.Context, tick <-chan time.Time, wake <-chan struct{}) bool {
	select {
	case <-ctx.Done():
		return false
	case <-tick:
	case <-wake:
	}
	return true
}
