package startstop_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/adal-relay/adal/startstop"
)

// ticker is a minimal service: one goroutine that runs until its context ends and then, when release is set,
// winds down only once release is closed.
type ticker struct {
	startstop.BaseStartStop
	runs    atomic.Int32
	release chan struct{}
}

func (t *ticker) Start(ctx context.Context) error {
	ctx, ok, stopped := t.StartInit(ctx)
	if !ok {
		return nil
	}
	t.runs.Add(1)
	go func() {
		defer stopped()
		<-ctx.Done()
		if t.release != nil {
			<-t.release
		}
	}()
	return nil
}

var _ startstop.Service = (*ticker)(nil)

func TestStartIsIdempotentAndStopWaits(t *testing.T) {
	t.Parallel()
	var s ticker
	s.Stop() // before Start: nothing to do
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := s.runs.Load(); got != 1 {
		t.Fatalf("two Starts began %d runs, want 1", got)
	}
	stopped := s.Stopped()
	select {
	case <-stopped:
		t.Fatal("stopped channel closed while running")
	default:
	}
	s.Stop()
	<-stopped
	if s.Running() {
		t.Fatal("running after Stop")
	}
	s.Stop()
}

func TestParentContextEndsTheRunAndAllowsARestart(t *testing.T) {
	t.Parallel()
	var s ticker
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := s.Stopped()
	cancel()
	<-stopped
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := s.runs.Load(); got != 2 {
		t.Fatalf("runs = %d, want 2", got)
	}
	s.Stop()
}

// A Start while the previous run is winding down (its parent context ended, its goroutine not yet done) waits
// for it and begins a new run, instead of taking the ending run for a live one.
func TestStartWhileARunWindsDownBeginsANewRun(t *testing.T) {
	t.Parallel()
	s := &ticker{release: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	started := make(chan error, 1)
	go func() { started <- s.Start(context.Background()) }()
	close(s.release) // the first run may end now; the second Start must not have returned before it did
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	if got := s.runs.Load(); got != 2 {
		t.Fatalf("runs = %d, want 2: the Start returned a run that was ending", got)
	}
	if !s.Running() {
		t.Fatal("not running after the second Start")
	}
	s.Stop()
}
