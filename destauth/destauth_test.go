package destauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/egress"
)

// testCertificate returns a self-signed client certificate and its key, PEM.
func testCertificate(t *testing.T, cn string) (certPEM, keyPEM string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
}

const secret = "s3cr3t-value-never-shown"

func TestValidate(t *testing.T) {
	t.Parallel()
	certPEM, keyPEM := testCertificate(t, "client-a")
	_, otherKey := testCertificate(t, "client-b")
	oauth := func(mod func(*OAuth2)) *OAuth2 {
		o := &OAuth2{TokenURL: "https://auth.example.com/oauth/token", ClientID: "relay", ClientSecret: secret, Scopes: []string{"hooks:write"}}
		if mod != nil {
			mod(o)
		}
		return o
	}
	valid := []Config{
		{},
		{Headers: map[string]string{"X-Api-Key": secret, "Authorization": "Token " + secret}},
		{Basic: &Basic{Username: "relay", Password: secret}},
		{Basic: &Basic{Username: secret}},
		{Bearer: "abc.DEF-123_~+/=="},
		{OAuth2: oauth(nil), Headers: map[string]string{"X-Tenant": "t1"}},
		{OAuth2: oauth(func(o *OAuth2) {
			o.TokenURL = "http://127.0.0.1:8080/token"
			o.Scopes = nil
			o.Audience = "https://api"
		})},
		{ClientCertificate: &ClientCertificate{CertificatePEM: certPEM, KeyPEM: keyPEM}, Bearer: "t"},
	}
	for i, c := range valid {
		require.NoError(t, c.Validate(), "valid config %d", i)
	}
	var nilConfig *Config
	require.NoError(t, nilConfig.Validate())

	tooMany := map[string]string{}
	for i := range MaxHeaders + 1 {
		tooMany[fmt.Sprintf("X-H%d", i)] = "v"
	}
	invalid := []struct {
		name string
		c    Config
		want string
	}{
		{"two schemes", Config{Basic: &Basic{Username: "u"}, Bearer: "t"}, "at most one of basic, bearer and oauth2"},
		{"three schemes", Config{Basic: &Basic{Username: "u"}, Bearer: "t", OAuth2: oauth(nil)}, "at most one of"},
		{"empty name", Config{Headers: map[string]string{"": "v"}}, "headers: a header name is empty"},
		{"bad name", Config{Headers: map[string]string{"X Key": "v"}}, `"X Key" is not a valid header name`},
		{"name with colon", Config{Headers: map[string]string{"X-Key:": "v"}}, "not a valid header name"},
		{"hop-by-hop", Config{Headers: map[string]string{"connection": "close"}}, `"connection" cannot be set: it describes the connection`},
		{"transfer-encoding", Config{Headers: map[string]string{"Transfer-Encoding": "chunked"}}, "cannot be set"},
		{"host", Config{Headers: map[string]string{"Host": "evil"}}, `"Host" cannot be set: the relay sets it`},
		{"content-length", Config{Headers: map[string]string{"Content-Length": "1"}}, "cannot be set"},
		{"adal header", Config{Headers: map[string]string{"x-adal-attempt": "1"}}, "X-Adal- headers are the relay's own"},
		{"signature header", Config{Headers: map[string]string{"Webhook-Signature": "v1,x"}}, "the relay's signature"},
		{"authorization with bearer", Config{Bearer: "t", Headers: map[string]string{"authorization": "x"}}, `"authorization" cannot be set together with basic, bearer or oauth2`},
		{"authorization with oauth2", Config{OAuth2: oauth(nil), Headers: map[string]string{"Authorization": "x"}}, "cannot be set together"},
		{"same name twice", Config{Headers: map[string]string{"X-Key": "a", "x-key": "b"}}, "are the same header"},
		{"line break", Config{Headers: map[string]string{"X-Key": secret + "\r\nX-Evil: 1"}}, `the value of "X-Key" contains a control character`},
		{"long value", Config{Headers: map[string]string{"X-Key": strings.Repeat("a", MaxHeaderValue+1)}}, "longer than"},
		{"too many", Config{Headers: tooMany}, "at most 32 custom headers"},
		{"empty basic", Config{Basic: &Basic{}}, "basic: set a username, a password or both"},
		{"colon in username", Config{Basic: &Basic{Username: "a:b", Password: secret}}, "basic.username cannot contain a colon"},
		{"control in password", Config{Basic: &Basic{Username: "a", Password: secret + "\n"}}, "basic.password contains a control character"},
		{"bearer prefix", Config{Bearer: "Bearer " + secret}, `without the "Bearer " prefix`},
		{"bearer space", Config{Bearer: secret + " x"}, "without spaces"},
		{"bearer long", Config{Bearer: strings.Repeat("a", MaxBearerLength+1)}, "bearer must be at most"},
		{"no token URL", Config{OAuth2: oauth(func(o *OAuth2) { o.TokenURL = "" })}, "oauth2.tokenURL is required"},
		{"relative token URL", Config{OAuth2: oauth(func(o *OAuth2) { o.TokenURL = "/token" })}, "oauth2.tokenURL must be an absolute http:// or https:// URL"},
		{"ftp token URL", Config{OAuth2: oauth(func(o *OAuth2) { o.TokenURL = "ftp://auth.example.com/" })}, "absolute http:// or https://"},
		{"no host", Config{OAuth2: oauth(func(o *OAuth2) { o.TokenURL = "https:///token" })}, "oauth2.tokenURL has no host"},
		{"credentials in URL", Config{OAuth2: oauth(func(o *OAuth2) { o.TokenURL = "https://u:" + secret + "@auth.example.com/" })}, "cannot carry credentials"},
		{"fragment", Config{OAuth2: oauth(func(o *OAuth2) { o.TokenURL = "https://auth.example.com/#x" })}, "fragment"},
		{"unparsable URL", Config{OAuth2: oauth(func(o *OAuth2) { o.TokenURL = "https://auth example.com/" })}, "oauth2.tokenURL is not a valid URL"},
		{"no client ID", Config{OAuth2: oauth(func(o *OAuth2) { o.ClientID = "" })}, "oauth2.clientID is required"},
		{"no client secret", Config{OAuth2: oauth(func(o *OAuth2) { o.ClientSecret = "" })}, "oauth2.clientSecret is required"},
		{"scope with space", Config{OAuth2: oauth(func(o *OAuth2) { o.Scopes = []string{"a b"} })}, `"a b" is not a valid scope`},
		{"empty scope", Config{OAuth2: oauth(func(o *OAuth2) { o.Scopes = []string{""} })}, "a scope is empty"},
		{"no key", Config{ClientCertificate: &ClientCertificate{CertificatePEM: certPEM}}, "clientCertificate.keyPEM is required"},
		{"no certificate", Config{ClientCertificate: &ClientCertificate{KeyPEM: keyPEM}}, "clientCertificate.certificatePEM is required"},
		{"mismatched key", Config{ClientCertificate: &ClientCertificate{CertificatePEM: certPEM, KeyPEM: otherKey}}, "clientCertificate: private key does not match public key"},
		{"garbage certificate", Config{ClientCertificate: &ClientCertificate{CertificatePEM: "not PEM", KeyPEM: keyPEM}}, "clientCertificate: "},
		{"key as certificate", Config{ClientCertificate: &ClientCertificate{CertificatePEM: keyPEM, KeyPEM: keyPEM}}, "clientCertificate: "},
		{"huge certificate", Config{ClientCertificate: &ClientCertificate{CertificatePEM: strings.Repeat("a", MaxCertificatePEM+1), KeyPEM: keyPEM}}, "at most"},
	}
	for _, tt := range invalid {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.c.Validate()
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
			require.NotContains(t, err.Error(), secret, "a message never quotes a secret")
			require.NotContains(t, err.Error(), "PRIVATE KEY")
		})
	}
}

