package startstop

import (
	"fmt"
	"log/slog"
	"runtime/debug"
)

// Recover runs fn and, if it panics, recovers: the panic is logged as an error with its stack, naming what was
// running, and returned as an error (nil when fn returned). Background work runs each item it holds under
// Recover and releases the item when it panicked, so that one bad item costs that item and not the process,
// whose every other tenant would go down with it. A nil logger is slog's default.
func Recover(logger *slog.Logger, what string, fn func()) (err error) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		err = fmt.Errorf("%s panicked: %v", what, v)
		if logger == nil {
			logger = slog.Default()
		}
		logger.Error("recovered from a panic", "in", what, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	}()
	fn()
	return nil
}

// Go runs fn on a goroutine of its own under Recover: a goroutine that must end when fn panics, after its
// deferred calls have released what it held.
func Go(logger *slog.Logger, what string, fn func()) {
	go func() { _ = Recover(logger, what, fn) }()
}
