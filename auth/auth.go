// Package auth issues and verifies Adal's API tokens (HS256 JWTs) and turns a verified token into a
// viewer.Viewer on the request context, for plain HTTP requests and for GraphQL websocket connections.
//
// Every check a token must pass lives here, both when issuing and when verifying, so that a token this
// package would refuse can never be minted by it either: a role outside ADMIN/OWNER/MEMBER, an OWNER or
// MEMBER without a tenant, an ADMIN bound to a tenant. SYSTEM is never carried by a token: it is set only by
// background services through viewer.SystemContext.
package auth

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/adal-relay/adal/viewer"
)

const (
	// Issuer is the "iss" claim of every Adal token; a token minted by anything else is refused.
	Issuer = "adal"
	// Audience is the "aud" claim of every Adal token; it keeps tokens signed with a shared secret for
	// another purpose from being accepted as API credentials.
	Audience = "adal-api"
	// MinSecretLen is the shortest HMAC secret New accepts: HS256 is only as strong as its key, and 32 bytes
	// matches the hash size (RFC 7518 §3.2 requires at least that).
	MinSecretLen = 32
	// Leeway tolerates clock skew between the machine that issued a token and the one verifying it
	// (replicas behind a load balancer), without meaningfully extending a token's life.
	Leeway = 30 * time.Second
)

// ErrInvalidToken is wrapped by every error Verify returns, so callers can tell "bad credentials"
// (answer UNAUTHENTICATED) apart from anything else with errors.Is. When the JWT library produced the
// reason, it is wrapped too (e.g. jwt.ErrTokenExpired), so a client-facing layer can say "expired".
var ErrInvalidToken = errors.New("invalid token")

// ErrMissingToken is returned by ViewerFromInitPayload when the payload carries no token at all, so the
// caller can choose between refusing the connection and serving it anonymously, as the HTTP middleware
// does for requests without an Authorization header.
var ErrMissingToken = errors.New("no token")

// ErrTokenRevoked and ErrTokenExpired are why a watched context ends (see Watch); ErrTokenRevoked is also
// wrapped by Verify's error for a revoked token.
var (
	ErrTokenRevoked = errors.New("token revoked")
	ErrTokenExpired = errors.New("token expired")
)

// Token is what a verified token says about itself beyond its viewer: its id ("jti") and when it expires.
type Token struct {
	ID        string
	ExpiresAt time.Time
}

type tokenKey struct{}

// NewContext returns ctx carrying the token the request was authenticated with.
func NewContext(ctx context.Context, t Token) context.Context {
	return context.WithValue(ctx, tokenKey{}, t)
}

// FromContext returns the token the request was authenticated with, if it was.
func FromContext(ctx context.Context) (Token, bool) {
	t, ok := ctx.Value(tokenKey{}).(Token)
	return t, ok
}

// Authenticator issues and verifies Adal's JWTs. It is safe for concurrent use. Besides the signature it
// checks a token's id against the set of revoked ids held in memory (SetRevoked, kept fresh by a Store), so
// verifying costs no database round trip.
type Authenticator struct {
	secret   []byte
	issuer   string
	audience string
	now      func() time.Time
	parser   *jwt.Parser
	revoked  atomic.Pointer[map[string]struct{}]

	mu       sync.Mutex
	sessions map[*session]struct{}
}

// session is a long-lived connection authenticated by one token (a websocket), ended when the token dies.
type session struct {
	token  Token
	cancel context.CancelCauseFunc
}

// claims is the token body. Tenant is a pointer so that "absent" and "0" are told apart: an ADMIN token that
// names any tenant at all is refused rather than silently read as global.
type claims struct {
	Role   viewer.Role `json:"role"`
	Tenant *int        `json:"tenant,omitempty"`
	jwt.RegisteredClaims
}

// New returns an Authenticator signing with secret. now is the clock used for iat/exp when issuing and for
// expiry checks when verifying; nil means time.Now (tests inject a fixed clock instead of sleeping).
// The secret is copied so a caller reusing its buffer cannot change the key under us.
func New(secret []byte, now func() time.Time) (*Authenticator, error) {
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("auth: jwt secret is %d bytes, need at least %d", len(secret), MinSecretLen)
	}
	if now == nil {
		now = time.Now
	}
	a := &Authenticator{
		secret:   append([]byte(nil), secret...),
		issuer:   Issuer,
		audience: Audience,
		now:      now,
		sessions: map[*session]struct{}{},
	}
	// The algorithm list is explicit so a token's own "alg" header can never pick the verification method
	// ("none", or an asymmetric alg whose public key is confused with our HMAC secret).
	a.parser = jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithIssuer(a.issuer),
		jwt.WithAudience(a.audience),
		jwt.WithLeeway(Leeway),
		jwt.WithTimeFunc(a.now),
	)
	return a, nil
}

// Issue signs a token for v that expires after ttl, with a random id and no stored row (tests and tools;
// the API mints stored tokens through Store.Mint). It refuses what Verify would refuse, so a bug in a caller
// cannot hand out a token that either fails later or, worse, grants more than intended.
func (a *Authenticator) Issue(v viewer.Viewer, ttl time.Duration) (string, error) {
	if ttl <= 0 {
		return "", fmt.Errorf("auth: token ttl must be positive, got %v", ttl)
	}
	return a.sign(v, rand.Text(), a.now().Add(ttl))
}

