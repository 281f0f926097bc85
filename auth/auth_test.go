package auth_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/auth"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/viewer"
)

var (
	testSecret = []byte("0123456789abcdef0123456789abcdef-test")
	t0         = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
)

// newAuth returns an authenticator on a clock stopped at t0, so expiry is tested by moving time instead of
// sleeping.
func newAuth(t *testing.T) (*auth.Authenticator, *relaytest.Clock) {
	t.Helper()
	c := relaytest.NewClock(t0)
	a, err := auth.New(testSecret, c.Now)
	require.NoError(t, err)
	return a, c
}

// mustIssue returns a token a issues for v, valid for ttl.
func mustIssue(t *testing.T, a *auth.Authenticator, v viewer.Viewer, ttl time.Duration) string {
	t.Helper()
	tok, err := a.Issue(v, ttl)
	require.NoError(t, err)
	return tok
}

// validClaims are what Issue would produce for an owner of tenant 7; tests tweak one field at a time.
func validClaims() jwt.MapClaims {
	return jwt.MapClaims{
		"sub":    "alice",
		"role":   "OWNER",
		"tenant": 7,
		"iss":    "adal",
		"aud":    []string{"adal-api"},
		"iat":    t0.Unix(),
		"exp":    t0.Add(time.Hour).Unix(),
		"jti":    "x",
	}
}

func sign(t *testing.T, m jwt.SigningMethod, key any, c jwt.Claims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, c).SignedString(key)
	require.NoError(t, err)
	return s
}

func requireInvalid(t *testing.T, a *auth.Authenticator, token string) error {
	t.Helper()
	v, err := a.Verify(token)
	require.ErrorIs(t, err, auth.ErrInvalidToken)
	require.Equal(t, viewer.Viewer{}, v)
	return err
}

func TestNewRejectsShortSecret(t *testing.T) {
	t.Parallel()
	_, err := auth.New(make([]byte, 31), nil)
	require.Error(t, err)
	a, err := auth.New(make([]byte, 32), nil)
	require.NoError(t, err)
	require.NotNil(t, a)
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, v := range []viewer.Viewer{
		{Role: viewer.Admin, Subject: "ops@example.com"},
		{Role: viewer.Owner, TenantID: 7, Subject: "alice"},
		{Role: viewer.Member, TenantID: 42, Subject: "bob"},
	} {
		t.Run(string(v.Role), func(t *testing.T) {
			t.Parallel()
			a, _ := newAuth(t)
			tok := mustIssue(t, a, v, time.Hour)
			got, err := a.Verify(tok)
			require.NoError(t, err)
			require.Equal(t, v, got)
		})
	}
}

func TestIssuedClaims(t *testing.T) {
	t.Parallel()
	a, _ := newAuth(t)
	parse := func(tok string) jwt.MapClaims {
		m := jwt.MapClaims{}
		_, err := jwt.NewParser(jwt.WithTimeFunc(func() time.Time { return t0 })).
			ParseWithClaims(tok, m, func(*jwt.Token) (any, error) { return testSecret, nil })
		require.NoError(t, err)
		return m
	}

	owner := mustIssue(t, a, viewer.Viewer{Role: viewer.Owner, TenantID: 7, Subject: "alice"}, time.Hour)
	m := parse(owner)
	require.Equal(t, "alice", m["sub"])
	require.Equal(t, "OWNER", m["role"])
	require.EqualValues(t, 7, m["tenant"])
	require.Equal(t, "adal", m["iss"])
	require.Equal(t, []any{"adal-api"}, m["aud"])
	require.EqualValues(t, t0.Unix(), m["iat"])
	require.EqualValues(t, t0.Add(time.Hour).Unix(), m["exp"])
	require.NotEmpty(t, m["jti"])

	admin := mustIssue(t, a, viewer.Viewer{Role: viewer.Admin, Subject: "ops"}, time.Hour)
	am := parse(admin)
	require.NotContains(t, am, "tenant")
	require.NotEqual(t, m["jti"], am["jti"], "jti must be random per token")

	tok, _, err := jwt.NewParser().ParseUnverified(owner, jwt.MapClaims{})
	require.NoError(t, err)
	require.Equal(t, "HS256", tok.Header["alg"])
}

func TestIssueRefuses(t *testing.T) {
	t.Parallel()
	a, _ := newAuth(t)
	for name, v := range map[string]viewer.Viewer{
		"system":            {Role: viewer.System, Subject: "system"},
		"empty role":        {Subject: "x"},
		"unknown role":      {Role: "ROOT", Subject: "x"},
		"owner no tenant":   {Role: viewer.Owner, Subject: "x"},
		"member no tenant":  {Role: viewer.Member, Subject: "x"},
		"negative tenant":   {Role: viewer.Member, TenantID: -1, Subject: "x"},
		"admin with tenant": {Role: viewer.Admin, TenantID: 3, Subject: "x"},
	} {
		tok, err := a.Issue(v, time.Hour)
		require.Error(t, err, name)
		require.Empty(t, tok, name)
	}
	_, err := a.Issue(viewer.Viewer{Role: viewer.Admin}, 0)
	require.Error(t, err, "non-positive ttl")
}

