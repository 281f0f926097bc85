package eventtype

import (
	"errors"
	"fmt"
	"strings"
)

// MaxNameLength bounds an event type's name, and so the type read from a request (MaxTypeLength).
const MaxNameLength = MaxTypeLength

// CheckName reports whether name can name an event type: letters, digits and . _ - : / ("order.paid",
// "invoice:created", "stripe/charge.succeeded"). The set leaves out spaces and '*', which subscriptions
// use as their wildcard.
func CheckName(name string) error {
	if name == "" {
		return errors.New("event type name is empty")
	}
	if len(name) > MaxNameLength {
		return fmt.Errorf("event type name is longer than %d characters", MaxNameLength)
	}
	for _, r := range name {
		if !isNameChar(r) {
			return fmt.Errorf("event type name %q has %q: use letters, digits and . _ - : / (as in order.paid)",
				name, r)
		}
	}
	return nil
}

func isNameChar(r rune) bool {
	switch {
	case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		return true
	}
	return strings.ContainsRune("._-:/", r)
}

// isSeparator is a character after which a subscription may put its wildcard.
func isSeparator(c byte) bool { return c == '.' || c == ':' || c == '/' }

// CheckPattern reports whether p can stand in a recipient's subscription (see Matches): an event type name,
// "*", or a name ending in . : or / followed by "*".
func CheckPattern(p string) error {
	if p == "*" {
		return nil
	}
	prefix, wild := strings.CutSuffix(p, "*")
	if !wild {
		return CheckName(p)
	}
	if prefix == "" || !isSeparator(prefix[len(prefix)-1]) {
		return fmt.Errorf("event type pattern %q puts * inside a name: use it alone, or after . : or / (as in order.*)", p)
	}
	if err := CheckName(prefix); err != nil {
		return fmt.Errorf("event type pattern %q: %w", p, err)
	}
	return nil
}

// Matches reports whether a recipient subscribed to types gets a request of type t.
//
// An empty list subscribes to everything, typed or not. Otherwise t must be non-empty and equal one of the
// names, or fall under one of the wildcards: "*" matches any type; a name ending in a separator (. : or /)
// and "*" matches any type that starts with that name and goes on after it, at any depth ("order.*"
// matches "order.paid" and "order.paid.late", but not "order" nor "orders.paid"). A '*' anywhere else is
// no wildcard, and as names cannot hold it, such an entry matches nothing.
func Matches(types []string, t string) bool {
	if len(types) == 0 {
		return true
	}
	if t == "" {
		return false
	}
	for _, p := range types {
		if p == t || p == "*" {
			return true
		}
		prefix, wild := strings.CutSuffix(p, "*")
		if wild && prefix != "" && isSeparator(prefix[len(prefix)-1]) &&
			len(t) > len(prefix) && strings.HasPrefix(t, prefix) {
			return true
		}
	}
	return false
}
