package startstop_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/adal-relay/adal/internal/testproc"
	"github.com/adal-relay/adal/startstop"
)

func TestRecoverLogsThePanicWithItsStack(t *testing.T) {
	t.Parallel()
	var log testproc.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	err := startstop.Recover(logger, "the test's work", func() { panic("boom") })
	if err == nil || !strings.Contains(err.Error(), "the test's work panicked: boom") {
		t.Fatalf("err = %v, want the panic as an error naming the work", err)
	}
	out := log.String()
	for _, want := range []string{"level=ERROR", "the test's work", "boom", "recover_test.go"} {
		if !strings.Contains(out, want) {
			t.Errorf("log %q lacks %q", out, want)
		}
	}
	if err := startstop.Recover(logger, "quiet work", func() {}); err != nil {
		t.Fatalf("work that returned: err = %v", err)
	}
}

// A periodic job that panics on one tick runs again on the next: the loop, and the process, go on.
func TestEveryGoesOnAfterAPanic(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls atomic.Int32
	third := make(chan struct{})
	done := make(chan struct{})
	var log testproc.Buffer
	go func() {
		defer close(done)
		startstop.Every(ctx, slog.New(slog.NewTextHandler(&log, nil)), "flaky job", time.Millisecond, func(context.Context) {
			switch calls.Add(1) {
			case 1:
				panic("first tick fails")
			case 3:
				close(third)
			}
		})
	}()
	select {
	case <-third:
	case <-time.After(10 * time.Second):
		t.Fatalf("%d calls: the loop did not go on after the panic", calls.Load())
	}
	cancel()
	<-done
	if !strings.Contains(log.String(), "first tick fails") {
		t.Errorf("the panic was not logged: %q", log.String())
	}
}

// Go's goroutine runs its deferred calls, then ends without taking the process down.
func TestGoReleasesWhatItHeld(t *testing.T) {
	t.Parallel()
	released := make(chan struct{})
	startstop.Go(slog.New(slog.NewTextHandler(&testproc.Buffer{}, nil)), "holder", func() {
		defer close(released)
		panic("while holding")
	})
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		t.Fatal("the deferred release did not run")
	}
}
