package verify

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"strings"
)

// signature is a MAC over the body in one header: the generic HMAC scheme, and the presets that are it with
// fixed settings (GitHub, Shopify).
type signature struct {
	header   string
	hash     func() hash.Hash
	encoding Encoding
	prefix   string
	secrets  [][]byte
}

func newHMAC(c Config, secrets [][]byte) *signature {
	h := sha256.New
	switch c.Algorithm {
	case SHA1:
		h = sha1.New
	case SHA512:
		h = sha512.New
	}
	return &signature{header: c.Header, hash: h, encoding: c.Encoding, prefix: c.Prefix, secrets: secrets}
}

func (s *signature) Verify(r *Request) error {
	v := strings.TrimSpace(r.Header.Get(s.header))
	if v == "" {
		return fail(ReasonMissing, "no %s header", s.header)
	}
	v, ok := cutPrefixFold(v, s.prefix)
	if !ok {
		return fail(ReasonMalformed, "%s does not start with %q", s.header, s.prefix)
	}
	sent, err := decode(s.encoding, v)
	if err != nil {
		return fail(ReasonMalformed, "%s is not %s", s.header, strings.ToLower(string(s.encoding)))
	}
	if !anyEqual(sent, macs(s.hash, s.secrets, r.Body)...) {
		return fail(ReasonMismatch, "%s matches no secret", s.header)
	}
	return nil
}

// macs are the MACs of the message parts under each secret.
func macs(h func() hash.Hash, secrets [][]byte, parts ...[]byte) [][]byte {
	out := make([][]byte, len(secrets))
	for i, secret := range secrets {
		m := hmac.New(h, secret)
		for _, p := range parts {
			m.Write(p)
		}
		out[i] = m.Sum(nil)
	}
	return out
}

// decode reads a signature written in enc. Base64 is accepted with or without padding, and in its URL-safe
// alphabet, as senders differ.
func decode(enc Encoding, s string) ([]byte, error) {
	if enc == Hex {
		return hex.DecodeString(s)
	}
	for _, e := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := e.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, base64.CorruptInputError(0)
}

// cutPrefixFold removes prefix from s, ignoring case ("SHA256=" and "sha256=" alike).
func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || !strings.EqualFold(s[:len(prefix)], prefix) {
		return s, false
	}
	return s[len(prefix):], true
}
