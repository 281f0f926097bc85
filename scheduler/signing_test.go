package scheduler_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/internal/swverify"
	"github.com/adal-relay/adal/relay/relaytest"
)

// signingSecret reads a recipient's signing secret as the tenant's owner.
func signingSecret(t *testing.T, env *relaytest.Env, tn relaytest.Tenant, id string) string {
	t.Helper()
	var out struct {
		Node struct{ SigningSecret *string }
	}
	env.MustGraphQL(tn.Owner, `query($id: ID!){ node(id: $id){ ... on Recipient { signingSecret } } }`, map[string]any{"id": id}, &out)
	require.NotNil(t, out.Node.SigningSecret, "the owner reads the secret")
	return *out.Node.SigningSecret
}

// postSigned posts body to the server's inbound URL with a sender's own signature headers of both kinds, and
// returns the request's ID.
func postSigned(t *testing.T, env *relaytest.Env, key, body string) string {
	t.Helper()
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("webhook-id", "msg_from_sender")
	h.Set("webhook-timestamp", "1700000000")
	h.Set("webhook-signature", "v1,c2VuZGVyJ3Mgb3du")
	h.Set("X-Adal-Webhook-Signature", "v1,Zm9yZ2Vk") // a sender may not set Adal's headers
	return env.SendWith(key, "", body, h)
}

// callsCopy is what the target has received so far.
func (tg *target) callsCopy() []call {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return append([]call(nil), tg.calls...)
}

