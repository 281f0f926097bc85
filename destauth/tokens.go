package destauth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/adal-relay/adal/webhook"
)

// Token cache bounds. A token without expires_in is kept for a while rather than fetched for every attempt;
// one with a far expiry is still fetched anew now and then, so that a revoked grant shows up. A token is
// refreshed a little before it expires, because it is used on a request that takes a while to arrive.
const (
	DefaultTokenLifetime = 5 * time.Minute
	MaxTokenLifetime     = 24 * time.Hour
	expiryMargin         = time.Minute
	// MaxFetch bounds one token request even if every attempt waiting for it has a later deadline.
	MaxFetch = time.Minute
	// maxTokenResponse bounds what is read of a token endpoint's answer.
	maxTokenResponse = 1 << 20
	// maxCached bounds the tokens kept: configurations that changed leave theirs behind.
	maxCached = 4096
	// maxQuoted bounds how much of an endpoint's error text a message quotes.
	maxQuoted = 200
)

type tokenKey [sha256.Size]byte

// keyOf identifies a grant: a token obtained for one set of parameters is not reused for another.
func keyOf(o *OAuth2) tokenKey {
	fields := []string{o.TokenURL, o.ClientID, o.ClientSecret, o.Audience}
	return tokenKey(hashFields(append(fields, o.Scopes...)...))
}

// Tokens fetches OAuth2 client-credentials tokens and keeps them until shortly before they expire. One is
// meant to serve the whole process, so that every attempt to a recipient shares its token. Concurrent
// requests for a token that is not cached share one fetch. It is safe for concurrent use.
type Tokens struct {
	now func() time.Time

	mu       sync.Mutex
	cached   map[tokenKey]cachedToken
	fetching map[tokenKey]*fetch
	// inBody remembers the endpoints that refused the client's credentials in the Authorization header but
	// took them in the form, so that they are not asked the wrong way each time.
	inBody map[tokenKey]bool
}

type cachedToken struct {
	token     string
	refreshAt time.Time
}

// fetch is one token request, shared by the callers waiting for it. It runs detached from any one of them
// and is cancelled when the last one stops waiting, so it never outlives every attempt that wants it.
type fetch struct {
	done    chan struct{}
	cancel  context.CancelFunc
	waiters int
	token   string
	err     error
}

// NewTokens returns an empty cache; now tells when a token expires (nil: time.Now).
func NewTokens(now func() time.Time) *Tokens {
	if now == nil {
		now = time.Now
	}
	return &Tokens{
		now:      now,
		cached:   map[tokenKey]cachedToken{},
		fetching: map[tokenKey]*fetch{},
		inBody:   map[tokenKey]bool{},
	}
}

// TokenError is a failure to obtain a token. Its message names the endpoint by host only (its URL's query
// might carry secrets) and never quotes the client secret.
type TokenError struct {
	// Host is the token endpoint's host[:port].
	Host string
	// Status is the endpoint's HTTP status, 0 when it did not answer.
	Status int
	// Err is why no answer came: the transport's error or the context's.
	Err error
	msg string
}

func (e *TokenError) Error() string { return e.msg }
func (e *TokenError) Unwrap() error { return e.Err }

// Token returns a token for o, from the cache or fetched with client, which must be the guarded client the
// deliveries use. It waits for the token no longer than ctx allows.
func (t *Tokens) Token(ctx context.Context, client *http.Client, o *OAuth2) (string, error) {
	k := keyOf(o)
	t.mu.Lock()
	if c, ok := t.cached[k]; ok && t.now().Before(c.refreshAt) {
		t.mu.Unlock()
		return c.token, nil
	}
	f := t.fetching[k]
	if f == nil {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), MaxFetch)
		f = &fetch{done: make(chan struct{}), cancel: cancel}
		t.fetching[k] = f
		grant := *o
		grant.Scopes = append([]string(nil), o.Scopes...)
		go t.run(fctx, k, f, client, &grant)
	}
	f.waiters++
	t.mu.Unlock()

	select {
	case <-f.done:
		return f.token, f.err
	case <-ctx.Done():
		t.mu.Lock()
		f.waiters--
		if f.waiters == 0 {
			f.cancel()
			if t.fetching[k] == f {
				delete(t.fetching, k) // a caller coming next starts afresh rather than join a cancelled fetch
			}
		}
		t.mu.Unlock()
		host := hostOf(o.TokenURL)
		return "", &TokenError{Host: host, Err: ctx.Err(), msg: fmt.Sprintf("OAuth2 token endpoint at %s did not answer in time", host)}
	}
}

