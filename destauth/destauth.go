// Package destauth is how a recipient authenticates to its HTTP receiver: custom headers, HTTP Basic, a
// static bearer token, an OAuth2 client-credentials token fetched and cached on the way (Tokens), and a
// client certificate for mutual TLS.
//
// A Config is stored with the recipient as JSON. Its secrets are write-only in the API, which shows a
// Summary instead; no message of this package quotes a secret.
package destauth

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/adal-relay/adal/webhook"
)

// Config is a recipient's authentication to its receiver. The zero Config authenticates nothing.
type Config struct {
	// Headers are sent on every attempt, replacing any of the same name the sender sent. Their values are
	// secret: an API key header is the usual use.
	Headers map[string]string `json:"headers,omitempty"`
	// Basic sends HTTP Basic credentials.
	Basic *Basic `json:"basic,omitempty"`
	// Bearer sends a static bearer token.
	Bearer string `json:"bearer,omitempty"`
	// OAuth2 sends a bearer token obtained from a token endpoint with the client-credentials grant.
	OAuth2 *OAuth2 `json:"oauth2,omitempty"`
	// ClientCertificate is presented in the TLS handshake with the receiver (mutual TLS).
	ClientCertificate *ClientCertificate `json:"clientCertificate,omitempty"`
}

// Basic holds HTTP Basic credentials (RFC 7617).
type Basic struct {
	Username string `json:"username"`
	// Password is secret.
	Password string `json:"password"`
}

// OAuth2 is an OAuth2 client-credentials grant (RFC 6749 §4.4).
type OAuth2 struct {
	// TokenURL is the token endpoint, http or https; the egress guard decides whether it may be reached, as
	// for any receiver.
	TokenURL string `json:"tokenURL"`
	ClientID string `json:"clientID"`
	// ClientSecret is secret.
	ClientSecret string `json:"clientSecret"`
	// Scopes are requested as the space-separated scope parameter; none requests the client's default.
	Scopes []string `json:"scopes,omitempty"`
	// Audience is sent as the audience parameter, which some providers (Auth0, for one) require.
	Audience string `json:"audience,omitempty"`
}

// ClientCertificate is a certificate, with its chain, and the matching private key, both PEM.
type ClientCertificate struct {
	CertificatePEM string `json:"certificatePEM"`
	// KeyPEM is secret.
	KeyPEM string `json:"keyPEM"`
}

// Bounds of a Config: generous for real credentials, small enough that a recipient cannot make every
// attempt carry kilobytes of headers or make the relay parse megabytes of PEM.
const (
	MaxHeaders          = 32
	MaxHeaderNameLength = 128
	MaxHeaderValue      = 8 << 10
	MaxHeadersTotal     = 16 << 10
	MaxUsernameLength   = 1 << 10
	MaxPasswordLength   = 4 << 10
	MaxBearerLength     = 16 << 10
	MaxURLLength        = 2048
	MaxClientIDLength   = 1 << 10
	MaxClientSecret     = 4 << 10
	MaxScopes           = 64
	MaxScopeLength      = 256
	MaxAudienceLength   = 2048
	MaxCertificatePEM   = 64 << 10
	MaxKeyPEM           = 32 << 10
)

// reservedHeaders cannot be custom headers: the connection's own headers, which the transport computes or
// which mean nothing past one hop, and the Standard Webhooks signature headers, which a custom value would
// silently break. X-Adal-* are refused as a prefix.
var reservedHeaders = map[string]string{
	"Connection":          "it describes the connection, not the request",
	"Keep-Alive":          "it describes the connection, not the request",
	"Proxy-Authenticate":  "it describes the connection, not the request",
	"Proxy-Authorization": "it describes the connection, not the request",
	"Proxy-Connection":    "it describes the connection, not the request",
	"Te":                  "it describes the connection, not the request",
	"Trailer":             "it describes the connection, not the request",
	"Trailers":            "it describes the connection, not the request",
	"Transfer-Encoding":   "it describes the connection, not the request",
	"Upgrade":             "it describes the connection, not the request",
	"Expect":              "it describes the connection, not the request",
	"Host":                "the relay sets it from the recipient's URL",
	"Content-Length":      "the relay sets it from the body",
	"Webhook-Id":          "it carries the relay's signature",
	"Webhook-Timestamp":   "it carries the relay's signature",
	"Webhook-Signature":   "it carries the relay's signature",
}

