package inbound_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"hash"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/rejection"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/verify"
	"github.com/adal-relay/adal/viewer"
)

// recipient is a real HTTP endpoint that records the requests delivered to it and answers with status.
type recipient struct {
	*httptest.Server
	status func(n int) int

	mu    sync.Mutex
	calls []http.Header
}

func newRecipient(t *testing.T, status func(n int) int) *recipient {
	t.Helper()
	rc := &recipient{status: status}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		rc.mu.Lock()
		rc.calls = append(rc.calls, r.Header.Clone())
		n := len(rc.calls)
		rc.mu.Unlock()
		w.WriteHeader(rc.status(n))
	}))
	t.Cleanup(rc.Close)
	return rc
}

func ok200(int) int { return http.StatusOK }

// received waits for n calls and returns them.
func (rc *recipient) received(t *testing.T, n int) []http.Header {
	t.Helper()
	relaytest.Eventually(t, 15*time.Second, strconv.Itoa(n)+" deliveries", func() bool {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		return len(rc.calls) >= n
	})
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]http.Header(nil), rc.calls...)
}

// signed is a request as a sender of some scheme writes it.
type signed struct {
	header http.Header
	query  string
}

// scheme is how a sender signs a body with a secret at a time, written here apart from package verify.
type scheme struct {
	kind     string
	settings map[string]any
	secrets  [2]string
	sign     func(secret string, body []byte, at time.Time) signed
	stale    bool // timestamped: a signature an hour old is stale
}

