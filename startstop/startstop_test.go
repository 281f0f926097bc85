package startstop_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/adal-relay/adal/startstop"
)

// ticker is a minimal service: one goroutine that runs until its context ends.
type ticker struct {
	startstop.BaseStartStop
	runs atomic.Int32
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