// TestDeliveriesAreSigned: every attempt of a direct delivery carries the request key as its id, the Unix
// second the attempt started and a signature that a receiver following the Standard Webhooks specification
// accepts with the recipient's secret; the id is the same on automatic and manual attempts, new on a replay.
// ADAL mode uses X-Adal-Webhook-* and passes the sender's webhook-* headers as sent; STANDARD_WEBHOOKS replaces
// them. A forged, altered or stale delivery is refused by the same receiver.
func TestDeliveriesAreSigned(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartWithServer(t, 20, compressed(5*time.Millisecond))
	adalRcv, stdRcv := newReceiver(t, 1), newReceiver(t, 1)
	adalID := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": adalRcv.URL, "sendIdempotencyKey": true})
	stdID := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": stdRcv.URL,
		"sendIdempotencyKey": true, "signatureHeaders": "STANDARD_WEBHOOKS"})
	adalSecret, stdSecret := signingSecret(t, env, tn, adalID), signingSecret(t, env, tn, stdID)
	require.NotEqual(t, adalSecret, stdSecret, "each recipient has its own secret")

	body := `{"event":"paid","amount":100}`
	reqID := postSigned(t, env, srv.Key, body)
	relaytest.Eventually(t, 20*time.Second, "both deliveries to succeed on their second attempt", func() bool {
		ds := deliveriesOf(t, env, reqID)
		return len(ds) == 2 && ds[0].Status == entdelivery.StatusSUCCEEDED && ds[1].Status == entdelivery.StatusSUCCEEDED
	})
	var keyOut struct{ Request struct{ Key string } }
	env.MustGraphQL(tn.Owner, `query($id: ID!){ request(id: $id){ key } }`, map[string]any{"id": reqID}, &keyOut)
	requestKey := keyOut.Request.Key
	require.NotEmpty(t, requestKey)

	attempts := map[string][]time.Time{} // recipient → each attempt's start, as recorded
	for _, d := range deliveriesOf(t, env, reqID) {
		for _, a := range d.Edges.Attempts {
			attempts[strconv.Itoa(d.RecipientID)] = append(attempts[strconv.Itoa(d.RecipientID)], a.StartedAt)
		}
	}
	for _, tc := range []struct {
		name   string
		rcv    *target
		id     string
		secret string
		names  swverify.Names
	}{
		{"ADAL", adalRcv, adalID, adalSecret, swverify.Adal},
		{"STANDARD_WEBHOOKS", stdRcv, stdID, stdSecret, swverify.Standard},
	} {
		calls := tc.rcv.callsCopy()
		require.Len(t, calls, 2, tc.name)
		for i, c := range calls {
			require.Equal(t, body, c.body)
			require.NoError(t, swverify.Verify(tc.secret, tc.names, c.header, []byte(c.body), c.at), "%s attempt %d", tc.name, i+1)
			require.Equal(t, requestKey, c.header.Get(tc.names.ID), "%s: the id is the request key", tc.name)
			require.Equal(t, c.header.Get("X-Adal-Idempotency"), c.header.Get(tc.names.ID))
			require.Equal(t, strconv.FormatInt(attempts[tc.id][i].Unix(), 10), c.header.Get(tc.names.Timestamp),
				"%s attempt %d: the timestamp is when the attempt started", tc.name, i+1)
			require.Len(t, swverify.Entries(tc.names, c.header), 1, "one secret, one signature")
			for _, name := range []string{tc.names.ID, tc.names.Timestamp, tc.names.Signature} {
				require.Len(t, c.header.Values(name), 1, "%s: %s once", tc.name, name)
			}

			// What a receiver makes of deliveries that are not these.
			require.ErrorIs(t, swverify.Verify(tc.secret, tc.names, c.header, []byte(strings.Replace(c.body, "100", "1000", 1)), c.at), swverify.ErrNoMatch, "an altered body")
			other := stdSecret
			if tc.secret == stdSecret {
				other = adalSecret
			}
			require.ErrorIs(t, swverify.Verify(other, tc.names, c.header, []byte(c.body), c.at), swverify.ErrNoMatch, "another recipient's secret")
			require.ErrorIs(t, swverify.Verify(tc.secret, tc.names, c.header, []byte(c.body), c.at.Add(6*time.Minute)), swverify.ErrTooOld, "a replay six minutes later")
			forged := c.header.Clone()
			forged.Set(tc.names.Signature, "v1,Zm9yZ2Vk")
			require.ErrorIs(t, swverify.Verify(tc.secret, tc.names, forged, []byte(c.body), c.at), swverify.ErrNoMatch, "a forged signature")
		}
	}

	// ADAL mode: the sender's own Standard Webhooks headers arrive as sent; its X-Adal-* do not.
	for _, c := range adalRcv.callsCopy() {
		require.Equal(t, "msg_from_sender", c.header.Get("webhook-id"))
		require.Equal(t, "1700000000", c.header.Get("webhook-timestamp"))
		require.Equal(t, "v1,c2VuZGVyJ3Mgb3du", c.header.Get("webhook-signature"))
		require.NotContains(t, c.header.Get("X-Adal-Webhook-Signature"), "Zm9yZ2Vk")
	}
	// STANDARD_WEBHOOKS mode: Adal's replace the sender's, and no X-Adal-Webhook-* is sent.
	for _, c := range stdRcv.callsCopy() {
		require.NotContains(t, c.header.Get("webhook-signature"), "c2VuZGVyJ3Mgb3du")
		require.NotEqual(t, "msg_from_sender", c.header.Get("webhook-id"))
		for _, name := range []string{"X-Adal-Webhook-Id", "X-Adal-Webhook-Timestamp", "X-Adal-Webhook-Signature"} {
			require.Empty(t, c.header.Values(name), name)
		}
	}

	// A manual retry keeps the id; a replay is a new request with a new one.
	var adalDelivery string
	for _, d := range deliveriesOf(t, env, reqID) {
		if strconv.Itoa(d.RecipientID) == adalID {
			adalDelivery = strconv.Itoa(d.ID)
		}
	}
	env.MustGraphQL(tn.Owner, `mutation($id: ID!){ retryDelivery(id: $id){ id } }`, map[string]any{"id": adalDelivery}, nil)
	relaytest.Eventually(t, 20*time.Second, "the manual retry to arrive", func() bool { return adalRcv.count() == 3 })
	retried := adalRcv.callsCopy()[2]
	require.Equal(t, requestKey, retried.header.Get(swverify.Adal.ID), "a manual retry keeps the id")
	require.NoError(t, swverify.Verify(adalSecret, swverify.Adal, retried.header, []byte(retried.body), retried.at))

	env.MustGraphQL(tn.Owner, `mutation($id: ID!){ replayRequest(id: $id){ id } }`, map[string]any{"id": reqID}, nil)
	relaytest.Eventually(t, 20*time.Second, "the replay to arrive", func() bool { return adalRcv.count() == 4 })
	replayed := adalRcv.callsCopy()[3]
	require.NotEqual(t, requestKey, replayed.header.Get(swverify.Adal.ID), "a replay has a new id")
	require.Equal(t, replayed.header.Get("X-Adal-Idempotency"), replayed.header.Get(swverify.Adal.ID))
	require.NoError(t, swverify.Verify(adalSecret, swverify.Adal, replayed.header, []byte(replayed.body), replayed.at))
}

