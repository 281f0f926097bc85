// Package verify checks that an inbound request comes from the sender a server expects: a signature over the
// body (generic HMAC, GitHub, Stripe, Shopify, Slack, Standard Webhooks) or a credential (HTTP Basic, an API
// key). Each scheme is one Verifier; New builds the one a server's Config names. It depends on nothing but the
// standard library, so the data model can store a Config as it is.
package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"net/http"
	"time"
)

// Kind names a verification scheme. The values are the GraphQL enum values (Verification.kind).
type Kind string

// The schemes.
const (
	// KindNone verifies nothing: every request is accepted, and deliveries carry no X-Adal-Verified.
	KindNone Kind = "NONE"
	// KindHMAC is a signature over the body in a header of the tenant's choice.
	KindHMAC Kind = "HMAC"
	// KindGitHub is GitHub's X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>.
	KindGitHub Kind = "GITHUB"
	// KindStripe is Stripe's Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "{t}.{body}">.
	KindStripe Kind = "STRIPE"
	// KindShopify is Shopify's X-Shopify-Hmac-Sha256: base64 HMAC-SHA256 of the body.
	KindShopify Kind = "SHOPIFY"
	// KindSlack is Slack's X-Slack-Signature: v0=<hex HMAC-SHA256 of "v0:{timestamp}:{body}">.
	KindSlack Kind = "SLACK"
	// KindStandardWebhooks is the Standard Webhooks scheme: webhook-id, webhook-timestamp, webhook-signature.
	KindStandardWebhooks Kind = "STANDARD_WEBHOOKS"
	// KindBasic is HTTP Basic authentication.
	KindBasic Kind = "BASIC"
	// KindAPIKey is a key in a header or a query parameter.
	KindAPIKey Kind = "API_KEY"
)

// Kinds are the schemes, NONE first.
var Kinds = []Kind{KindNone, KindHMAC, KindGitHub, KindStripe, KindShopify, KindSlack, KindStandardWebhooks,
	KindBasic, KindAPIKey}

// Reason says why a request failed verification. The values are the GraphQL enum values
// (Rejection.reason) and the reason label of the rejections metric.
type Reason string

// The reasons.
const (
	// ReasonMissing: the header, parameter or credential the scheme reads is absent.
	ReasonMissing Reason = "MISSING"
	// ReasonMalformed: it is present but cannot be read (bad encoding, no timestamp, wrong prefix).
	ReasonMalformed Reason = "MALFORMED"
	// ReasonMismatch: it matches none of the server's secrets — a forgery, or a sender with another secret.
	ReasonMismatch Reason = "MISMATCH"
	// ReasonStale: the signature matches but its timestamp is outside the tolerance — a replay, or a clock
	// far off.
	ReasonStale Reason = "STALE"
)

// Reasons are the reasons a request can fail.
var Reasons = []Reason{ReasonMissing, ReasonMalformed, ReasonMismatch, ReasonStale}

// Failure is a request that did not pass; its message names what was wrong, never a secret or the body.
type Failure struct {
	Reason  Reason
	Message string
}

func (f *Failure) Error() string { return string(f.Reason) + ": " + f.Message }

func fail(reason Reason, format string, args ...any) *Failure {
	return &Failure{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Request is what a verifier reads of an inbound request.
type Request struct {
	Header http.Header
	// RawQuery is the query string as received, without '?'.
	RawQuery string
	Body     []byte
	// Now is the time the request arrived, for the schemes that bound a signature's age.
	Now time.Time
}

// Verifier checks one request. Verify returns nil when the request passes and a *Failure when it does not.
// Verifiers are safe for concurrent use.
type Verifier interface {
	Verify(r *Request) error
}

// New returns the verifier of c, which must be valid (Input.Apply validates it); nil for NONE.
func New(c Config) (Verifier, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	secrets := make([][]byte, len(c.Secrets))
	for i, s := range c.Secrets {
		secrets[i] = []byte(s)
	}
	tolerance := time.Duration(c.ToleranceSeconds) * time.Second
	switch c.Kind {
	case KindHMAC:
		return newHMAC(c, secrets), nil
	case KindGitHub:
		return newGitHub(secrets), nil
	case KindStripe:
		return &stripe{secrets: secrets, tolerance: tolerance}, nil
	case KindShopify:
		return newShopify(secrets), nil
	case KindSlack:
		return &slack{secrets: secrets, tolerance: tolerance}, nil
	case KindStandardWebhooks:
		return newStandardWebhooks(c.Secrets, tolerance)
	case KindBasic:
		return newBasic(c.Username, c.Secrets), nil
	case KindAPIKey:
		return newAPIKey(c.Header, c.QueryParameter, c.Secrets), nil
	}
	return nil, nil
}

// anyEqual reports whether got equals one of want, comparing every candidate in constant time so that the
// time taken says nothing about which, or how much, matched.
func anyEqual(got []byte, want ...[]byte) bool {
	ok := false
	for _, w := range want {
		if hmac.Equal(got, w) {
			ok = true
		}
	}
	return ok
}

// digest hashes a credential so that comparing it takes the same time whatever its length.
func digest(s []byte) []byte {
	d := sha256.Sum256(s)
	return d[:]
}

// within reports whether a signature made at the Unix time ts is no further than tolerance from now, either
// way: a timestamp far in the future is as suspect as one far in the past.
func within(ts int64, now time.Time, tolerance time.Duration) bool {
	d := now.Sub(time.Unix(ts, 0))
	return d <= tolerance && d >= -tolerance
}
