package verify_test

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/verify"
)

// The providers' own published examples: a verifier that accepts them reads the scheme as its senders write it.
const (
	githubSecret = "It's a Secret to Everybody"
	githubBody   = "Hello, World!"
	githubSig    = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"

	slackSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	slackTS     = "1531420618"
	slackBody   = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	slackSig    = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"

	standardSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	standardID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	standardTS     = "1614265330"
	standardBody   = `{"test": 2432232314}`
	standardSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func mac(h func() hash.Hash, secret string, msg string) []byte {
	m := hmac.New(h, []byte(secret))
	m.Write([]byte(msg))
	return m.Sum(nil)
}

func unix(s string) time.Time {
	n, _ := strconv.ParseInt(s, 10, 64)
	return time.Unix(n, 0)
}

func config(t *testing.T, in verify.Input) verify.Verifier {
	t.Helper()
	c, err := in.Apply(nil)
	require.NoError(t, err)
	v, err := verify.New(c)
	require.NoError(t, err)
	return v
}

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func ptr[T any](v T) *T { return &v }

// reasonOf is the reason a verification failed with; "" when it passed.
func reasonOf(t *testing.T, err error) verify.Reason {
	t.Helper()
	if err == nil {
		return ""
	}
	f, ok := err.(*verify.Failure)
	require.True(t, ok, "a failure is a *verify.Failure: %v", err)
	require.NotEmpty(t, f.Message)
	return f.Reason
}

type check struct {
	name string
	req  verify.Request
	want verify.Reason // "" passes
}

func run(t *testing.T, v verify.Verifier, checks []check) {
	t.Helper()
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if c.req.Header == nil {
				c.req.Header = http.Header{}
			}
			require.Equal(t, c.want, reasonOf(t, v.Verify(&c.req)))
		})
	}
}

func TestGitHub(t *testing.T) {
	t.Parallel()
	v := config(t, verify.Input{Kind: verify.KindGitHub, Secrets: []string{githubSecret}})
	forged := "sha256=" + hex.EncodeToString(mac(sha256.New, "not the secret", githubBody))
	run(t, v, []check{
		{"published example", verify.Request{Header: header("X-Hub-Signature-256", githubSig), Body: []byte(githubBody)}, ""},
		{"another body", verify.Request{Header: header("X-Hub-Signature-256", githubSig), Body: []byte(githubBody + " ")}, verify.ReasonMismatch},
		{"forged", verify.Request{Header: header("X-Hub-Signature-256", forged), Body: []byte(githubBody)}, verify.ReasonMismatch},
		{"missing", verify.Request{Body: []byte(githubBody)}, verify.ReasonMissing},
		{"no prefix", verify.Request{Header: header("X-Hub-Signature-256", githubSig[7:]), Body: []byte(githubBody)}, verify.ReasonMalformed},
		{"not hex", verify.Request{Header: header("X-Hub-Signature-256", "sha256=zz"), Body: []byte(githubBody)}, verify.ReasonMalformed},
	})
}

// Two secrets: a request signed with either passes, so a sender can move from one to the other.
func TestRotation(t *testing.T) {
	t.Parallel()
	v := config(t, verify.Input{Kind: verify.KindGitHub, Secrets: []string{"new secret", githubSecret}})
	withNew := "sha256=" + hex.EncodeToString(mac(sha256.New, "new secret", githubBody))
	third := "sha256=" + hex.EncodeToString(mac(sha256.New, "third", githubBody))
	run(t, v, []check{
		{"old secret", verify.Request{Header: header("X-Hub-Signature-256", githubSig), Body: []byte(githubBody)}, ""},
		{"new secret", verify.Request{Header: header("X-Hub-Signature-256", withNew), Body: []byte(githubBody)}, ""},
		{"neither", verify.Request{Header: header("X-Hub-Signature-256", third), Body: []byte(githubBody)}, verify.ReasonMismatch},
	})
}

