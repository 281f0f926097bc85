// Package swverify is what a receiver does with a Standard Webhooks signature, written from the specification
// alone, for tests: it shares no code with the signer it checks, so a test that passes with it shows that any
// receiver following the specification accepts what Adal sends — and refuses forgeries and stale deliveries.
//
// The specification: the secret is "whsec_" followed by the base64 of the key's bytes; the signed content is
// "{webhook-id}.{webhook-timestamp}.{body}"; the signature header holds space-separated "v1,{base64 of the
// HMAC-SHA256 of the signed content}" entries, any of which may match; a timestamp more than the tolerance
// (five minutes) away from the receiver's clock is refused.
package swverify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Names are the names of the three headers a receiver reads.
type Names struct{ ID, Timestamp, Signature string }

// The header names of the specification, and the ones Adal uses by default.
var (
	Standard = Names{ID: "webhook-id", Timestamp: "webhook-timestamp", Signature: "webhook-signature"}
	Adal     = Names{ID: "X-Adal-Webhook-Id", Timestamp: "X-Adal-Webhook-Timestamp", Signature: "X-Adal-Webhook-Signature"}
)

// Tolerance is how far a timestamp may be from the receiver's clock.
const Tolerance = 5 * time.Minute

// What a receiver answers a delivery it refuses.
var (
	ErrMissing   = errors.New("missing signature headers")
	ErrSecret    = errors.New("malformed secret")
	ErrTooOld    = errors.New("timestamp too old")
	ErrTooNew    = errors.New("timestamp too new")
	ErrNoMatch   = errors.New("no matching signature")
	ErrMalformed = errors.New("malformed timestamp")
)

// Verify checks h's signature over body with secret, at the receiver's time now.
func Verify(secret string, names Names, h http.Header, body []byte, now time.Time) error {
	id, ts, sigs := h.Get(names.ID), h.Get(names.Timestamp), h.Get(names.Signature)
	if id == "" || ts == "" || sigs == "" {
		return ErrMissing
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrMalformed
	}
	switch at := time.Unix(unix, 0); {
	case now.Sub(at) > Tolerance:
		return ErrTooOld
	case at.Sub(now) > Tolerance:
		return ErrTooNew
	}
	for _, sig := range strings.Split(sigs, " ") {
		ok, err := Matches(secret, id, ts, body, sig)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
	}
	return ErrNoMatch
}

// Matches reports whether one "v1,…" entry is the signature of id, ts and body with secret.
func Matches(secret, id, ts string, body []byte, entry string) (bool, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || !strings.HasPrefix(secret, "whsec_") {
		return false, ErrSecret
	}
	version, sig, ok := strings.Cut(entry, ",")
	if !ok || version != "v1" {
		return false, nil
	}
	got, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return false, nil
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil)), nil
}

// Entries is the signature header's entries, in the order sent.
func Entries(names Names, h http.Header) []string {
	return strings.Split(h.Get(names.Signature), " ")
}
