// Package fault gives Adal's errors an operation and a kind. The kind is what a client can act on: the GraphQL
// layer turns it into extensions.code, and the HTTP handlers into a status.
package fault

import (
	"errors"
	"fmt"
)

// Kind classifies an error for clients.
type Kind string

// The kinds, spelled as the GraphQL extensions.code they become.
const (
	Internal            Kind = "INTERNAL"
	Unauthenticated     Kind = "UNAUTHENTICATED"
	Forbidden           Kind = "FORBIDDEN"
	NotFound            Kind = "NOT_FOUND"
	InvalidInput        Kind = "INVALID_INPUT"
	InsufficientCredits Kind = "INSUFFICIENT_CREDITS"
	Conflict            Kind = "CONFLICT"
	// Unavailable: the server could not take the work now; the same call may succeed later.
	Unavailable Kind = "UNAVAILABLE"
)

// Error is an error with the operation that failed and its kind.
type Error struct {
	Op   string // e.g. "routing.CreateRecipient"
	Kind Kind
	Msg  string // safe to show to the client
	Err  error  // underlying cause, if any; never shown to clients
}

func (e *Error) Error() string {
	switch {
	case e.Err != nil && e.Msg != "":
		return fmt.Sprintf("%s: %s: %v", e.Op, e.Msg, e.Err)
	case e.Err != nil:
		return fmt.Sprintf("%s: %v", e.Op, e.Err)
	default:
		return fmt.Sprintf("%s: %s", e.Op, e.Msg)
	}
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// E builds an error of the given kind with a client-facing message.
func E(op string, kind Kind, format string, args ...any) error {
	return &Error{Op: op, Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// Wrap attaches op and kind to a cause whose text is not meant for clients.
func Wrap(op string, kind Kind, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Op: op, Kind: kind, Err: err}
}

// KindOf returns the kind of the outermost *Error in err's chain, or Internal.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Internal
}

// Message returns what a client may read about err: the first client-facing message in the chain, or a
// generic text for internal errors so that no SQL or stack detail leaks.
func Message(err error) string {
	for err != nil {
		var e *Error
		if !errors.As(err, &e) {
			break
		}
		if e.Msg != "" {
			return e.Msg
		}
		err = e.Err
	}
	return "internal error"
}