func TestHMAC(t *testing.T) {
	t.Parallel()
	body := `{"id":1}`
	for _, alg := range []struct {
		name verify.Algorithm
		h    func() hash.Hash
	}{{verify.SHA1, sha1.New}, {verify.SHA256, sha256.New}, {verify.SHA512, sha512.New}} {
		t.Run(string(alg.name), func(t *testing.T) {
			t.Parallel()
			sum := mac(alg.h, "s3cret", body)
			hexV := config(t, verify.Input{Kind: verify.KindHMAC, Secrets: []string{"s3cret"}, Header: ptr("X-Signature"),
				Algorithm: ptr(alg.name), Prefix: ptr("sha=")})
			b64V := config(t, verify.Input{Kind: verify.KindHMAC, Secrets: []string{"s3cret"}, Header: ptr("X-Signature"),
				Algorithm: ptr(alg.name), Encoding: ptr(verify.Base64)})
			run(t, hexV, []check{
				{"hex", verify.Request{Header: header("X-Signature", "sha="+hex.EncodeToString(sum)), Body: []byte(body)}, ""},
				{"prefix in another case", verify.Request{Header: header("X-Signature", "SHA="+hex.EncodeToString(sum)), Body: []byte(body)}, ""},
				{"without the prefix", verify.Request{Header: header("X-Signature", hex.EncodeToString(sum)), Body: []byte(body)}, verify.ReasonMalformed},
				{"forged", verify.Request{Header: header("X-Signature", "sha="+hex.EncodeToString(mac(alg.h, "other", body))), Body: []byte(body)}, verify.ReasonMismatch},
			})
			run(t, b64V, []check{
				{"base64", verify.Request{Header: header("X-Signature", base64.StdEncoding.EncodeToString(sum)), Body: []byte(body)}, ""},
				{"base64 without padding", verify.Request{Header: header("X-Signature", base64.RawStdEncoding.EncodeToString(sum)), Body: []byte(body)}, ""},
				{"hex is not base64 of the MAC", verify.Request{Header: header("X-Signature", hex.EncodeToString(sum)), Body: []byte(body)}, verify.ReasonMismatch},
				{"missing", verify.Request{Body: []byte(body)}, verify.ReasonMissing},
			})
		})
	}
}

func TestShopify(t *testing.T) {
	t.Parallel()
	body := `{"id":820982911946154500}`
	v := config(t, verify.Input{Kind: verify.KindShopify, Secrets: []string{"shpss_secret"}})
	run(t, v, []check{
		{"signed", verify.Request{Header: header("X-Shopify-Hmac-Sha256", base64.StdEncoding.EncodeToString(mac(sha256.New, "shpss_secret", body))), Body: []byte(body)}, ""},
		{"forged", verify.Request{Header: header("X-Shopify-Hmac-Sha256", base64.StdEncoding.EncodeToString(mac(sha256.New, "x", body))), Body: []byte(body)}, verify.ReasonMismatch},
		{"missing", verify.Request{Body: []byte(body)}, verify.ReasonMissing},
		{"not base64", verify.Request{Header: header("X-Shopify-Hmac-Sha256", "!!"), Body: []byte(body)}, verify.ReasonMalformed},
	})
}

func TestStripe(t *testing.T) {
	t.Parallel()
	body := `{"id":"evt_1","object":"event"}`
	now := time.Unix(1_700_000_000, 0)
	sign := func(secret string, at time.Time) string {
		ts := strconv.FormatInt(at.Unix(), 10)
		return "t=" + ts + ",v1=" + hex.EncodeToString(mac(sha256.New, secret, ts+"."+body))
	}
	v := config(t, verify.Input{Kind: verify.KindStripe, Secrets: []string{"whsec_stripe"}})
	run(t, v, []check{
		{"signed now", verify.Request{Header: header("Stripe-Signature", sign("whsec_stripe", now)), Body: []byte(body), Now: now}, ""},
		{"signed within the tolerance", verify.Request{Header: header("Stripe-Signature", sign("whsec_stripe", now.Add(-299*time.Second))), Body: []byte(body), Now: now}, ""},
		{"two v1 while Stripe rolls", verify.Request{Header: header("Stripe-Signature", sign("old", now)+",v1="+hex.EncodeToString(mac(sha256.New, "whsec_stripe", strconv.FormatInt(now.Unix(), 10)+"."+body))+",v0=abc"), Body: []byte(body), Now: now}, ""},
		{"stale", verify.Request{Header: header("Stripe-Signature", sign("whsec_stripe", now.Add(-301*time.Second))), Body: []byte(body), Now: now}, verify.ReasonStale},
		{"from the future", verify.Request{Header: header("Stripe-Signature", sign("whsec_stripe", now.Add(10*time.Minute))), Body: []byte(body), Now: now}, verify.ReasonStale},
		{"forged", verify.Request{Header: header("Stripe-Signature", sign("not it", now)), Body: []byte(body), Now: now}, verify.ReasonMismatch},
		{"timestamp changed", verify.Request{Header: header("Stripe-Signature", "t=1"+sign("whsec_stripe", now)[2:]), Body: []byte(body), Now: now}, verify.ReasonMismatch},
		{"missing", verify.Request{Body: []byte(body), Now: now}, verify.ReasonMissing},
		{"no timestamp", verify.Request{Header: header("Stripe-Signature", "v1=00"), Body: []byte(body), Now: now}, verify.ReasonMalformed},
		{"no v1", verify.Request{Header: header("Stripe-Signature", "t=1700000000,v0=00"), Body: []byte(body), Now: now}, verify.ReasonMalformed},
	})
}