// TestRotationSignsWithBothSecretsDuringTheGrace: after rotateRecipientSecret, deliveries carry the new
// secret's signature and then the old one's, space-separated, until the grace ends; then only the new one, and
// a receiver still on the old secret refuses them. A grace of 0 drops the old secret at once, and a rotation
// during a grace ends the earlier one. The clock is injected, so the grace ends exactly.
func TestRotationSignsWithBothSecretsDuringTheGrace(t *testing.T) {
	t.Parallel()
	env, clock := relaytest.StartAt(t, time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	tn, srv := env.NewTenantServer(20)
	rcv := newReceiver(t, 0)
	id := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv.URL})
	names := swverify.Adal

	// deliver sends one request and returns the call it made.
	deliver := func() call {
		t.Helper()
		n := rcv.count()
		env.Send(srv.Key, "", `{"n":`+strconv.Itoa(n)+`}`)
		relaytest.Eventually(t, 20*time.Second, "the delivery to arrive", func() bool { return rcv.count() == n+1 })
		c := rcv.callsCopy()[n]
		require.Equal(t, strconv.FormatInt(clock.Now().Unix(), 10), c.header.Get(names.Timestamp), "timestamped by the clock")
		return c
	}
	// entriesMatch checks the signature entries, in order, against the secrets that must have made them.
	entriesMatch := func(c call, secrets ...string) {
		t.Helper()
		entries := swverify.Entries(names, c.header)
		require.Len(t, entries, len(secrets), "%q", c.header.Get(names.Signature))
		for i, secret := range secrets {
			ok, err := swverify.Matches(secret, c.header.Get(names.ID), c.header.Get(names.Timestamp), []byte(c.body), entries[i])
			require.NoError(t, err)
			require.True(t, ok, "entry %d is the signature of secret %d", i, i)
		}
	}
	type rotated struct {
		SigningSecret           string
		PreviousSecretExpiresAt *time.Time
	}
	rotate := func(grace int) rotated {
		t.Helper()
		var out struct{ RotateRecipientSecret rotated }
		env.MustGraphQL(tn.Owner, `mutation($id: ID!, $grace: Int){ rotateRecipientSecret(id: $id, graceSeconds: $grace){ signingSecret previousSecretExpiresAt } }`,
			map[string]any{"id": id, "grace": grace}, &out)
		return out.RotateRecipientSecret
	}

	s0 := signingSecret(t, env, tn, id)
	entriesMatch(deliver(), s0)

	r1 := rotate(3600)
	s1 := r1.SigningSecret
	require.NotEqual(t, s0, s1)
	require.NotNil(t, r1.PreviousSecretExpiresAt)
	require.True(t, clock.Now().Add(time.Hour).Equal(*r1.PreviousSecretExpiresAt), "%v", r1.PreviousSecretExpiresAt)
	c := deliver()
	entriesMatch(c, s1, s0) // newest first
	require.NoError(t, swverify.Verify(s1, names, c.header, []byte(c.body), clock.Now()), "a receiver on the new secret")
	require.NoError(t, swverify.Verify(s0, names, c.header, []byte(c.body), clock.Now()), "a receiver still on the old secret")

	clock.Advance(time.Hour - time.Second)
	entriesMatch(deliver(), s1, s0)
	clock.Advance(time.Second)
	c = deliver()
	entriesMatch(c, s1)
	require.ErrorIs(t, swverify.Verify(s0, names, c.header, []byte(c.body), clock.Now()), swverify.ErrNoMatch,
		"after the grace, a receiver still on the old secret refuses the delivery")

	// A rotation during a grace ends it: only the newest two secrets sign.
	s2 := rotate(600).SigningSecret
	s3 := rotate(600).SigningSecret
	entriesMatch(deliver(), s3, s2)

	// Grace 0 drops the replaced secret at once.
	r4 := rotate(0)
	require.Nil(t, r4.PreviousSecretExpiresAt)
	c = deliver()
	entriesMatch(c, r4.SigningSecret)
	require.ErrorIs(t, swverify.Verify(s3, names, c.header, []byte(c.body), clock.Now()), swverify.ErrNoMatch)
}
