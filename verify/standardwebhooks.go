package verify

import (
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// The Standard Webhooks headers: the message id, its Unix timestamp, and space-separated signatures, each
// v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}"> (a sender rotating its secret sends one per secret).
const (
	standardIDHeader        = "Webhook-Id"
	standardTimestampHeader = "Webhook-Timestamp"
	standardSignatureHeader = "Webhook-Signature"
)

// standardWebhooks verifies the Standard Webhooks scheme; its secrets are whsec_<base64 key>.
type standardWebhooks struct {
	keys      [][]byte
	tolerance time.Duration
}

func newStandardWebhooks(secrets []string, tolerance time.Duration) (*standardWebhooks, error) {
	s := &standardWebhooks{tolerance: tolerance}
	for _, secret := range secrets {
		key, err := standardKey(secret)
		if err != nil {
			return nil, err
		}
		s.keys = append(s.keys, key)
	}
	return s, nil
}

func (s *standardWebhooks) Verify(r *Request) error {
	id, ts, sigs := r.Header.Get(standardIDHeader), r.Header.Get(standardTimestampHeader), r.Header.Get(standardSignatureHeader)
	for i, v := range []string{id, ts, sigs} {
		if v == "" {
			return fail(ReasonMissing, "no %s header", strings.ToLower([]string{standardIDHeader, standardTimestampHeader, standardSignatureHeader}[i]))
		}
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fail(ReasonMalformed, "webhook-timestamp is not a Unix time")
	}
	want := macs(sha256.New, s.keys, []byte(id+"."+ts+"."), r.Body)
	ok, found := false, false
	for _, item := range strings.Fields(sigs) {
		version, b64, _ := strings.Cut(item, ",")
		if version != "v1" {
			continue
		}
		sent, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			continue
		}
		found = true
		if anyEqual(sent, want...) {
			ok = true
		}
	}
	switch {
	case !found:
		return fail(ReasonMalformed, "webhook-signature has no v1 signature")
	case !ok:
		return fail(ReasonMismatch, "webhook-signature matches no secret")
	case !within(t, r.Now, s.tolerance):
		return fail(ReasonStale, "webhook-timestamp is more than %s from now", s.tolerance)
	}
	return nil
}
