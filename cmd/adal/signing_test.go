package main_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/internal/swverify"
	"github.com/adal-relay/adal/relay/relaytest"
)

// The local service behind `adal listen` gets deliveries signed by the server — the CLI runs with a member's
// token and never holds the secret — that a Standard Webhooks receiver accepts with the recipient's secret: the
// same id on the automatic retry, the attempt's timestamp, the exact body. In ADAL mode the sender's own
// webhook-* headers arrive as sent; in STANDARD_WEBHOOKS mode the signature replaces them.
func TestListenForwardsSignedDeliveries(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t, unit(20*time.Millisecond))
	f := newFixture(t, env, nil, map[string]any{"sendIdempotencyKey": true})
	var sec struct {
		Node struct{ SigningSecret string }
	}
	env.MustGraphQL(f.tenant.Owner, `query($id: ID!){ node(id: $id){ ... on Recipient { signingSecret } } }`,
		map[string]any{"id": f.recipient}, &sec)
	secret := sec.Node.SigningSecret
	require.True(t, strings.HasPrefix(secret, "whsec_"), secret)

	local := newLocalService(t, func(n int) int {
		if n == 1 {
			return 500 // the first attempt fails: the retry must carry the same id
		}
		return 200
	})
	cli := listen(t, env, f.tenant.Member, f.recipient, local.URL+"/hook", t.TempDir())
	cli.waitConnected()

	post := func(body string) time.Time {
		t.Helper()
		req, err := newWebhook(env.Server.URL+"/in/"+f.server.Key+"/evt", body)
		require.NoError(t, err)
		req.Header.Set("webhook-id", "msg_from_sender")
		req.Header.Set("webhook-timestamp", "1700000000")
		req.Header.Set("webhook-signature", "v1,c2VuZGVyJ3Mgb3du")
		req.Header.Set("X-Adal-Webhook-Signature", "v1,Zm9yZ2Vk")
		sent := time.Now()
		resp, err := env.Server.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, 202, resp.StatusCode)
		return sent
	}
	// requireSigned checks a call as a receiver would, and that its timestamp is when its attempt started:
	// no earlier than the request was sent, no later than the call arrived.
	requireSigned := func(c localCall, names swverify.Names, sent time.Time) {
		t.Helper()
		require.NoError(t, swverify.Verify(secret, names, c.header, []byte(c.body), c.at))
		require.Len(t, swverify.Entries(names, c.header), 1)
		ts, err := strconv.ParseInt(c.header.Get(names.Timestamp), 10, 64)
		require.NoError(t, err)
		require.GreaterOrEqual(t, ts, sent.Unix())
		require.LessOrEqual(t, ts, c.at.Unix())
		require.Equal(t, c.header.Get("X-Adal-Idempotency"), c.header.Get(names.ID), "the id is the request key")
		require.ErrorIs(t, swverify.Verify(secret, names, c.header, []byte(c.body+" "), c.at), swverify.ErrNoMatch, "an altered body")
		require.ErrorIs(t, swverify.Verify(secret, names, c.header, []byte(c.body), c.at.Add(time.Hour)), swverify.ErrTooOld, "a replay an hour later")
	}

	sent := post(`{"mode":"adal"}`)
	relaytest.Eventually(t, 20*time.Second, "the failed attempt and its retry", func() bool { return local.count() == 2 })
	calls := local.callsCopy()
	for _, c := range calls {
		requireSigned(c, swverify.Adal, sent)
		require.Equal(t, "msg_from_sender", c.header.Get("webhook-id"), "ADAL mode passes the sender's headers as sent")
		require.Equal(t, "1700000000", c.header.Get("webhook-timestamp"))
		require.Equal(t, "v1,c2VuZGVyJ3Mgb3du", c.header.Get("webhook-signature"))
	}
	require.Equal(t, calls[0].header.Get(swverify.Adal.ID), calls[1].header.Get(swverify.Adal.ID), "the retry keeps the id")
	require.Equal(t, "1", calls[0].header.Get("X-Adal-Attempt"))
	require.Equal(t, "2", calls[1].header.Get("X-Adal-Attempt"))

	env.MustGraphQL(f.tenant.Owner, `mutation($id: ID!){ updateRecipient(id: $id, input: {signatureHeaders: STANDARD_WEBHOOKS}){ id } }`,
		map[string]any{"id": f.recipient}, nil)
	sent = post(`{"mode":"standard"}`)
	relaytest.Eventually(t, 20*time.Second, "the second request", func() bool { return local.count() == 3 })
	c := local.callsCopy()[2]
	requireSigned(c, swverify.Standard, sent)
	require.NotEqual(t, calls[0].header.Get(swverify.Adal.ID), c.header.Get("webhook-id"), "a new request, a new id")
	for _, name := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
		require.Len(t, c.header.Values(name), 1, "%s replaces the sender's", name)
	}
	for _, name := range []string{"X-Adal-Webhook-Id", "X-Adal-Webhook-Timestamp", "X-Adal-Webhook-Signature"} {
		require.Empty(t, c.header.Values(name), name)
	}
	require.NotContains(t, cli.output(), strings.TrimPrefix(secret, "whsec_"), "the CLI never sees the secret")
	cli.interrupt()
}

// --print-secret prints what a local receiver verifies with: the secret alone for one recipient, one JSON line
// per recipient with --format json, and a refusal (exit 1, nothing printed) for a token that may not read it.
func TestListenPrintsTheSigningSecret(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t, unit(20*time.Millisecond))
	f := newFixture(t, env, nil, nil)
	second := env.NewRecipient(f.tenant, f.server.ID, map[string]any{"method": "CLI", "name": "second"})
	secretOf := func(id string) string {
		var out struct {
			Node struct{ SigningSecret string }
		}
		env.MustGraphQL(f.tenant.Owner, `query($id: ID!){ node(id: $id){ ... on Recipient { signingSecret } } }`,
			map[string]any{"id": id}, &out)
		return out.Node.SigningSecret
	}
	as := run{env: []string{"ADAL_API=" + env.Server.URL, "ADAL_TOKEN=" + f.tenant.Owner}}

	code, stdout, stderr := runAdal(t, as, "listen", "--recipient", f.recipient, "--print-secret")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, secretOf(f.recipient), stdout)
	require.True(t, strings.HasPrefix(stdout, "whsec_"), stdout)

	code, stdout, stderr = runAdal(t, as, "listen", "--server", f.server.ID, "--print-secret", "--format", "json")
	require.Equal(t, 0, code, stderr)
	got := map[string]string{}
	for _, line := range strings.Split(stdout, "\n") {
		var ev struct{ Type, RecipientID, Secret string }
		require.NoError(t, json.Unmarshal([]byte(line), &ev), line)
		require.Equal(t, "secret", ev.Type)
		got[ev.RecipientID] = ev.Secret
	}
	require.Equal(t, map[string]string{f.recipient: secretOf(f.recipient), second: secretOf(second)}, got)

	member := run{env: []string{"ADAL_API=" + env.Server.URL, "ADAL_TOKEN=" + f.tenant.Member}}
	code, stdout, stderr = runAdal(t, member, "listen", "--recipient", f.recipient, "--print-secret")
	require.Equal(t, 1, code)
	require.Empty(t, stdout)
	require.Contains(t, stderr, "may not read its signing secret")

	code, _, stderr = runAdal(t, as, "listen", "--recipient", f.recipient, "--print-secret", "--forward", "http://127.0.0.1:1/")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "without --forward")
}