func TestSlack(t *testing.T) {
	t.Parallel()
	v := config(t, verify.Input{Kind: verify.KindSlack, Secrets: []string{slackSecret}})
	at := unix(slackTS)
	run(t, v, []check{
		{"published example", verify.Request{Header: header("X-Slack-Signature", slackSig, "X-Slack-Request-Timestamp", slackTS), Body: []byte(slackBody), Now: at.Add(time.Minute)}, ""},
		{"stale", verify.Request{Header: header("X-Slack-Signature", slackSig, "X-Slack-Request-Timestamp", slackTS), Body: []byte(slackBody), Now: at.Add(6 * time.Minute)}, verify.ReasonStale},
		{"timestamp changed", verify.Request{Header: header("X-Slack-Signature", slackSig, "X-Slack-Request-Timestamp", "1531420619"), Body: []byte(slackBody), Now: at}, verify.ReasonMismatch},
		{"no timestamp", verify.Request{Header: header("X-Slack-Signature", slackSig), Body: []byte(slackBody), Now: at}, verify.ReasonMissing},
		{"no signature", verify.Request{Header: header("X-Slack-Request-Timestamp", slackTS), Body: []byte(slackBody), Now: at}, verify.ReasonMissing},
		{"no v0=", verify.Request{Header: header("X-Slack-Signature", slackSig[3:], "X-Slack-Request-Timestamp", slackTS), Body: []byte(slackBody), Now: at}, verify.ReasonMalformed},
	})
}

func TestStandardWebhooks(t *testing.T) {
	t.Parallel()
	v := config(t, verify.Input{Kind: verify.KindStandardWebhooks, Secrets: []string{standardSecret}})
	at := unix(standardTS)
	h := func(sig string) http.Header {
		return header("webhook-id", standardID, "webhook-timestamp", standardTS, "webhook-signature", sig)
	}
	run(t, v, []check{
		{"published example", verify.Request{Header: h(standardSig), Body: []byte(standardBody), Now: at}, ""},
		{"one of several", verify.Request{Header: h("v1,bm9wZQ== " + standardSig), Body: []byte(standardBody), Now: at}, ""},
		{"stale", verify.Request{Header: h(standardSig), Body: []byte(standardBody), Now: at.Add(5*time.Minute + time.Second)}, verify.ReasonStale},
		{"forged", verify.Request{Header: h("v1,bm9wZQ=="), Body: []byte(standardBody), Now: at}, verify.ReasonMismatch},
		{"another id", verify.Request{Header: header("webhook-id", "msg_other", "webhook-timestamp", standardTS, "webhook-signature", standardSig), Body: []byte(standardBody), Now: at}, verify.ReasonMismatch},
		{"no id", verify.Request{Header: header("webhook-timestamp", standardTS, "webhook-signature", standardSig), Body: []byte(standardBody), Now: at}, verify.ReasonMissing},
		{"no v1", verify.Request{Header: h("v2,abc"), Body: []byte(standardBody), Now: at}, verify.ReasonMalformed},
	})
}

func TestBasic(t *testing.T) {
	t.Parallel()
	v := config(t, verify.Input{Kind: verify.KindBasic, Username: ptr("acme"), Secrets: []string{"pw-new", "pw-old"}})
	basic := func(user, pw string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))
	}
	run(t, v, []check{
		{"new password", verify.Request{Header: header("Authorization", basic("acme", "pw-new"))}, ""},
		{"old password", verify.Request{Header: header("Authorization", basic("acme", "pw-old"))}, ""},
		{"wrong password", verify.Request{Header: header("Authorization", basic("acme", "pw"))}, verify.ReasonMismatch},
		{"wrong user", verify.Request{Header: header("Authorization", basic("other", "pw-new"))}, verify.ReasonMismatch},
		{"missing", verify.Request{}, verify.ReasonMissing},
		{"bearer", verify.Request{Header: header("Authorization", "Bearer pw-new")}, verify.ReasonMalformed},
	})
}

func TestAPIKey(t *testing.T) {
	t.Parallel()
	inHeader := config(t, verify.Input{Kind: verify.KindAPIKey, Header: ptr("X-Api-Key"), Secrets: []string{"k1"}})
	run(t, inHeader, []check{
		{"as is", verify.Request{Header: header("X-Api-Key", "k1")}, ""},
		{"after Bearer", verify.Request{Header: header("X-Api-Key", "Bearer k1")}, ""},
		{"wrong", verify.Request{Header: header("X-Api-Key", "k2")}, verify.ReasonMismatch},
		{"in the query instead", verify.Request{RawQuery: "X-Api-Key=k1"}, verify.ReasonMissing},
	})
	inQuery := config(t, verify.Input{Kind: verify.KindAPIKey, QueryParameter: ptr("token"), Secrets: []string{"k 1"}})
	run(t, inQuery, []check{
		{"in the query", verify.Request{RawQuery: "a=1&token=k%201"}, ""},
		{"wrong", verify.Request{RawQuery: "token=k1"}, verify.ReasonMismatch},
		{"missing", verify.Request{RawQuery: "a=1"}, verify.ReasonMissing},
	})
}