// Validate checks a Config before it is stored. Its messages name the field at fault and never quote a
// secret.
func (c *Config) Validate() error {
	if c == nil {
		return nil
	}
	schemes := 0
	for _, set := range []bool{c.Basic != nil, c.Bearer != "", c.OAuth2 != nil} {
		if set {
			schemes++
		}
	}
	if schemes > 1 {
		return errors.New("set at most one of basic, bearer and oauth2: each of them sets the Authorization header")
	}
	if err := checkHeaders(c.Headers, schemes > 0); err != nil {
		return err
	}
	if c.Basic != nil {
		if err := c.Basic.validate(); err != nil {
			return err
		}
	}
	if c.Bearer != "" {
		if err := checkBearer(c.Bearer); err != nil {
			return err
		}
	}
	if c.OAuth2 != nil {
		if err := c.OAuth2.validate(); err != nil {
			return err
		}
	}
	if c.ClientCertificate != nil {
		if _, err := c.ClientCertificate.KeyPair(); err != nil {
			return err
		}
	}
	return nil
}

func checkHeaders(h map[string]string, authorization bool) error {
	if len(h) > MaxHeaders {
		return fmt.Errorf("headers: at most %d custom headers, not %d", MaxHeaders, len(h))
	}
	seen := make(map[string]string, len(h))
	total := 0
	// Sorted, so that a Config with several faults always reports the same one.
	for _, name := range slices.Sorted(maps.Keys(h)) {
		value := h[name]
		if name == "" {
			return errors.New("headers: a header name is empty")
		}
		if len(name) > MaxHeaderNameLength {
			return fmt.Errorf("headers: a header name is longer than %d characters", MaxHeaderNameLength)
		}
		if !webhook.ValidHeaderName(name) {
			return fmt.Errorf("headers: %q is not a valid header name (letters, digits and !#$%%&'*+-.^_`|~ only)", name)
		}
		canon := http.CanonicalHeaderKey(name)
		if other, dup := seen[canon]; dup {
			return fmt.Errorf("headers: %q and %q are the same header (names are case-insensitive)", other, name)
		}
		seen[canon] = name
		if why, ok := reservedHeaders[canon]; ok {
			return fmt.Errorf("headers: %q cannot be set: %s", name, why)
		}
		if strings.HasPrefix(canon, webhook.HeaderPrefix) {
			return fmt.Errorf("headers: %q cannot be set: X-Adal- headers are the relay's own", name)
		}
		if canon == "Authorization" && authorization {
			return fmt.Errorf("headers: %q cannot be set together with basic, bearer or oauth2, which set it", name)
		}
		if len(value) > MaxHeaderValue {
			return fmt.Errorf("headers: the value of %q is longer than %d bytes", name, MaxHeaderValue)
		}
		if !webhook.ValidHeaderValue(value) {
			return fmt.Errorf("headers: the value of %q contains a control character (line breaks included)", name)
		}
		total += len(name) + len(value)
	}
	if total > MaxHeadersTotal {
		return fmt.Errorf("headers: names and values together must be at most %d bytes", MaxHeadersTotal)
	}
	return nil
}

func (b *Basic) validate() error {
	if b.Username == "" && b.Password == "" {
		return errors.New("basic: set a username, a password or both")
	}
	if len(b.Username) > MaxUsernameLength {
		return fmt.Errorf("basic.username must be at most %d bytes", MaxUsernameLength)
	}
	if len(b.Password) > MaxPasswordLength {
		return fmt.Errorf("basic.password must be at most %d bytes", MaxPasswordLength)
	}
	// RFC 7617: the first colon ends the user-id, so a user-id with one cannot be sent.
	if strings.Contains(b.Username, ":") {
		return errors.New("basic.username cannot contain a colon")
	}
	if !printable(b.Username) {
		return errors.New("basic.username contains a control character or invalid UTF-8")
	}
	if !printable(b.Password) {
		return errors.New("basic.password contains a control character or invalid UTF-8")
	}
	return nil
}

func checkBearer(token string) error {
	if len(token) > MaxBearerLength {
		return fmt.Errorf("bearer must be at most %d bytes", MaxBearerLength)
	}
	if scheme, _, ok := strings.Cut(token, " "); ok && strings.EqualFold(scheme, "Bearer") {
		return errors.New(`bearer: give the token alone, without the "Bearer " prefix`)
	}
	for i := 0; i < len(token); i++ {
		if token[i] <= ' ' || token[i] >= 0x7f {
			return errors.New("bearer: a token is visible ASCII characters, without spaces")
		}
	}
	return nil
}

