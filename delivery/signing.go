package delivery

import (
	"time"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/webhook"
)

// SignerOf is how an attempt of the request with key requestKey to r, starting at now, is signed: the request
// key as the message id (the same on every attempt of the request, new on a replay), r's signing key and,
// during a rotation's grace, the key the rotation replaced, after it; under the header names r chose. It reads
// only r's fields, which every claim returns with the delivery, so signing costs no round trip.
func SignerOf(r *ent.Recipient, requestKey string, now time.Time) webhook.Signer {
	s := webhook.Signer{ID: requestKey, Keys: [][]byte{r.SigningSecret}, Headers: webhook.AdalSignatureHeaders}
	if len(r.PreviousSigningSecret) > 0 && r.PreviousSecretExpiresAt != nil && now.Before(*r.PreviousSecretExpiresAt) {
		s.Keys = append(s.Keys, r.PreviousSigningSecret)
	}
	if r.SignatureHeaders == recipient.SignatureHeadersSTANDARD_WEBHOOKS {
		s.Headers = webhook.StandardSignatureHeaders
	}
	return s
}
