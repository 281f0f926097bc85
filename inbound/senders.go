package inbound

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/verify"
)

// senders is what intake checks and answers for a server's senders, carried by the key cache so that none of
// it costs a database read per request: the methods it accepts, its verification, and its own answer to a
// stored request.
type senders struct {
	methods []string // nil: all
	allow   string   // the Allow header of a 405
	// verifier is nil when the server verifies nothing.
	verifier verify.Verifier
	kind     verify.Kind
	enforce  bool
	response *fixedResponse // nil: 202 {"requestId"}
	types    *typing        // nil: requests have no type
}

// typing is where the server reads its requests' type; nil when it types nothing.
func (s *senders) typing() *typing {
	if s == nil {
		return nil
	}
	return s.types
}

// fixedResponse is a server's own answer to a stored request.
type fixedResponse struct {
	status      int
	contentType string
	body        []byte
}

// sendersOf reads srv's settings for its senders; nil when it has none, so that a server without any costs
// intake nothing.
func sendersOf(srv *ent.Server) (*senders, error) {
	s := &senders{methods: srv.AllowedMethods, allow: strings.Join(srv.AllowedMethods, ", ")}
	if c := srv.Verification; c != nil && c.Active() {
		v, err := verify.New(*c)
		if err != nil {
			return nil, fmt.Errorf("server %d verification: %w", srv.ID, err)
		}
		s.verifier, s.kind, s.enforce = v, c.Kind, c.Enforce
	}
	if srv.ResponseStatus != nil {
		s.response = &fixedResponse{status: *srv.ResponseStatus, contentType: srv.ResponseContentType,
			body: []byte(srv.ResponseBody)}
	}
	s.types = typingOf(srv)
	if s.methods == nil && s.verifier == nil && s.response == nil && s.types == nil {
		return nil, nil
	}
	return s, nil
}

// allows reports whether intake accepts the method.
func (s *senders) allows(method string) bool {
	return s == nil || s.methods == nil || slices.Contains(s.methods, method)
}

// write sends the server's own answer.
func (r *fixedResponse) write(w http.ResponseWriter) {
	if r.contentType != "" {
		w.Header().Set("Content-Type", r.contentType)
	}
	w.WriteHeader(r.status)
	_, _ = w.Write(r.body)
}