func hmacOf(newHash func() hash.Hash, secret string, parts ...string) []byte {
	m := hmac.New(newHash, []byte(secret))
	for _, p := range parts {
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

func headerOf(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func unixStr(at time.Time) string { return strconv.FormatInt(at.Unix(), 10) }

var schemes = []scheme{
	{kind: "HMAC", secrets: [2]string{"hmac-one", "hmac-two"},
		settings: map[string]any{"header": "X-Signature", "algorithm": "SHA512", "encoding": "BASE64", "prefix": "sha512="},
		sign: func(secret string, body []byte, _ time.Time) signed {
			return signed{header: headerOf("X-Signature", "sha512="+base64.StdEncoding.EncodeToString(hmacOf(sha512.New, secret, string(body))))}
		}},
	{kind: "GITHUB", secrets: [2]string{"gh-one", "gh-two"},
		sign: func(secret string, body []byte, _ time.Time) signed {
			return signed{header: headerOf("X-Hub-Signature-256", "sha256="+hex.EncodeToString(hmacOf(sha256.New, secret, string(body))))}
		}},
	{kind: "STRIPE", secrets: [2]string{"whsec_stripe_one", "whsec_stripe_two"}, stale: true,
		sign: func(secret string, body []byte, at time.Time) signed {
			ts := unixStr(at)
			return signed{header: headerOf("Stripe-Signature", "t="+ts+",v1="+hex.EncodeToString(hmacOf(sha256.New, secret, ts, ".", string(body))))}
		}},
	{kind: "SHOPIFY", secrets: [2]string{"shop-one", "shop-two"},
		sign: func(secret string, body []byte, _ time.Time) signed {
			return signed{header: headerOf("X-Shopify-Hmac-Sha256", base64.StdEncoding.EncodeToString(hmacOf(sha256.New, secret, string(body))))}
		}},
	{kind: "SLACK", secrets: [2]string{"slack-one", "slack-two"}, stale: true,
		sign: func(secret string, body []byte, at time.Time) signed {
			ts := unixStr(at)
			return signed{header: headerOf("X-Slack-Request-Timestamp", ts,
				"X-Slack-Signature", "v0="+hex.EncodeToString(hmacOf(sha256.New, secret, "v0:", ts, ":", string(body))))}
		}},
	{kind: "STANDARD_WEBHOOKS", stale: true,
		secrets: [2]string{"whsec_" + base64.StdEncoding.EncodeToString([]byte("standard-key-one-24bytes")),
			"whsec_" + base64.StdEncoding.EncodeToString([]byte("standard-key-two-24bytes"))},
		sign: func(secret string, body []byte, at time.Time) signed {
			key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
			id, ts := "msg_"+strconv.FormatInt(at.UnixNano(), 36), unixStr(at)
			sig := base64.StdEncoding.EncodeToString(hmacOf(sha256.New, string(key), id, ".", ts, ".", string(body)))
			return signed{header: headerOf("webhook-id", id, "webhook-timestamp", ts, "webhook-signature", "v1,"+sig)}
		}},
	{kind: "BASIC", secrets: [2]string{"pass-one", "pass-two"}, settings: map[string]any{"username": "sender"},
		sign: func(secret string, _ []byte, _ time.Time) signed {
			return signed{header: headerOf("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("sender:"+secret)))}
		}},
	{kind: "API_KEY", secrets: [2]string{"key-one", "key-two"}, settings: map[string]any{"header": "X-Api-Key"},
		sign: func(secret string, _ []byte, _ time.Time) signed {
			return signed{header: headerOf("X-Api-Key", secret)}
		}},
	{kind: "API_KEY", secrets: [2]string{"qkey-one", "qkey-two"}, settings: map[string]any{"queryParameter": "token"},
		sign: func(secret string, _ []byte, _ time.Time) signed {
			return signed{query: "token=" + url.QueryEscape(secret)}
		}},
}

// verification is the GraphQL input for s with its two secrets.
func (s scheme) verification(extra map[string]any) map[string]any {
	in := map[string]any{"kind": s.kind, "secrets": []string{s.secrets[0], s.secrets[1]}}
	for k, v := range s.settings {
		in[k] = v
	}
	for k, v := range extra {
		in[k] = v
	}
	return in
}

// deliver posts body with the request sr to key and returns the status and the answer's body.
func deliver(t *testing.T, env *relaytest.Env, method, key string, sr signed, body []byte) (int, string) {
	t.Helper()
	target := env.Server.URL + "/in/" + key + "/hooks"
	if sr.query != "" {
		target += "?" + sr.query
	}
	req, err := http.NewRequest(method, target, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, vs := range sr.header {
		req.Header[k] = vs
	}
	resp, err := env.Server.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(raw)
}

// serverView is what the API shows of a server's verification and rejections.
type serverView struct {
	Verification struct {
		Kind             string
		Enforce          bool
		Headers          []string
		Header           *string
		QueryParameter   *string
		ToleranceSeconds *int
		Username         *string
		SecretCount      int
	}
	RejectedCount int
	Rejections    struct {
		TotalCount int
		Edges      []struct{ Node rejectionView }
	}
}

type rejectionView struct{ At, Method, Path, SourceAddr, Reason, Message string }

// list is the page of rejections read.
func (v serverView) list() []rejectionView {
	out := make([]rejectionView, len(v.Rejections.Edges))
	for i, e := range v.Rejections.Edges {
		out[i] = e.Node
	}
	return out
}

const serverViewQuery = `query($id: ID!, $first: Int, $last: Int){ server(id: $id){
	verification { kind enforce headers header queryParameter toleranceSeconds username secretCount }
	rejectedCount rejections(first: $first, last: $last){ totalCount edges { node { at method path sourceAddr reason message } } } } }`

func viewServer(t *testing.T, env *relaytest.Env, token, id string, first int) serverView {
	t.Helper()
	var out struct{ Server serverView }
	env.MustGraphQL(token, serverViewQuery, map[string]any{"id": id, "first": first}, &out)
	return out.Server
}

// Every scheme, enforced: a request signed with either secret is stored and delivered marked verified; a
// forged, stale or unsigned one is answered 401, stores nothing, costs nothing, and is listed as a rejection.
func TestVerifiedSenders(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	for _, s := range schemes {
		name := s.kind
		if q, ok := s.settings["queryParameter"]; ok {
			name += "_query_" + q.(string)
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rc := newRecipient(t, ok200)
			tn := env.NewTenant("v-"+strings.ToLower(name), relaytest.PlanLimits{Credits: 100})
			srv := env.NewServer(tn, "verified", map[string]any{"verification": s.verification(nil)})
			env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rc.URL})
			body := []byte(`{"event":"paid","n":1}`)
			now := time.Now()

			for i, secret := range s.secrets {
				status, answer := deliver(t, env, http.MethodPost, srv.Key, s.sign(secret, body, now), body)
				require.Equal(t, http.StatusAccepted, status, "secret %d of the rotation: %s", i+1, answer)
			}
			for _, h := range rc.received(t, 2) {
				require.Equal(t, "true", h.Get("X-Adal-Verified"))
			}

			before := stateOf(t, env, tn)
			refused := map[string]signed{
				"forged":  s.sign("not-the-secret", body, now),
				"missing": {},
			}
			wantReasons := []string{"MISMATCH", "MISSING"}
			if s.stale {
				refused["stale"] = s.sign(s.secrets[0], body, now.Add(-time.Hour))
				wantReasons = append(wantReasons, "STALE")
			}
			// In a known order, so that the rejections list can be checked newest first.
			for _, what := range []string{"forged", "missing", "stale"} {
				sr, ok := refused[what]
				if !ok {
					continue
				}
				status, answer := deliver(t, env, http.MethodPost, srv.Key, sr, body)
				require.Equal(t, http.StatusUnauthorized, status, "%s: %s", what, answer)
				require.NotContains(t, answer, s.secrets[0])
			}
			// Signed for another body: the signature schemes sign the body.
			if s.kind != "BASIC" && s.kind != "API_KEY" {
				status, _ := deliver(t, env, http.MethodPost, srv.Key, s.sign(s.secrets[0], body, now), []byte(`{"event":"paid","n":2}`))
				require.Equal(t, http.StatusUnauthorized, status, "a signature of another body")
				wantReasons = append(wantReasons, "MISMATCH")
			}
			require.Equal(t, before, stateOf(t, env, tn), "a refused request stores nothing and costs nothing")

			relaytest.Eventually(t, 10*time.Second, "the rejections counted", func() bool {
				return viewServer(t, env, tn.Owner, srv.ID, 1).RejectedCount == len(wantReasons)
			})
			// The count is written with the rows it counts: read again, the list has them all.
			view := viewServer(t, env, tn.Owner, srv.ID, 10)
			require.Equal(t, len(wantReasons), view.Rejections.TotalCount)
			require.Len(t, view.list(), len(wantReasons))
			for i, want := range wantReasons {
				r := view.list()[len(wantReasons)-1-i] // newest first
				require.Equal(t, want, r.Reason)
				require.Equal(t, http.MethodPost, r.Method)
				require.Equal(t, "/hooks", r.Path)
				require.Equal(t, "127.0.0.1", r.SourceAddr)
				require.NotEmpty(t, r.Message)
				require.NotEmpty(t, r.At)
			}
			require.Equal(t, s.kind, view.Verification.Kind)
			require.True(t, view.Verification.Enforce)
			require.Equal(t, 2, view.Verification.SecretCount)
			require.Len(t, rc.received(t, 2), 2, "nothing refused was delivered")
		})
	}
}

// Shadow mode accepts a request that fails, stores it as unverified and delivers it with X-Adal-Verified:
// false — on its retries too; a server that verifies nothing sends no X-Adal-Verified at all.
func TestShadowMode(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t, func(c *relay.Config) { c.RetryUnit = 10 * time.Millisecond })
	failOnce := func(n int) int {
		if n == 1 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	}
	rc := newRecipient(t, failOnce)
	tn := env.NewTenant("shadow", relaytest.PlanLimits{Credits: 10})
	github := schemes[1]
	srv := env.NewServer(tn, "shadow", map[string]any{"verification": github.verification(map[string]any{"enforce": false})})
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rc.URL, "retrySchedule": "STEPPED"})

	body := []byte(`{"forged":true}`)
	before := stateOf(t, env, tn)
	status, answer := deliver(t, env, http.MethodPost, srv.Key, github.sign("wrong", body, time.Now()), body)
	require.Equal(t, http.StatusAccepted, status, answer)
	var accepted struct{ RequestID string }
	require.NoError(t, json.Unmarshal([]byte(answer), &accepted))
	require.Equal(t, before.requests+1, stateOf(t, env, tn).requests)

	calls := rc.received(t, 2) // the first attempt fails, the retry succeeds
	for i, h := range calls {
		require.Equal(t, "false", h.Get("X-Adal-Verified"), "attempt %d", i+1)
	}
	var req struct{ Request struct{ Verified *bool } }
	env.MustGraphQL(tn.Owner, `query($id: ID!){ request(id: $id){ verified } }`, map[string]any{"id": accepted.RequestID}, &req)
	require.NotNil(t, req.Request.Verified)
	require.False(t, *req.Request.Verified)

	// A replay carries its original's outcome.
	env.MustGraphQL(tn.Owner, `mutation($id: ID!){ replayRequest(id: $id){ id verified } }`, map[string]any{"id": accepted.RequestID}, nil)
	require.Equal(t, "false", rc.received(t, 3)[2].Get("X-Adal-Verified"))

	view := viewServer(t, env, tn.Owner, srv.ID, 10)
	require.False(t, view.Verification.Enforce)
	require.Zero(t, view.RejectedCount, "shadow mode refuses nothing")

	plain := newRecipient(t, ok200)
	other := env.NewServer(tn, "plain", nil)
	env.NewRecipient(tn, other.ID, map[string]any{"method": "DIRECT_HTTP", "url": plain.URL})
	status, _ = deliver(t, env, http.MethodPost, other.Key, signed{}, body)
	require.Equal(t, http.StatusAccepted, status)
	_, has := plain.received(t, 1)[0]["X-Adal-Verified"]
	require.False(t, has, "no verification, no X-Adal-Verified")
}