func (o *OAuth2) validate() error {
	if err := checkTokenURL(o.TokenURL); err != nil {
		return err
	}
	switch {
	case o.ClientID == "":
		return errors.New("oauth2.clientID is required")
	case len(o.ClientID) > MaxClientIDLength:
		return fmt.Errorf("oauth2.clientID must be at most %d bytes", MaxClientIDLength)
	case !printable(o.ClientID):
		return errors.New("oauth2.clientID contains a control character or invalid UTF-8")
	case o.ClientSecret == "":
		return errors.New("oauth2.clientSecret is required")
	case len(o.ClientSecret) > MaxClientSecret:
		return fmt.Errorf("oauth2.clientSecret must be at most %d bytes", MaxClientSecret)
	case !printable(o.ClientSecret):
		return errors.New("oauth2.clientSecret contains a control character or invalid UTF-8")
	case len(o.Scopes) > MaxScopes:
		return fmt.Errorf("oauth2.scopes: at most %d scopes, not %d", MaxScopes, len(o.Scopes))
	case len(o.Audience) > MaxAudienceLength:
		return fmt.Errorf("oauth2.audience must be at most %d bytes", MaxAudienceLength)
	case !printable(o.Audience):
		return errors.New("oauth2.audience contains a control character or invalid UTF-8")
	}
	for _, s := range o.Scopes {
		if s == "" {
			return errors.New("oauth2.scopes: a scope is empty")
		}
		if len(s) > MaxScopeLength {
			return fmt.Errorf("oauth2.scopes: a scope is longer than %d bytes", MaxScopeLength)
		}
		// RFC 6749 §3.3: scopes travel space-separated, so a scope is visible ASCII but for '"' and '\'.
		for i := 0; i < len(s); i++ {
			if c := s[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\\' {
				return fmt.Errorf("oauth2.scopes: %q is not a valid scope (visible ASCII without spaces, quotes or backslashes; list scopes separately)", s)
			}
		}
	}
	return nil
}

func checkTokenURL(raw string) error {
	if raw == "" {
		return errors.New("oauth2.tokenURL is required")
	}
	if len(raw) > MaxURLLength {
		return fmt.Errorf("oauth2.tokenURL must be at most %d characters", MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("oauth2.tokenURL is not a valid URL: %v", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("oauth2.tokenURL must be an absolute http:// or https:// URL")
	case u.Host == "" || u.Hostname() == "":
		return errors.New("oauth2.tokenURL has no host")
	case u.User != nil:
		return errors.New("oauth2.tokenURL cannot carry credentials: use clientID and clientSecret")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return errors.New("oauth2.tokenURL cannot have a fragment (#)")
	}
	return nil
}

// KeyPair parses the certificate and key, checking that they match; its errors name the field at fault.
func (cc *ClientCertificate) KeyPair() (tls.Certificate, error) {
	switch {
	case cc.CertificatePEM == "":
		return tls.Certificate{}, errors.New("clientCertificate.certificatePEM is required")
	case cc.KeyPEM == "":
		return tls.Certificate{}, errors.New("clientCertificate.keyPEM is required")
	case len(cc.CertificatePEM) > MaxCertificatePEM:
		return tls.Certificate{}, fmt.Errorf("clientCertificate.certificatePEM must be at most %d bytes", MaxCertificatePEM)
	case len(cc.KeyPEM) > MaxKeyPEM:
		return tls.Certificate{}, fmt.Errorf("clientCertificate.keyPEM must be at most %d bytes", MaxKeyPEM)
	}
	pair, err := tls.X509KeyPair([]byte(cc.CertificatePEM), []byte(cc.KeyPEM))
	if err != nil {
		// crypto/tls names what it could not find or match, never the key's bytes.
		return tls.Certificate{}, fmt.Errorf("clientCertificate: %s", strings.TrimPrefix(err.Error(), "tls: "))
	}
	if pair.Leaf == nil {
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return tls.Certificate{}, fmt.Errorf("clientCertificate.certificatePEM: %v", err)
		}
	}
	return pair, nil
}

// Fingerprint identifies the certificate and key together, for keeping one connection pool per client
// certificate without holding the key as a map key.
func (cc *ClientCertificate) Fingerprint() [sha256.Size]byte {
	return hashFields(cc.CertificatePEM, cc.KeyPEM)
}

// Apply sets the custom headers and the Authorization header on h. oauth2Token is the token to send for
// OAuth2 (see Tokens); it is ignored without OAuth2.
func (c *Config) Apply(h http.Header, oauth2Token string) {
	if c == nil {
		return
	}
	for name, value := range c.Headers {
		canon := http.CanonicalHeaderKey(name)
		// A sender's header under a non-canonical spelling would otherwise travel beside ours.
		for k := range h {
			if k != canon && strings.EqualFold(k, canon) {
				delete(h, k)
			}
		}
		h[canon] = []string{value}
	}
	switch {
	case c.Basic != nil:
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(c.Basic.Username+":"+c.Basic.Password)))
	case c.Bearer != "":
		h.Set("Authorization", "Bearer "+c.Bearer)
	case c.OAuth2 != nil:
		h.Set("Authorization", "Bearer "+oauth2Token)
	}
}