// sign signs a token for v with id as its "jti", expiring at exp.
func (a *Authenticator) sign(v viewer.Viewer, id string, exp time.Time) (string, error) {
	if err := checkViewer(v); err != nil {
		return "", fmt.Errorf("auth: refusing to issue: %w", err)
	}
	now := a.now()
	if !exp.After(now) {
		return "", fmt.Errorf("auth: token would expire at %v, not after now", exp)
	}
	c := claims{
		Role: v.Role,
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    a.issuer,
			Subject:   v.Subject,
			Audience:  jwt.ClaimStrings{a.audience},
			ExpiresAt: jwt.NewNumericDate(exp),
			IssuedAt:  jwt.NewNumericDate(now),
			ID:        id,
		},
	}
	if v.Role != viewer.Admin {
		tenant := v.TenantID
		c.Tenant = &tenant
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(a.secret)
	if err != nil {
		return "", fmt.Errorf("auth: sign token: %w", err)
	}
	return s, nil
}

// Verify checks token's signature, algorithm, issuer, audience and lifetime, that its id is not revoked,
// then the same role/tenant rules Issue enforces, and returns the viewer it names. Every error wraps
// ErrInvalidToken.
func (a *Authenticator) Verify(token string) (viewer.Viewer, error) {
	v, _, err := a.VerifyToken(token)
	return v, err
}

// VerifyToken is Verify that also returns the token's id and expiry.
func (a *Authenticator) VerifyToken(token string) (viewer.Viewer, Token, error) {
	var c claims
	_, err := a.parser.ParseWithClaims(token, &c, a.key)
	if err != nil {
		return viewer.Viewer{}, Token{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	t := Token{ID: c.ID, ExpiresAt: c.ExpiresAt.UTC()}
	if a.isRevoked(t.ID) {
		return viewer.Viewer{}, Token{}, fmt.Errorf("%w: %w", ErrInvalidToken, ErrTokenRevoked)
	}
	v := viewer.Viewer{Role: c.Role, Subject: c.Subject}
	switch {
	case c.Role == viewer.Admin && c.Tenant != nil:
		return viewer.Viewer{}, Token{}, fmt.Errorf("%w: role ADMIN must not name a tenant", ErrInvalidToken)
	case c.Tenant != nil:
		v.TenantID = *c.Tenant
	}
	if err := checkViewer(v); err != nil {
		return viewer.Viewer{}, Token{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	return v, t, nil
}

// isRevoked reports whether id is in the revoked set. Tokens without an id, or issued before tokens were
// stored, are never in it: they stay valid until they expire.
func (a *Authenticator) isRevoked(id string) bool {
	set := a.revoked.Load()
	if set == nil || id == "" {
		return false
	}
	_, ok := (*set)[id]
	return ok
}

// SetRevoked replaces the set of revoked token ids and ends the sessions of tokens in it or past their
// expiry (see Watch).
func (a *Authenticator) SetRevoked(ids map[string]struct{}) {
	a.revoked.Store(&ids)
	a.sweep()
}

// revoke adds one id to the revoked set at once, ahead of the next SetRevoked, so the process that revoked a
// token refuses it immediately.
func (a *Authenticator) revoke(id string) {
	next := map[string]struct{}{id: {}}
	if set := a.revoked.Load(); set != nil {
		for k := range *set {
			next[k] = struct{}{}
		}
	}
	a.SetRevoked(next)
}

// Watch returns a context derived from ctx that ends, with ErrTokenRevoked or ErrTokenExpired as its cause
// (context.Cause), once t is revoked or would no longer pass Verify because it expired. Sessions are checked
// on every SetRevoked, which a running Store calls every few seconds.
func (a *Authenticator) Watch(ctx context.Context, t Token) context.Context {
	ctx, cancel := context.WithCancelCause(ctx)
	s := &session{token: t, cancel: cancel}
	a.mu.Lock()
	a.sessions[s] = struct{}{}
	a.mu.Unlock()
	context.AfterFunc(ctx, func() {
		a.mu.Lock()
		delete(a.sessions, s)
		a.mu.Unlock()
	})
	a.check(s)
	return ctx
}

// sweep ends the sessions whose token is revoked or expired.
func (a *Authenticator) sweep() {
	a.mu.Lock()
	live := make([]*session, 0, len(a.sessions))
	for s := range a.sessions {
		live = append(live, s)
	}
	a.mu.Unlock()
	for _, s := range live {
		a.check(s)
	}
}

func (a *Authenticator) check(s *session) {
	switch {
	case a.isRevoked(s.token.ID):
		s.cancel(ErrTokenRevoked)
	case a.now().After(s.token.ExpiresAt.Add(Leeway)):
		s.cancel(ErrTokenExpired)
	}
}

// key hands the parser our secret, re-checking the method itself: WithValidMethods already filters on the
// "alg" header, but checking the concrete type too means a future edit of the option list cannot open the
// door to a non-HMAC verifier being fed an HMAC secret.
func (a *Authenticator) key(t *jwt.Token) (any, error) {
	if t.Method != jwt.SigningMethodHS256 {
		return nil, fmt.Errorf("unexpected signing method %v", t.Header["alg"])
	}
	return a.secret, nil
}

// checkViewer holds the role/tenant rules shared by Issue and Verify.
func checkViewer(v viewer.Viewer) error {
	if v.Role == viewer.System {
		return errors.New("role SYSTEM is never carried by a token")
	}
	if !v.Role.Valid() {
		return fmt.Errorf("unknown role %q", v.Role)
	}
	if v.Role == viewer.Admin {
		if v.TenantID != 0 {
			return errors.New("role ADMIN must not name a tenant")
		}
		return nil
	}
	if v.TenantID <= 0 {
		return fmt.Errorf("role %s needs a tenant", v.Role)
	}
	return nil
}
