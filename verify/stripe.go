package verify

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// stripeHeader carries Stripe's signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "{t}.{body}">, with one v1
// per secret while Stripe rolls one (and maybe a v0 test signature, ignored).
const stripeHeader = "Stripe-Signature"

// stripe verifies Stripe's scheme; a signature older (or newer) than tolerance is stale.
type stripe struct {
	secrets   [][]byte
	tolerance time.Duration
}

func (s *stripe) Verify(r *Request) error {
	v := r.Header.Get(stripeHeader)
	if v == "" {
		return fail(ReasonMissing, "no %s header", stripeHeader)
	}
	var ts string
	var sigs [][]byte
	for _, item := range strings.Split(v, ",") {
		k, val, _ := strings.Cut(strings.TrimSpace(item), "=")
		switch k {
		case "t":
			ts = val
		case "v1":
			if sig, err := hex.DecodeString(val); err == nil {
				sigs = append(sigs, sig)
			}
		}
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fail(ReasonMalformed, "%s has no timestamp t=", stripeHeader)
	}
	if len(sigs) == 0 {
		return fail(ReasonMalformed, "%s has no v1 signature", stripeHeader)
	}
	want := macs(sha256.New, s.secrets, []byte(ts), []byte("."), r.Body)
	ok := false
	for _, sig := range sigs {
		if anyEqual(sig, want...) {
			ok = true
		}
	}
	if !ok {
		return fail(ReasonMismatch, "%s matches no secret", stripeHeader)
	}
	if !within(t, r.Now, s.tolerance) {
		return fail(ReasonStale, "%s timestamp is more than %s from now", stripeHeader, s.tolerance)
	}
	return nil
}