// Invalidate drops token from the cache, when a receiver refused it: the next Token fetches a new one. A
// token other than the one cached is left alone, so that concurrent refusals of an old token do not throw
// away the fresh one.
func (t *Tokens) Invalidate(o *OAuth2, token string) {
	k := keyOf(o)
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.cached[k]; ok && c.token == token {
		delete(t.cached, k)
	}
}

func (t *Tokens) run(ctx context.Context, k tokenKey, f *fetch, client *http.Client, o *OAuth2) {
	defer f.cancel()
	t.mu.Lock()
	inBody := t.inBody[k]
	t.mu.Unlock()

	obtained := t.now()
	token, lifetime, err := request(ctx, client, o, inBody)
	if err != nil && !inBody && retryInBody(err) {
		// RFC 6749 asks servers to take the credentials in the header, yet some only read them from the form.
		if token2, lifetime2, err2 := request(ctx, client, o, true); err2 == nil {
			token, lifetime, err, inBody = token2, lifetime2, nil, true
			t.mu.Lock()
			if len(t.inBody) >= maxCached {
				clear(t.inBody)
			}
			t.inBody[k] = true
			t.mu.Unlock()
		}
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fetching[k] == f {
		delete(t.fetching, k)
	}
	if err == nil {
		t.store(k, cachedToken{token: token, refreshAt: obtained.Add(keepFor(lifetime))})
	}
	f.token, f.err = token, err
	close(f.done)
}

// keepFor is how long a token that lives lifetime (0: unknown) is used before a new one is fetched.
func keepFor(lifetime time.Duration) time.Duration {
	switch {
	case lifetime <= 0:
		return DefaultTokenLifetime
	case lifetime > MaxTokenLifetime:
		return MaxTokenLifetime
	}
	return lifetime - min(expiryMargin, lifetime/2)
}

func (t *Tokens) store(k tokenKey, c cachedToken) {
	if len(t.cached) >= maxCached {
		now := t.now()
		for key, old := range t.cached {
			if !now.Before(old.refreshAt) {
				delete(t.cached, key)
			}
		}
		for key := range t.cached {
			if len(t.cached) < maxCached {
				break
			}
			delete(t.cached, key)
		}
	}
	t.cached[k] = c
}

// retryInBody tells whether a refusal may be the endpoint's not reading credentials from the header.
func retryInBody(err error) bool {
	var te *TokenError
	return errors.As(err, &te) && (te.Status == http.StatusBadRequest || te.Status == http.StatusUnauthorized)
}

// tokenResponse is a token endpoint's answer (RFC 6749 §5.1 and §5.2).
type tokenResponse struct {
	AccessToken      string          `json:"access_token"`
	TokenType        string          `json:"token_type"`
	ExpiresIn        json.RawMessage `json:"expires_in"`
	Error            string          `json:"error"`
	ErrorDescription string          `json:"error_description"`
}

// request makes one token request; inBody sends the client's credentials in the form rather than in the
// Authorization header.
func request(ctx context.Context, client *http.Client, o *OAuth2, inBody bool) (string, time.Duration, error) {
	host := hostOf(o.TokenURL)
	form := url.Values{"grant_type": {"client_credentials"}}
	if len(o.Scopes) > 0 {
		form.Set("scope", strings.Join(o.Scopes, " "))
	}
	if o.Audience != "" {
		form.Set("audience", o.Audience)
	}
	if inBody {
		form.Set("client_id", o.ClientID)
		form.Set("client_secret", o.ClientSecret)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", 0, &TokenError{Host: host, msg: "OAuth2 tokenURL is not usable: " + innermost(err)}
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", webhook.UserAgent)
	if !inBody {
		// RFC 6749 §2.3.1: both are form-encoded before they are joined and base64-encoded.
		cred := url.QueryEscape(o.ClientID) + ":" + url.QueryEscape(o.ClientSecret)
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(cred)))
	}

	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return "", 0, &TokenError{Host: host, Err: err, msg: fmt.Sprintf("OAuth2 token endpoint at %s did not answer within %s", host, MaxFetch)}
		}
		return "", 0, &TokenError{Host: host, Err: err, msg: fmt.Sprintf("OAuth2 token endpoint at %s could not be reached: %s", host, innermost(err))}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponse+1))
	if err != nil {
		return "", 0, &TokenError{Host: host, Status: resp.StatusCode, Err: err,
			msg: fmt.Sprintf("OAuth2 token endpoint at %s answered %d but its body could not be read: %s", host, resp.StatusCode, innermost(err))}
	}
	if len(body) > maxTokenResponse {
		return "", 0, &TokenError{Host: host, Status: resp.StatusCode,
			msg: fmt.Sprintf("OAuth2 token endpoint at %s answered %d with more than %d bytes", host, resp.StatusCode, maxTokenResponse)}
	}
	tr, parseErr := parseTokenResponse(resp.Header.Get("Content-Type"), body)
	answered := fmt.Sprintf("OAuth2 token endpoint at %s answered %d", host, resp.StatusCode)
	fail := func(detail string) (string, time.Duration, error) {
		return "", 0, &TokenError{Host: host, Status: resp.StatusCode, msg: answered + detail}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 || tr.Error != "" {
		if tr.Error == "" {
			detail := ""
			if text := http.StatusText(resp.StatusCode); text != "" {
				detail = " " + text
			}
			if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
				detail += " (redirects are not followed)"
			}
			return fail(detail)
		}
		detail := ": " + quote(tr.Error, o.ClientSecret)
		if tr.ErrorDescription != "" {
			detail += " (" + quote(tr.ErrorDescription, o.ClientSecret) + ")"
		}
		return fail(detail)
	}
	switch {
	case parseErr != nil:
		return fail(" with a body that is not a token response: " + parseErr.Error())
	case tr.AccessToken == "":
		return fail(" without an access_token")
	case !headerSafe(tr.AccessToken):
		return fail(" with an access_token that cannot be sent in a header")
	case tr.TokenType != "" && !strings.EqualFold(tr.TokenType, "bearer"):
		return fail(fmt.Sprintf(" with a token of type %q; only bearer tokens are supported", quote(tr.TokenType, "")))
	}
	lifetime, err := parseExpiresIn(tr.ExpiresIn)
	if err != nil {
		return fail(" with an unreadable expires_in: " + err.Error())
	}
	return tr.AccessToken, lifetime, nil
}