// Apply validates, names the field at fault, and keeps the secrets set when the kind stays the same.
func TestApply(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in      verify.Input
		wantErr string
	}{
		{verify.Input{Kind: "NOPE"}, "verification.kind"},
		{verify.Input{Kind: verify.KindGitHub}, "verification.secrets is required"},
		{verify.Input{Kind: verify.KindGitHub, Secrets: []string{"a", "b", "c"}}, "verification.secrets holds at most 2"},
		{verify.Input{Kind: verify.KindGitHub, Secrets: []string{""}}, "verification.secrets"},
		{verify.Input{Kind: verify.KindHMAC, Secrets: []string{"s"}}, "verification.header is required"},
		{verify.Input{Kind: verify.KindHMAC, Secrets: []string{"s"}, Header: ptr("Bad Header")}, "verification.header must be"},
		{verify.Input{Kind: verify.KindHMAC, Secrets: []string{"s"}, Header: ptr("X-Adal-Sig")}, "verification.header"},
		{verify.Input{Kind: verify.KindHMAC, Secrets: []string{"s"}, Header: ptr("X-Sig"), Algorithm: ptr(verify.Algorithm("MD5"))}, "verification.algorithm"},
		{verify.Input{Kind: verify.KindGitHub, Secrets: []string{"s"}, Header: ptr("X-Sig")}, "verification.header does not apply to kind GITHUB"},
		{verify.Input{Kind: verify.KindStripe, Secrets: []string{"s"}, ToleranceSeconds: ptr(0)}, "verification.toleranceSeconds"},
		{verify.Input{Kind: verify.KindStandardWebhooks, Secrets: []string{"plain"}}, "verification.secrets: a STANDARD_WEBHOOKS secret starts with whsec_"},
		{verify.Input{Kind: verify.KindStandardWebhooks, Secrets: []string{"whsec_!!"}}, "verification.secrets"},
		{verify.Input{Kind: verify.KindBasic, Secrets: []string{"pw"}}, "verification.username"},
		{verify.Input{Kind: verify.KindBasic, Secrets: []string{"pw"}, Username: ptr("a:b")}, "verification.username"},
		{verify.Input{Kind: verify.KindAPIKey, Secrets: []string{"k"}}, "exactly one of header or queryParameter"},
		{verify.Input{Kind: verify.KindAPIKey, Secrets: []string{"k"}, Header: ptr("X-Key"), QueryParameter: ptr("k")}, "exactly one of header or queryParameter"},
		{verify.Input{Kind: verify.KindNone, Secrets: []string{"k"}}, "kind NONE takes no other setting"},
	} {
		t.Run(fmt.Sprint(c.in.Kind, " ", c.wantErr), func(t *testing.T) {
			_, err := c.in.Apply(nil)
			require.ErrorContains(t, err, c.wantErr)
		})
	}

	c, err := verify.Input{Kind: verify.KindStripe, Secrets: []string{"one"}}.Apply(nil)
	require.NoError(t, err)
	require.True(t, c.Enforce, "enforce by default")
	require.Equal(t, verify.DefaultTolerance, c.ToleranceSeconds)

	kept, err := verify.Input{Kind: verify.KindStripe, Enforce: ptr(false)}.Apply(&c)
	require.NoError(t, err)
	require.Equal(t, []string{"one"}, kept.Secrets, "the same kind keeps the secrets set")
	require.False(t, kept.Enforce)

	_, err = verify.Input{Kind: verify.KindSlack}.Apply(&c)
	require.ErrorContains(t, err, "verification.secrets is required", "another kind does not inherit the secret")

	none, err := verify.Input{Kind: verify.KindNone}.Apply(&c)
	require.NoError(t, err)
	require.False(t, none.Active())
	require.Empty(t, none.Secrets)
}

func TestSlackChallenge(t *testing.T) {
	t.Parallel()
	c, ok := verify.SlackChallenge([]byte(`{"token":"t","challenge":"3eZbrw1aB","type":"url_verification"}`))
	require.True(t, ok)
	require.Equal(t, "3eZbrw1aB", c)
	for _, body := range []string{`{"type":"event_callback","event":{"text":"url_verification"}}`, `url_verification`, `{"type":"url_verification"}`} {
		_, ok := verify.SlackChallenge([]byte(body))
		require.False(t, ok, body)
	}
}