func TestSummaryHidesSecrets(t *testing.T) {
	t.Parallel()
	certPEM, keyPEM := testCertificate(t, "client-a")
	c := &Config{
		Headers:           map[string]string{"X-Key": secret, "X-Other": secret},
		OAuth2:            &OAuth2{TokenURL: "https://auth.example.com/token", ClientID: "relay", ClientSecret: secret, Scopes: []string{"a", "b"}, Audience: "api"},
		ClientCertificate: &ClientCertificate{CertificatePEM: certPEM, KeyPEM: keyPEM},
	}
	s := c.Summary()
	js, err := json.Marshal(s)
	require.NoError(t, err)
	require.NotContains(t, string(js), secret)
	require.NotContains(t, string(js), "PRIVATE KEY")
	require.Equal(t, []string{"X-Key", "X-Other"}, s.HeaderNames)
	require.Equal(t, &OAuth2Summary{TokenURL: "https://auth.example.com/token", ClientID: "relay", Scopes: []string{"a", "b"}, Audience: "api"}, s.OAuth2)
	require.Equal(t, "CN=client-a", s.ClientCertificate.Subject)
	require.WithinDuration(t, time.Now().Add(time.Hour), s.ClientCertificate.NotAfter, time.Minute)
	require.Len(t, s.ClientCertificate.SHA256, 64)
	require.False(t, s.HasBearer)
	require.Nil(t, s.Basic)

	s = (&Config{Basic: &Basic{Username: "u", Password: secret}}).Summary()
	require.Equal(t, &BasicSummary{Username: "u"}, s.Basic)
	require.True(t, (&Config{Bearer: secret}).Summary().HasBearer)
	require.Equal(t, "clientCertificate.certificatePEM holds no PEM certificate",
		(&Config{ClientCertificate: &ClientCertificate{CertificatePEM: "x"}}).Summary().ClientCertificate.Err)
	require.True(t, (*Config)(nil).Empty())
	require.True(t, (&Config{}).Empty())
	require.False(t, c.Empty())
}