// parseTokenResponse reads JSON, as RFC 6749 has it, or a form, as some older endpoints answer.
func parseTokenResponse(contentType string, body []byte) (tokenResponse, error) {
	var tr tokenResponse
	mt, _, _ := mime.ParseMediaType(contentType)
	// Some endpoints label JSON text/plain, so what looks like JSON is read as JSON whatever the label.
	looksJSON := strings.HasPrefix(strings.TrimSpace(string(body)), "{")
	if !looksJSON && (mt == "application/x-www-form-urlencoded" || mt == "text/plain") {
		v, err := url.ParseQuery(string(body))
		if err != nil {
			return tr, errors.New("an unreadable form")
		}
		tr.AccessToken, tr.TokenType = v.Get("access_token"), v.Get("token_type")
		tr.Error, tr.ErrorDescription = v.Get("error"), v.Get("error_description")
		if e := v.Get("expires_in"); e != "" {
			tr.ExpiresIn = json.RawMessage(strconv.Quote(e))
		}
		return tr, nil
	}
	if err := json.Unmarshal(body, &tr); err != nil {
		return tokenResponse{}, errors.New("not a JSON object")
	}
	return tr, nil
}

// parseExpiresIn reads expires_in, a number of seconds that some endpoints send as a string.
func parseExpiresIn(raw json.RawMessage) (time.Duration, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	s := string(raw)
	if unq, err := strconv.Unquote(s); err == nil {
		s = unq
	}
	if s == "" {
		return 0, nil
	}
	secs, err := strconv.ParseFloat(s, 64)
	if err != nil || !(secs >= 0) {
		return 0, fmt.Errorf("%q is not a number of seconds", quote(s, ""))
	}
	if secs > MaxTokenLifetime.Seconds() {
		return MaxTokenLifetime, nil
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// quote makes an endpoint's text fit for a message: printable, bounded, and without the secret, should the
// endpoint echo it.
func quote(s, secret string) string {
	if secret != "" {
		s = strings.ReplaceAll(s, secret, "[redacted]")
	}
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f || r == '\uFFFD' {
			return -1
		}
		return r
	}, s)
	if r := []rune(s); len(r) > maxQuoted {
		s = string(r[:maxQuoted]) + "…"
	}
	return s
}

func headerSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// hostOf is the host[:port] of a URL, which messages name rather than the URL.
func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Host
	}
	return "(invalid URL)"
}

// innermost strips the url.Error wrapper, which quotes the whole URL.
func innermost(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}
