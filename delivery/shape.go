package delivery

import (
	"encoding/json"

	"github.com/adal-relay/adal/destauth"
	"github.com/adal-relay/adal/ent"
)

// ErrTransform: the recipient's transformation failed (it threw, ran out of its CPU time or memory, or
// returned something that is not a request) or cancelled the delivery; nothing was sent.
const ErrTransform ErrorKind = "TRANSFORM"

// AuthOf decodes how attempts to r authenticate; nil when they do not. A stored value that does not decode
// authenticates nothing, and the receiver says so.
func AuthOf(r *ent.Recipient) *destauth.Config {
	if len(r.Auth) == 0 {
		return nil
	}
	var c destauth.Config
	if json.Unmarshal(r.Auth, &c) != nil {
		return nil
	}
	return &c
}