// Summary is a Config as the API may show it: everything but the secrets.
type Summary struct {
	// HeaderNames are the custom headers' names, sorted; their values are secret.
	HeaderNames []string
	// Basic is set with Basic credentials: the username (the password is secret).
	Basic *BasicSummary
	// HasBearer tells that a static bearer token is set.
	HasBearer bool
	// OAuth2 is set with OAuth2 (the client secret is secret).
	OAuth2 *OAuth2Summary
	// ClientCertificate describes the client certificate (the key is secret).
	ClientCertificate *CertificateSummary
}

// BasicSummary is the part of Basic that may be shown.
type BasicSummary struct{ Username string }

// OAuth2Summary is the part of OAuth2 that may be shown.
type OAuth2Summary struct {
	TokenURL, ClientID string
	Scopes             []string
	Audience           string
}

// CertificateSummary describes the client certificate; Err is set instead when it does not parse (a
// Config stored before a change of rules, say).
type CertificateSummary struct {
	Subject, Issuer     string
	NotBefore, NotAfter time.Time
	// SHA256 is the hex SHA-256 fingerprint of the certificate, as openssl prints it without colons.
	SHA256 string
	Err    string
}

// Summary describes c without its secrets.
func (c *Config) Summary() Summary {
	var s Summary
	if c == nil {
		return s
	}
	if len(c.Headers) > 0 {
		s.HeaderNames = slices.Sorted(maps.Keys(c.Headers))
	}
	if c.Basic != nil {
		s.Basic = &BasicSummary{Username: c.Basic.Username}
	}
	s.HasBearer = c.Bearer != ""
	if c.OAuth2 != nil {
		s.OAuth2 = &OAuth2Summary{
			TokenURL: c.OAuth2.TokenURL, ClientID: c.OAuth2.ClientID,
			Scopes: slices.Clone(c.OAuth2.Scopes), Audience: c.OAuth2.Audience,
		}
	}
	if c.ClientCertificate != nil {
		s.ClientCertificate = summarizeCertificate(c.ClientCertificate.CertificatePEM)
	}
	return s
}

// summarizeCertificate reads the leaf certificate alone, so that a summary never depends on the key.
func summarizeCertificate(certPEM string) *CertificateSummary {
	leaf, err := firstCertificate(certPEM)
	if err != nil {
		return &CertificateSummary{Err: err.Error()}
	}
	sum := sha256.Sum256(leaf.Raw)
	return &CertificateSummary{
		Subject: leaf.Subject.String(), Issuer: leaf.Issuer.String(),
		NotBefore: leaf.NotBefore, NotAfter: leaf.NotAfter,
		SHA256: fmt.Sprintf("%x", sum),
	}
}

// Empty reports whether c authenticates nothing.
func (c *Config) Empty() bool {
	return c == nil || len(c.Headers) == 0 && c.Basic == nil && c.Bearer == "" && c.OAuth2 == nil &&
		c.ClientCertificate == nil
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < ' ' || r == 0x7f {
			return false
		}
	}
	return true
}

// firstCertificate is the first certificate of a PEM bundle: the leaf, by convention.
func firstCertificate(certPEM string) (*x509.Certificate, error) {
	rest := []byte(certPEM)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("clientCertificate.certificatePEM holds no PEM certificate")
		}
		if block.Type == "CERTIFICATE" {
			leaf, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("clientCertificate.certificatePEM: %v", err)
			}
			return leaf, nil
		}
	}
}

// hashFields hashes fields unambiguously: each is prefixed with its length.
func hashFields(fields ...string) [sha256.Size]byte {
	h := sha256.New()
	var n [8]byte
	for _, f := range fields {
		l := uint64(len(f))
		for i := range n {
			n[i] = byte(l >> (8 * i))
		}
		h.Write(n[:])
		h.Write([]byte(f))
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}