// Only the newest rejections of a server are kept, however many come; the count holds them all.
func TestRejectionsBounded(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	tn := env.NewTenant("flood", relaytest.PlanLimits{Credits: 10})
	srv := env.NewServer(tn, "flood", map[string]any{"verification": schemes[1].verification(nil)})
	body := []byte(`{}`)
	const forgeries = 40
	for i := range forgeries {
		status, _ := deliver(t, env, http.MethodPost, srv.Key, schemes[1].sign("forger", body, time.Now()), body)
		require.Equal(t, http.StatusUnauthorized, status, "forgery %d", i)
	}
	relaytest.Eventually(t, 10*time.Second, "the forgeries counted", func() bool {
		return viewServer(t, env, tn.Owner, srv.ID, 1).RejectedCount == forgeries
	})

	// A flood beyond what is kept, recorded the way intake records each refusal.
	serverID, tenantID := relaytest.RowID(t, srv.ID), relaytest.RowID(t, tn.ID)
	const flood = 2500
	start := time.Now().UTC()
	for i := range flood {
		env.Relay.Rejections.Record(rejectionEntry(serverID, tenantID, start.Add(time.Duration(i)*time.Millisecond), "/flood/"+strconv.Itoa(i)))
	}
	relaytest.Eventually(t, 10*time.Second, "the flood counted", func() bool {
		return viewServer(t, env, tn.Owner, srv.ID, 1).RejectedCount == forgeries+flood
	})
	// The count is written with the rows it counts: read again, the list has them all.
	view := viewServer(t, env, tn.Owner, srv.ID, 10)
	require.Equal(t, 1000, view.Rejections.TotalCount, "the newest 1000 are kept")
	require.Equal(t, "/flood/"+strconv.Itoa(flood-1), view.list()[0].Path, "newest first")
	var oldest struct{ Server serverView }
	env.MustGraphQL(tn.Owner, serverViewQuery, map[string]any{"id": srv.ID, "last": 1}, &oldest)
	require.Equal(t, "/flood/"+strconv.Itoa(flood-1000), oldest.Server.list()[0].Path, "the oldest kept")
	n, err := env.DB.Client.Rejection.Query().Count(systemCtx(t))
	require.NoError(t, err)
	require.Equal(t, 1000, n, "the table holds no more than the kept")

	resp := env.GraphQL(tn.Owner, `query($id: ID!){ server(id: $id){ rejections(first: 501){ totalCount } } }`,
		map[string]any{"id": srv.ID})
	require.Equal(t, "INVALID_INPUT", resp.Code(), "pages are bounded like every list")
	other := env.NewTenant("other", relaytest.PlanLimits{Credits: 1})
	resp = env.GraphQL(other.Owner, serverViewQuery, map[string]any{"id": srv.ID, "first": 10})
	require.Contains(t, string(resp.Data), `"server":null`, "another tenant sees nothing of it")
}