func TestApply(t *testing.T) {
	t.Parallel()
	h := http.Header{"X-Key": {"from sender"}, "x-key": {"odd spelling"}, "Authorization": {"Bearer sender"}}
	(&Config{Headers: map[string]string{"x-key": "ours"}, Basic: &Basic{Username: "relay", Password: "p:w"}}).Apply(h, "")
	require.Equal(t, http.Header{"X-Key": {"ours"}, "Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("relay:p:w"))}}, h)

	h = http.Header{}
	(&Config{Bearer: "tok"}).Apply(h, "ignored")
	require.Equal(t, "Bearer tok", h.Get("Authorization"))
	h = http.Header{}
	(&Config{OAuth2: &OAuth2{}}).Apply(h, "fetched")
	require.Equal(t, "Bearer fetched", h.Get("Authorization"))
	h = http.Header{"Authorization": {"kept"}}
	(*Config)(nil).Apply(h, "")
	(&Config{Headers: map[string]string{"X-A": "1"}}).Apply(h, "")
	require.Equal(t, "kept", h.Get("Authorization"))
}

// tokenServer is a local OAuth2 token endpoint. answer decides each answer from the request's number (from
// 1) and its form; the default hands out tok-N valid for an hour.
type tokenServer struct {
	*httptest.Server
	requests atomic.Int32
	mu       sync.Mutex
	forms    []url.Values
	auths    []string
}

func newTokenServer(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) *tokenServer {
	t.Helper()
	ts := &tokenServer{}
	if answer == nil {
		answer = func(n int, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"access_token":"tok-%d","token_type":"Bearer","expires_in":3600}`, n)
		}
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		ts.mu.Lock()
		ts.forms = append(ts.forms, r.PostForm)
		ts.auths = append(ts.auths, r.Header.Get("Authorization"))
		ts.mu.Unlock()
		answer(int(ts.requests.Add(1)), w, r)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	t.Cleanup(srv.Close)
	ts.Server = srv
	return ts
}

func (ts *tokenServer) grant() *OAuth2 {
	return &OAuth2{TokenURL: ts.URL + "/oauth/token", ClientID: "relay id", ClientSecret: secret, Scopes: []string{"a", "b"}, Audience: "https://api"}
}

// loopbackClient is a client through the egress guard, open to loopback for the local servers.
func loopbackClient(t *testing.T) *http.Client {
	tr := egress.NewTransport(egress.Policy{AllowPrivate: true}, 0)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func TestTokenFetchedOnceAndSentAsTheRFCAsks(t *testing.T) {
	t.Parallel()
	ts := newTokenServer(t, nil)
	tokens, client := NewTokens(nil), loopbackClient(t)
	for range 5 {
		tok, err := tokens.Token(t.Context(), client, ts.grant())
		require.NoError(t, err)
		require.Equal(t, "tok-1", tok)
	}
	require.EqualValues(t, 1, ts.requests.Load())
	require.Equal(t, url.Values{"grant_type": {"client_credentials"}, "scope": {"a b"}, "audience": {"https://api"}}, ts.forms[0])
	require.Equal(t, "Basic "+base64.StdEncoding.EncodeToString([]byte("relay+id:"+secret)), ts.auths[0])

	// Another grant on the same endpoint has its own token.
	other := ts.grant()
	other.Scopes = []string{"a"}
	tok, err := tokens.Token(t.Context(), client, other)
	require.NoError(t, err)
	require.Equal(t, "tok-2", tok)
}

func TestTokenRefreshedBeforeExpiry(t *testing.T) {
	t.Parallel()
	lifetimes := []string{`"expires_in":120`, ``, `"expires_in":"30"`}
	ts := newTokenServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		fields := fmt.Sprintf(`"access_token":"tok-%d"`, n)
		if l := lifetimes[(n-1)%len(lifetimes)]; l != "" {
			fields += "," + l
		}
		fmt.Fprintf(w, "{%s}", fields)
	})
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	tokens, client := NewTokens(clock), loopbackClient(t)
	token := func() string {
		tok, err := tokens.Token(t.Context(), client, ts.grant())
		require.NoError(t, err)
		return tok
	}

	require.Equal(t, "tok-1", token()) // expires in two minutes: refreshed a minute before
	advance(59 * time.Second)
	require.Equal(t, "tok-1", token())
	advance(time.Second)
	require.Equal(t, "tok-2", token()) // no expiry: kept for DefaultTokenLifetime
	advance(DefaultTokenLifetime - time.Second)
	require.Equal(t, "tok-2", token())
	advance(time.Second)
	require.Equal(t, "tok-3", token()) // thirty seconds, as a string: refreshed after half of it
	advance(14 * time.Second)
	require.Equal(t, "tok-3", token())
	advance(time.Second)
	require.Equal(t, "tok-4", token())
	require.EqualValues(t, 4, ts.requests.Load())
}

func TestTokenInvalidate(t *testing.T) {
	t.Parallel()
	ts := newTokenServer(t, nil)
	tokens, client := NewTokens(nil), loopbackClient(t)
	tok, err := tokens.Token(t.Context(), client, ts.grant())
	require.NoError(t, err)
	tokens.Invalidate(ts.grant(), "an older token")
	again, err := tokens.Token(t.Context(), client, ts.grant())
	require.NoError(t, err)
	require.Equal(t, tok, again, "invalidating another token keeps the cached one")
	tokens.Invalidate(ts.grant(), tok)
	again, err = tokens.Token(t.Context(), client, ts.grant())
	require.NoError(t, err)
	require.Equal(t, "tok-2", again)
}

func TestConcurrentTokenRequestsShareOneFetch(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	ts := newTokenServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		<-release
		fmt.Fprintf(w, `{"access_token":"tok-%d","expires_in":3600}`, n)
	})
	tokens, client := NewTokens(nil), loopbackClient(t)
	const callers = 20
	var wg sync.WaitGroup
	got := make(chan string, callers)
	for range callers {
		wg.Go(func() {
			tok, err := tokens.Token(t.Context(), client, ts.grant())
			if err != nil {
				tok = err.Error()
			}
			got <- tok
		})
	}
	// Wait until every caller waits on the one fetch, then let it finish.
	require.Eventually(t, func() bool {
		tokens.mu.Lock()
		defer tokens.mu.Unlock()
		f := tokens.fetching[keyOf(ts.grant())]
		return f != nil && f.waiters == callers
	}, 5*time.Second, time.Millisecond)
	close(release)
	wg.Wait()
	close(got)
	for tok := range got {
		require.Equal(t, "tok-1", tok)
	}
	require.EqualValues(t, 1, ts.requests.Load())
}

func TestTokenWaitEndsWithTheCallersContext(t *testing.T) {
	t.Parallel()
	cancelled := make(chan struct{})
	ts := newTokenServer(t, func(_ int, _ http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		close(cancelled)
	})
	tokens := NewTokens(nil)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := tokens.Token(ctx, loopbackClient(t), ts.grant())
	require.Less(t, time.Since(start), 2*time.Second)
	var te *TokenError
	require.ErrorAs(t, err, &te)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, "OAuth2 token endpoint at "+ts.Listener.Addr().String()+" did not answer in time", err.Error())
	select {
	case <-cancelled: // no caller waits any more: the fetch was abandoned
	case <-time.After(5 * time.Second):
		t.Fatal("the token request went on after its last caller gave up")
	}
}

func TestTokenEndpointFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		contentType string
		status      int
		body        string
		want        string
	}{
		{"invalid client", "application/json", 401, `{"error":"invalid_client","error_description":"client secret ` + secret + ` is wrong"}`,
			"answered 401: invalid_client (client secret [redacted] is wrong)"},
		{"no JSON", "text/html", 503, `<html>down</html>`, "answered 503 Service Unavailable"},
		{"redirect", "", 302, ``, "answered 302 Found (redirects are not followed)"},
		{"error in a 200", "application/json", 200, `{"error":"unauthorized_client"}`, "answered 200: unauthorized_client"},
		{"no token", "application/json", 200, `{"token_type":"bearer"}`, "answered 200 without an access_token"},
		{"not JSON", "application/json", 200, `tok`, "answered 200 with a body that is not a token response: not a JSON object"},
		{"other type", "application/json", 200, `{"access_token":"t","token_type":"mac"}`, `answered 200 with a token of type "mac"; only bearer tokens are supported`},
		{"unsafe token", "application/json", 200, `{"access_token":"t\nX-Evil: 1"}`, "answered 200 with an access_token that cannot be sent in a header"},
		{"bad expiry", "application/json", 200, `{"access_token":"t","expires_in":"soon"}`, `answered 200 with an unreadable expires_in: "soon" is not a number of seconds`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ts := newTokenServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				if tt.contentType != "" {
					w.Header().Set("Content-Type", tt.contentType)
				}
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			})
			_, err := NewTokens(nil).Token(t.Context(), loopbackClient(t), ts.grant())
			require.Error(t, err)
			require.Equal(t, "OAuth2 token endpoint at "+ts.Listener.Addr().String()+" "+tt.want, err.Error())
			require.NotContains(t, err.Error(), secret)
		})
	}
}

func TestTokenFormAnswer(t *testing.T) {
	t.Parallel()
	ts := newTokenServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-www-form-urlencoded")
		_, _ = io.WriteString(w, "access_token=form-tok&token_type=bearer&expires_in=3600")
	})
	tok, err := NewTokens(nil).Token(t.Context(), loopbackClient(t), ts.grant())
	require.NoError(t, err)
	require.Equal(t, "form-tok", tok)
}

// TestTokenCredentialsInForm: an endpoint that only reads the client's credentials from the form gets them
// there after refusing the header, and from then on at once.
func TestTokenCredentialsInForm(t *testing.T) {
	t.Parallel()
	ts := newTokenServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if r.PostForm.Get("client_id") != "relay id" || r.PostForm.Get("client_secret") != secret {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":"invalid_request"}`)
			return
		}
		fmt.Fprintf(w, `{"access_token":"tok-%d","expires_in":3600}`, n)
	})
	tokens, client := NewTokens(nil), loopbackClient(t)
	tok, err := tokens.Token(t.Context(), client, ts.grant())
	require.NoError(t, err)
	require.Equal(t, "tok-2", tok)
	tokens.Invalidate(ts.grant(), tok)
	tok, err = tokens.Token(t.Context(), client, ts.grant())
	require.NoError(t, err)
	require.Equal(t, "tok-3", tok)
	require.EqualValues(t, 3, ts.requests.Load())
	require.Empty(t, ts.auths[1])
	require.Empty(t, ts.auths[2])
}

func TestTokenEndpointBehindTheEgressGuard(t *testing.T) {
	t.Parallel()
	ts := newTokenServer(t, nil)
	tr := egress.NewTransport(egress.Policy{}, 0)
	t.Cleanup(tr.CloseIdleConnections)
	_, err := NewTokens(nil).Token(t.Context(), &http.Client{Transport: tr}, ts.grant())
	require.ErrorIs(t, err, egress.ErrForbiddenTarget)
	require.Contains(t, err.Error(), "OAuth2 token endpoint at "+ts.Listener.Addr().String()+" could not be reached: ")
	require.Contains(t, err.Error(), "target address 127.0.0.1 is not allowed (loopback)")
	require.Zero(t, ts.requests.Load())
}
