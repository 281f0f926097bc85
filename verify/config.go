package verify

import (
	"cmp"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Algorithm is the hash of a generic HMAC signature.
type Algorithm string

// The algorithms.
const (
	SHA1   Algorithm = "SHA1"
	SHA256 Algorithm = "SHA256"
	SHA512 Algorithm = "SHA512"
)

// Encoding is how a generic HMAC signature is written in its header.
type Encoding string

// The encodings.
const (
	Hex    Encoding = "HEX"
	Base64 Encoding = "BASE64"
)

// Limits of a configuration.
const (
	// MaxSecrets is how many secrets a server holds: two, so that a sender can rotate — add the new secret,
	// let the sender switch, remove the old one.
	MaxSecrets = 2
	// MaxSecretLength bounds one secret, in bytes.
	MaxSecretLength = 512
	// DefaultTolerance is how far a signature's timestamp may be from now, in seconds, unless set.
	DefaultTolerance = 300
	// MaxTolerance bounds the tolerance, in seconds: a day.
	MaxTolerance = 86400
	// standardSecretPrefix starts a Standard Webhooks secret; the rest is the key, in base64.
	standardSecretPrefix = "whsec_"
)

// Config is a server's verification, as stored. Secrets never leave the server: the API shows how many are
// set, not what they are.
type Config struct {
	Kind Kind `json:"kind"`
	// Enforce refuses (401) a request that fails; without it the request is accepted and marked unverified.
	Enforce bool `json:"enforce"`
	// Secrets are the signing secrets (the passwords for BASIC, the keys for API_KEY): a request passes when
	// it matches either.
	Secrets []string `json:"secrets,omitempty"`
	// Header is where an HMAC signature or an API key is read.
	Header string `json:"header,omitempty"`
	// QueryParameter is where an API key is read, instead of a header.
	QueryParameter string    `json:"queryParameter,omitempty"`
	Algorithm      Algorithm `json:"algorithm,omitempty"`
	Encoding       Encoding  `json:"encoding,omitempty"`
	// Prefix precedes an HMAC signature in its header (e.g. "sha256=").
	Prefix string `json:"prefix,omitempty"`
	// ToleranceSeconds bounds the age of a timestamped signature (STRIPE, SLACK, STANDARD_WEBHOOKS).
	ToleranceSeconds int `json:"toleranceSeconds,omitempty"`
	// Username is the user of BASIC.
	Username string `json:"username,omitempty"`
}

// Active reports whether c verifies anything.
func (c Config) Active() bool { return c.Kind != "" && c.Kind != KindNone }

// Headers are the request headers the scheme reads, canonical, in the order a sender writes them.
func (c Config) Headers() []string {
	switch c.Kind {
	case KindHMAC:
		return []string{http.CanonicalHeaderKey(c.Header)}
	case KindGitHub:
		return []string{githubHeader}
	case KindStripe:
		return []string{stripeHeader}
	case KindShopify:
		return []string{shopifyHeader}
	case KindSlack:
		return []string{slackTimestampHeader, slackSignatureHeader}
	case KindStandardWebhooks:
		return []string{standardIDHeader, standardTimestampHeader, standardSignatureHeader}
	case KindBasic:
		return []string{"Authorization"}
	case KindAPIKey:
		if c.Header != "" {
			return []string{http.CanonicalHeaderKey(c.Header)}
		}
	}
	return []string{}
}

// Input is a change of verification, as the API takes it: every field but Kind may be left out. Secrets left
// out keep the ones set, as long as the scheme stays the same: a tenant can switch enforcement on or off
// without sending the secret again.
type Input struct {
	Kind             Kind
	Enforce          *bool
	Secrets          []string
	Header           *string
	QueryParameter   *string
	Algorithm        *Algorithm
	Encoding         *Encoding
	Prefix           *string
	ToleranceSeconds *int
	Username         *string
}

// Apply returns the configuration in replaces current (nil when none was set), validated. Its errors name
// the field at fault, as "verification.<field> …", for the client.
func (in Input) Apply(current *Config) (Config, error) {
	c := Config{Kind: in.Kind, Enforce: true, Secrets: in.Secrets}
	if in.Enforce != nil {
		c.Enforce = *in.Enforce
	}
	if c.Kind == KindNone {
		return Config{Kind: KindNone, Enforce: c.Enforce}, in.onlyKind()
	}
	if c.Secrets == nil && current != nil && current.Kind == in.Kind {
		c.Secrets = current.Secrets
	}
	c.Header = deref(in.Header)
	c.QueryParameter = deref(in.QueryParameter)
	c.Prefix = deref(in.Prefix)
	c.Username = deref(in.Username)
	c.Algorithm = deref(in.Algorithm)
	c.Encoding = deref(in.Encoding)
	c.ToleranceSeconds = deref(in.ToleranceSeconds)
	if c.Kind == KindHMAC {
		c.Algorithm = cmp.Or(c.Algorithm, SHA256)
		c.Encoding = cmp.Or(c.Encoding, Hex)
	}
	if timestamped(c.Kind) && in.ToleranceSeconds == nil {
		c.ToleranceSeconds = DefaultTolerance
	}
	if err := in.fieldsFor(); err != nil {
		return Config{}, err
	}
	return c, c.validate()
}

// onlyKind refuses settings given with NONE.
func (in Input) onlyKind() error {
	if in.Secrets != nil || in.Header != nil || in.QueryParameter != nil || in.Algorithm != nil ||
		in.Encoding != nil || in.Prefix != nil || in.ToleranceSeconds != nil || in.Username != nil {
		return errors.New("verification: kind NONE takes no other setting than enforce")
	}
	return nil
}

// fieldsFor refuses a setting the scheme does not use, so a tenant is never left believing it applies.
func (in Input) fieldsFor() error {
	uses := map[string]bool{}
	switch in.Kind {
	case KindHMAC:
		uses = map[string]bool{"header": true, "algorithm": true, "encoding": true, "prefix": true}
	case KindStripe, KindSlack, KindStandardWebhooks:
		uses = map[string]bool{"toleranceSeconds": true}
	case KindBasic:
		uses = map[string]bool{"username": true}
	case KindAPIKey:
		uses = map[string]bool{"header": true, "queryParameter": true}
	}
	given := map[string]bool{
		"header": in.Header != nil, "queryParameter": in.QueryParameter != nil, "algorithm": in.Algorithm != nil,
		"encoding": in.Encoding != nil, "prefix": in.Prefix != nil, "toleranceSeconds": in.ToleranceSeconds != nil,
		"username": in.Username != nil,
	}
	for _, f := range []string{"header", "queryParameter", "algorithm", "encoding", "prefix", "toleranceSeconds", "username"} {
		if given[f] && !uses[f] {
			return fmt.Errorf("verification.%s does not apply to kind %s", f, in.Kind)
		}
	}
	return nil
}

// timestamped reports whether the scheme signs a timestamp, whose age toleranceSeconds bounds.
func timestamped(k Kind) bool { return k == KindStripe || k == KindSlack || k == KindStandardWebhooks }

// validate checks a whole configuration.
func (c Config) validate() error {
	if !slices.Contains(Kinds, c.Kind) {
		return fmt.Errorf("verification.kind must be one of %v", Kinds)
	}
	if c.Kind == KindNone {
		return nil
	}
	if len(c.Secrets) == 0 {
		return fmt.Errorf("verification.secrets is required for %s (%s)", c.Kind, secretWord(c.Kind))
	}
	if len(c.Secrets) > MaxSecrets {
		return fmt.Errorf("verification.secrets holds at most %d, so that a sender can rotate", MaxSecrets)
	}
	for _, s := range c.Secrets {
		if err := checkSecret(c.Kind, s); err != nil {
			return err
		}
	}
	switch c.Kind {
	case KindHMAC:
		if c.Header == "" {
			return errors.New("verification.header is required for HMAC")
		}
		if !slices.Contains([]Algorithm{SHA1, SHA256, SHA512}, c.Algorithm) {
			return errors.New("verification.algorithm must be SHA1, SHA256 or SHA512")
		}
		if c.Encoding != Hex && c.Encoding != Base64 {
			return errors.New("verification.encoding must be HEX or BASE64")
		}
		if len(c.Prefix) > 64 || !printable(c.Prefix) {
			return errors.New("verification.prefix must be at most 64 printable characters")
		}
	case KindStripe, KindSlack, KindStandardWebhooks:
		if c.ToleranceSeconds < 1 || c.ToleranceSeconds > MaxTolerance {
			return fmt.Errorf("verification.toleranceSeconds must be between 1 and %d", MaxTolerance)
		}
	case KindBasic:
		if c.Username == "" || len(c.Username) > 200 || strings.Contains(c.Username, ":") || !printable(c.Username) {
			return errors.New("verification.username is required for BASIC: at most 200 printable characters, no ':'")
		}
	case KindAPIKey:
		if (c.Header == "") == (c.QueryParameter == "") {
			return errors.New("verification: API_KEY takes exactly one of header or queryParameter")
		}
		if len(c.QueryParameter) > 100 || !printable(c.QueryParameter) {
			return errors.New("verification.queryParameter must be at most 100 printable characters")
		}
	}
	if c.Header != "" && !validHeaderName(c.Header) {
		return errors.New("verification.header must be a valid HTTP header name of at most 100 characters")
	}
	if c.Header != "" && headerReserved(c.Header) {
		return fmt.Errorf("verification.header %q is not a header a sender controls", c.Header)
	}
	return nil
}

// checkSecret checks one secret for its scheme.
func checkSecret(k Kind, s string) error {
	if s == "" || len(s) > MaxSecretLength {
		return fmt.Errorf("verification.secrets: each must be 1 to %d bytes", MaxSecretLength)
	}
	if k == KindStandardWebhooks {
		if _, err := standardKey(s); err != nil {
			return fmt.Errorf("verification.secrets: %w", err)
		}
	}
	if (k == KindBasic || k == KindAPIKey) && !printable(s) {
		return fmt.Errorf("verification.secrets: a %s must be printable characters", secretWord(k))
	}
	return nil
}

// standardKey is the key of a Standard Webhooks secret: whsec_ followed by the key in base64.
func standardKey(secret string) ([]byte, error) {
	rest, ok := strings.CutPrefix(secret, standardSecretPrefix)
	if !ok {
		return nil, errors.New("a STANDARD_WEBHOOKS secret starts with whsec_")
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || len(key) == 0 {
		return nil, errors.New("a STANDARD_WEBHOOKS secret is whsec_ followed by the key in base64")
	}
	return key, nil
}

func secretWord(k Kind) string {
	switch k {
	case KindBasic:
		return "password"
	case KindAPIKey:
		return "key"
	}
	return "signing secret"
}

// validHeaderName reports whether s is an HTTP field name (RFC 9110 token) of reasonable length.
func validHeaderName(s string) bool {
	if s == "" || len(s) > 100 {
		return false
	}
	for _, r := range s {
		if r > 0x7e || !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return false
		}
	}
	return true
}

// headerReserved reports whether intake never sees the header as the sender wrote it: Adal's own, which it
// drops, and those of the connection.
func headerReserved(name string) bool {
	c := http.CanonicalHeaderKey(name)
	return strings.HasPrefix(c, "X-Adal-") || c == "Host" || c == "Content-Length" || c == "Transfer-Encoding" ||
		c == "Connection"
}

// printable reports whether s is printable ASCII (a header value, a credential, a parameter name).
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