// A server may answer its senders itself once a request is stored, accept only some methods (405 with Allow
// for the others, nothing stored), and a SLACK server answers Slack's url_verification without storing it.
func TestAnswersSendersExpect(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	tn := env.NewTenant("answers", relaytest.PlanLimits{Credits: 20})
	rc := newRecipient(t, ok200)

	t.Run("response", func(t *testing.T) {
		srv := env.NewServer(tn, "answering", map[string]any{
			"response": map[string]any{"status": 200, "contentType": "application/xml", "body": "<ok/>"},
		})
		env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rc.URL})
		before := stateOf(t, env, tn)
		resp, err := env.Server.Client().Post(env.Server.URL+"/in/"+srv.Key, "application/json", strings.NewReader(`{"a":1}`))
		require.NoError(t, err)
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "application/xml", resp.Header.Get("Content-Type"))
		require.Equal(t, "<ok/>", string(raw))
		require.Equal(t, before.requests+1, stateOf(t, env, tn).requests, "answered only once stored")

		var out struct {
			UpdateServer struct{ Response *struct{ Status int } }
		}
		env.MustGraphQL(tn.Owner, `mutation($id: ID!){ updateServer(id: $id, input: {clearResponse: true}){ response { status } } }`,
			map[string]any{"id": srv.ID}, &out)
		require.Nil(t, out.UpdateServer.Response)
	})

	t.Run("methods", func(t *testing.T) {
		srv := env.NewServer(tn, "post-only", map[string]any{"allowedMethods": []string{"post", "PUT"}})
		env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rc.URL})
		before := stateOf(t, env, tn)
		for _, m := range []string{http.MethodGet, http.MethodDelete, http.MethodPatch} {
			status, answer := deliver(t, env, m, srv.Key, signed{}, []byte(`{}`))
			require.Equal(t, http.StatusMethodNotAllowed, status, "%s: %s", m, answer)
		}
		req, _ := http.NewRequest(http.MethodGet, env.Server.URL+"/in/"+srv.Key, nil)
		resp, err := env.Server.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, "POST, PUT", resp.Header.Get("Allow"))
		require.Equal(t, before, stateOf(t, env, tn), "a 405 stores nothing and costs nothing")
		for _, m := range []string{http.MethodPost, http.MethodPut} {
			status, _ := deliver(t, env, m, srv.Key, signed{}, []byte(`{}`))
			require.Equal(t, http.StatusAccepted, status, m)
		}
		var out struct {
			UpdateServer struct{ AllowedMethods []string }
		}
		env.MustGraphQL(tn.Owner, `mutation($id: ID!){ updateServer(id: $id, input: {clearAllowedMethods: true}){ allowedMethods } }`,
			map[string]any{"id": srv.ID}, &out)
		require.Nil(t, out.UpdateServer.AllowedMethods)
	})

	t.Run("slack challenge", func(t *testing.T) {
		slack := schemes[4]
		srv := env.NewServer(tn, "slack", map[string]any{"verification": slack.verification(nil)})
		env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rc.URL})
		before := stateOf(t, env, tn)
		challenge := []byte(`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
		status, answer := deliver(t, env, http.MethodPost, srv.Key, slack.sign(slack.secrets[0], challenge, time.Now()), challenge)
		require.Equal(t, http.StatusOK, status, answer)
		require.JSONEq(t, `{"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}`, answer)
		status, _ = deliver(t, env, http.MethodPost, srv.Key, slack.sign("forger", challenge, time.Now()), challenge)
		require.Equal(t, http.StatusUnauthorized, status, "an unverified challenge is refused like any forgery")
		require.Equal(t, before, stateOf(t, env, tn), "a challenge is answered, not stored nor charged")
	})
}

func rejectionEntry(serverID, tenantID int, at time.Time, path string) rejection.Entry {
	return rejection.Entry{ServerID: serverID, TenantID: tenantID, At: at, Method: http.MethodPost, Path: path,
		SourceAddr: "192.0.2.1", Reason: verify.ReasonMismatch, Message: "X-Hub-Signature-256 matches no secret"}
}

func systemCtx(t *testing.T) context.Context { return viewer.SystemContext(t.Context()) }
