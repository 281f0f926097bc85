package verify

import (
	"encoding/base64"
	"strings"
)

// basic verifies HTTP Basic authentication: the user, and one of the passwords (two during a rotation).
type basic struct {
	user      []byte   // digest of the user name
	passwords [][]byte // digests of the passwords
}

func newBasic(user string, passwords []string) *basic {
	b := &basic{user: digest([]byte(user))}
	for _, p := range passwords {
		b.passwords = append(b.passwords, digest([]byte(p)))
	}
	return b
}

func (b *basic) Verify(r *Request) error {
	v := r.Header.Get("Authorization")
	if v == "" {
		return fail(ReasonMissing, "no Authorization header")
	}
	scheme, encoded, _ := strings.Cut(v, " ")
	if !strings.EqualFold(scheme, "Basic") {
		return fail(ReasonMalformed, "Authorization is not Basic")
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(encoded))
	if err != nil {
		return fail(ReasonMalformed, "Authorization is not base64")
	}
	user, password, ok := strings.Cut(string(raw), ":")
	if !ok {
		return fail(ReasonMalformed, "Authorization has no user:password")
	}
	// Both compared, always: which of the two was wrong is not told.
	userOK := anyEqual(digest([]byte(user)), b.user)
	passwordOK := anyEqual(digest([]byte(password)), b.passwords...)
	if !userOK || !passwordOK {
		return fail(ReasonMismatch, "wrong user or password")
	}
	return nil
}
