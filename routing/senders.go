package routing

import (
	"fmt"
	"mime"
	"slices"
	"strings"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/verify"
)

// Bounds of what a server answers its senders.
const (
	// MaxResponseBody bounds a server's own answer to a stored request.
	MaxResponseBody = 1024
	// MaxAllowedMethods bounds the list of methods a server accepts.
	MaxAllowedMethods = 16
)

// ResponseInput is what a sender gets for a stored request instead of 202 {"requestId"}.
type ResponseInput struct {
	Status      int
	ContentType *string
	Body        *string
}

// senderSettings applies what in says of the server's senders — verification, allowed methods, answer — to
// m, validated; current is the server being updated (nil on create).
func senderSettings(op string, m *ent.ServerMutation, current *ent.Server, in ServerInput) error {
	if in.Verification != nil {
		var was *verify.Config
		if current != nil {
			was = current.Verification
		}
		c, err := in.Verification.Apply(was)
		if err != nil {
			return invalid(op, "%s", err)
		}
		if c.Active() {
			m.SetVerification(&c)
		} else {
			m.ClearVerification()
		}
	}
	switch {
	case in.ClearAllowedMethods && in.AllowedMethods != nil:
		return invalid(op, "give allowedMethods or clearAllowedMethods, not both")
	case in.ClearAllowedMethods:
		m.ClearAllowedMethods()
	case in.AllowedMethods != nil:
		methods, err := allowedMethods(in.AllowedMethods)
		if err != nil {
			return invalid(op, "%s", err)
		}
		m.SetAllowedMethods(methods)
	}
	switch {
	case in.ClearResponse && in.Response != nil:
		return invalid(op, "give response or clearResponse, not both")
	case in.ClearResponse:
		m.ClearResponseStatus()
		m.SetResponseContentType("")
		m.SetResponseBody("")
	case in.Response != nil:
		r, err := in.Response.validate()
		if err != nil {
			return invalid(op, "%s", err)
		}
		m.SetResponseStatus(r.Status)
		m.SetResponseContentType(*r.ContentType)
		m.SetResponseBody(*r.Body)
	}
	return nil
}

// allowedMethods normalises a list of methods: upper case, each once, in the order given.
func allowedMethods(in []string) ([]string, error) {
	if len(in) == 0 {
		return nil, fmt.Errorf("allowedMethods must name at least one method; clearAllowedMethods accepts all")
	}
	if len(in) > MaxAllowedMethods {
		return nil, fmt.Errorf("allowedMethods holds at most %d methods", MaxAllowedMethods)
	}
	out := make([]string, 0, len(in))
	for _, m := range in {
		m = strings.ToUpper(strings.TrimSpace(m))
		if !methodToken(m) {
			return nil, fmt.Errorf("allowedMethods: %q is not an HTTP method", m)
		}
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out, nil
}

// methodToken reports whether m is an HTTP method name (a token of letters and '-', as every registered
// method is) of reasonable length.
func methodToken(m string) bool {
	if m == "" || len(m) > 20 {
		return false
	}
	for _, r := range m {
		if !(r >= 'A' && r <= 'Z' || r == '-') {
			return false
		}
	}
	return true
}

// validate checks the answer and fills in its defaults.
func (r ResponseInput) validate() (ResponseInput, error) {
	body := ""
	if r.Body != nil {
		body = *r.Body
	}
	ct := ""
	if r.ContentType != nil {
		ct = strings.TrimSpace(*r.ContentType)
	} else if body != "" {
		ct = "text/plain; charset=utf-8"
	}
	switch {
	case r.Status < 200 || r.Status > 299:
		return r, fmt.Errorf("response.status must be between 200 and 299")
	case len(body) > MaxResponseBody:
		return r, fmt.Errorf("response.body must be at most %d bytes", MaxResponseBody)
	case body != "" && (r.Status == 204 || r.Status == 205):
		return r, fmt.Errorf("response.body must be empty for status %d", r.Status)
	case ct != "" && !validMediaType(ct):
		return r, fmt.Errorf("response.contentType must be a media type such as application/json")
	}
	r.Body, r.ContentType = &body, &ct
	return r, nil
}

func validMediaType(ct string) bool {
	if len(ct) > 200 {
		return false
	}
	for i := 0; i < len(ct); i++ {
		if ct[i] < 0x20 || ct[i] > 0x7e {
			return false
		}
	}
	_, _, err := mime.ParseMediaType(ct)
	return err == nil
}

func invalid(op, format string, args ...any) error {
	return fault.E(op, fault.InvalidInput, format, args...)
}