func TestExpiry(t *testing.T) {
	t.Parallel()
	a, c := newAuth(t)
	tok := mustIssue(t, a, viewer.Viewer{Role: viewer.Admin, Subject: "ops"}, time.Minute)

	// Within the clock-skew leeway the token still works...
	c.Set(t0.Add(time.Minute + 20*time.Second))
	_, err := a.Verify(tok)
	require.NoError(t, err)

	// ...beyond it, it does not, and the reason is visible to callers.
	c.Set(t0.Add(2 * time.Minute))
	err = requireInvalid(t, a, tok)
	require.ErrorIs(t, err, jwt.ErrTokenExpired)
}

func TestIssuedInTheFutureRefused(t *testing.T) {
	t.Parallel()
	a, _ := newAuth(t)
	c := validClaims()
	c["iat"] = t0.Add(10 * time.Minute).Unix()
	requireInvalid(t, a, sign(t, jwt.SigningMethodHS256, testSecret, c))
}

func TestVerifyRefuses(t *testing.T) {
	t.Parallel()
	a, _ := newAuth(t)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)

	// Sanity: the baseline claims are accepted, so each case below fails for its own reason only.
	v, err := a.Verify(sign(t, jwt.SigningMethodHS256, testSecret, validClaims()))
	require.NoError(t, err)
	require.Equal(t, viewer.Viewer{Role: viewer.Owner, TenantID: 7, Subject: "alice"}, v)

	// with returns the baseline claims changed by key/value pairs; a nil value deletes the claim.
	with := func(kv ...any) jwt.MapClaims {
		c := validClaims()
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(c, kv[i].(string))
			} else {
				c[kv[i].(string)] = kv[i+1]
			}
		}
		return c
	}
	hs := func(c jwt.MapClaims) string { return sign(t, jwt.SigningMethodHS256, testSecret, c) }

	cases := map[string]string{
		"no exp":            hs(with("exp", nil)),
		"alg none":          sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, validClaims()),
		"HS512":             sign(t, jwt.SigningMethodHS512, testSecret, validClaims()),
		"RS256":             sign(t, jwt.SigningMethodRS256, rsaKey, validClaims()),
		"wrong secret":      sign(t, jwt.SigningMethodHS256, []byte("another-secret-another-secret-0123"), validClaims()),
		"wrong issuer":      hs(with("iss", "someone-else")),
		"no issuer":         hs(with("iss", nil)),
		"wrong audience":    hs(with("aud", []string{"other-api"})),
		"no audience":       hs(with("aud", nil)),
		"owner no tenant":   hs(with("tenant", nil)),
		"owner tenant 0":    hs(with("tenant", 0)),
		"tenant not an int": hs(with("tenant", "7")),
		"member no tenant":  hs(with("role", "MEMBER", "tenant", nil)),
		"system":            hs(with("role", "SYSTEM")),
		"unknown role":      hs(with("role", "ROOT")),
		"no role":           hs(with("role", nil)),
		"admin with tenant": hs(with("role", "ADMIN")),
		"admin tenant 0":    hs(with("role", "ADMIN", "tenant", 0)),
		"system no tenant":  hs(with("role", "SYSTEM", "tenant", nil)),
		"garbage":           "not.a.jwt",
		"empty":             "",
	}
	for name, tok := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			requireInvalid(t, a, tok)
		})
	}
}

// A revoked id is refused; a token whose id was never revoked (one issued before tokens were stored, with a
// random id and no row) stays valid until it expires.
func TestRevokedSet(t *testing.T) {
	a, _ := newAuth(t)
	v := viewer.Viewer{Role: viewer.Owner, TenantID: 7, Subject: "o"}
	tok := mustIssue(t, a, v, time.Hour)
	_, info, err := a.VerifyToken(tok)
	require.NoError(t, err)
	require.NotEmpty(t, info.ID)
	require.Equal(t, t0.Add(time.Hour), info.ExpiresAt)

	a.SetRevoked(map[string]struct{}{"42": {}})
	_, err = a.Verify(tok)
	require.NoError(t, err, "an id outside the set")

	a.SetRevoked(map[string]struct{}{info.ID: {}})
	err = requireInvalid(t, a, tok)
	require.ErrorIs(t, err, auth.ErrTokenRevoked)

	a.SetRevoked(nil)
	_, err = a.Verify(tok)
	require.NoError(t, err, "a set reloaded without the id")
}

// A watched context ends when its token is revoked, or once it would fail Verify for its age.
func TestWatch(t *testing.T) {
	a, c := newAuth(t)
	exp := auth.Token{ID: "1", ExpiresAt: t0.Add(time.Minute)}
	rev := auth.Token{ID: "2", ExpiresAt: t0.Add(time.Hour)}
	expCtx := a.Watch(t.Context(), exp)
	revCtx := a.Watch(t.Context(), rev)

	a.SetRevoked(map[string]struct{}{"2": {}})
	require.ErrorIs(t, context.Cause(revCtx), auth.ErrTokenRevoked)
	require.NoError(t, expCtx.Err())

	c.Set(t0.Add(time.Minute + auth.Leeway))
	a.SetRevoked(nil)
	require.NoError(t, expCtx.Err(), "still within the leeway Verify grants")
	c.Set(t0.Add(time.Minute + auth.Leeway + time.Second))
	a.SetRevoked(nil)
	require.ErrorIs(t, context.Cause(expCtx), auth.ErrTokenExpired)

	// A token already dead when watched ends at once.
	require.ErrorIs(t, context.Cause(a.Watch(t.Context(), exp)), auth.ErrTokenExpired)
}
