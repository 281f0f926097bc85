package inbound

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/ent/server"
	"github.com/adal-relay/adal/storage/dbtest"
)

// TestServersReadAsEntReadsThem: intake's one-statement read of a batch's servers and recipients on
// PostgreSQL gives, field for field, what ent's eager loading gives — every server column and every recipient
// column intake uses, set or null (withoutHealth lists those it leaves out) — and leaves out deleted servers and
// deleted recipients, read outside any transaction as a committer reads them (the batch's statement takes the
// locks), and a server of alerts, whose key intake never accepts. A column read into the wrong field fails
// here; a recipient column added for intake must be added to serversSQL too, and set here. A server is found by
// a key a rotation replaced while its grace lasts, and not after.
func TestServersReadAsEntReadsThem(t *testing.T) {
	dbtest.SkipUnlessPostgres(t)
	t.Parallel()
	db, ctx := dbtest.OpenAsSystem(t)
	plan, err := db.Client.Plan.Create().SetName("p").SetMonthlyCredits(0).SetRetentionDays(7).
		SetMaxServers(3).SetMaxRecipientsPerServer(3).Save(ctx)
	require.NoError(t, err)
	tn, err := db.Client.Tenant.Create().SetName("t").SetPlanID(plan.ID).SetCreditBalance(5).Save(ctx)
	require.NoError(t, err)
	at := time.Date(2026, 11, 30, 12, 0, 0, 123456000, time.UTC)
	full, err := db.Client.Server.Create().SetTenantID(tn.ID).SetName("full").SetInboundKey("k-full").
		SetRetentionDays(2).SetDeliverPendingOnConnect(true).
		SetPreviousInboundKey("k-full-old").SetPreviousKeyExpiresAt(at.Add(time.Second)).Save(ctx)
	require.NoError(t, err)
	bare, err := db.Client.Server.Create().SetTenantID(tn.ID).SetName("bare").SetInboundKey("k-bare").Save(ctx)
	require.NoError(t, err)
	_, err = db.Client.Server.Create().SetTenantID(tn.ID).SetName("gone").SetInboundKey("k-gone").
		SetDeletedAt(at).Save(ctx)
	require.NoError(t, err)
	_, err = db.Client.Server.Create().SetTenantID(tn.ID).SetName("alerts").SetInboundKey("k-alerts").
		SetKind(server.KindALERTS).Save(ctx)
	require.NoError(t, err)
	_, err = db.Client.Server.Create().SetTenantID(tn.ID).SetName("rotated").SetInboundKey("k-rotated").
		SetPreviousInboundKey("k-rotated-old").SetPreviousKeyExpiresAt(at).Save(ctx)
	require.NoError(t, err)
	_, err = db.Client.Recipient.Create().SetTenantID(tn.ID).SetServerID(full.ID).SetName("paused").
		SetMethod(recipient.MethodDIRECT_HTTP).SetURL("https://example.test/hook?x=\"1\"").SetMaxAttempts(7).
		SetRetrySchedule(recipient.RetryScheduleEXPONENTIAL).SetSendIdempotencyKey(true).SetTimeoutSeconds(9).
		SetState(recipient.StatePAUSED).SetStateReason("by hand").SetStateChangedAt(at).
		SetConsecutiveFailures(3).SetWindowAttempts(40).SetWindowFailures(5).SetLastSuccessAt(at.Add(-time.Hour)).
		SetNextProbeAt(at.Add(time.Minute)).SetRoutingFilter(`{"method":"POST"}`).
		SetPreviousSigningSecret([]byte("an-older-key-of-24-bytes")).
		SetPreviousSecretExpiresAt(at.Add(time.Hour)).SetSignatureHeaders(recipient.SignatureHeadersSTANDARD_WEBHOOKS).Save(ctx)
	require.NoError(t, err)
	_, err = db.Client.Recipient.Create().SetTenantID(tn.ID).SetServerID(full.ID).SetName("cli").
		SetMethod(recipient.MethodCLI).SetCliSeenUntil(at).Save(ctx)
	require.NoError(t, err)
	_, err = db.Client.Recipient.Create().SetTenantID(tn.ID).SetServerID(full.ID).SetName("deleted").
		SetMethod(recipient.MethodCLI).SetDeletedAt(at).Save(ctx)
	require.NoError(t, err)

	got, versions, err := serversPostgres(ctx, db.Client, keysOf([]*pendingAccept{{key: "k-full"}, {key: "k-bare"}, {key: "k-gone"},
		{key: "k-full"}, {key: "k-full-old"}, {key: "k-rotated-old"}, {key: "k-alerts"}}), at)
	require.NoError(t, err)
	require.NotNil(t, got["k-full-old"], "a replaced key is accepted during its grace")
	require.Same(t, got["k-full"], got["k-full-old"])
	require.Equal(t, "k-full-old", *got["k-full"].PreviousInboundKey)
	require.True(t, at.Add(time.Second).Equal(*got["k-full"].PreviousKeyExpiresAt), "%v", got["k-full"].PreviousKeyExpiresAt)
	require.Nil(t, got["k-rotated-old"], "a replaced key is refused once its grace is over")
	require.NotNil(t, got["k-rotated"], "a server found by a key whose grace is over is filed under its key only")
	delete(got, "k-full-old")
	delete(got, "k-rotated")
	want, err := db.Client.Server.Query().Where(server.IDIn(full.ID, bare.ID)).
		WithRecipients(func(q *ent.RecipientQuery) {
			q.Where(recipient.DeletedAtIsNil()).Order(ent.Asc(recipient.FieldID))
		}).All(ctx)
	require.NoError(t, err)
	require.Len(t, got, 2, "the deleted server and the server of alerts are not read")
	for _, w := range want {
		g := got[w.InboundKey]
		require.NotNil(t, g, w.InboundKey)
		require.Equal(t, w.InboundKey, g.InboundKey)
		require.Len(t, g.Edges.Recipients, len(w.Edges.Recipients))
		for _, r := range w.Edges.Recipients {
			withoutHealth(r)
		}
		require.Equal(t, asJSON(t, w), asJSON(t, g), "server %s with its recipients", w.Name)
		for i, wr := range w.Edges.Recipients { // the signing keys, which JSON leaves out
			require.Len(t, g.Edges.Recipients[i].SigningSecret, 32, "recipient %d", wr.ID)
			require.Equal(t, wr.SigningSecret, g.Edges.Recipients[i].SigningSecret, "recipient %d", wr.ID)
			require.Equal(t, wr.PreviousSigningSecret, g.Edges.Recipients[i].PreviousSigningSecret, "recipient %d", wr.ID)
		}
	}
	require.NotNil(t, got["k-full"].Edges.Recipients[0].PreviousSigningSecret, "a replaced key is read")
	require.Len(t, got["k-full"].Edges.Recipients, 2, "the deleted recipient is not read")
	require.Empty(t, got["k-bare"].Edges.Recipients)
	require.Len(t, versions, 3, "a version for each server read")
	require.NotEqual(t, versions[full.ID], versions[bare.ID])
}

// withoutHealth clears what intake does not read of a recipient: its name and creation time, and its health,
// which the attempts' outcomes are recorded against as the row stands.
func withoutHealth(r *ent.Recipient) {
	r.Name, r.CreatedAt = "", time.Time{}
	r.StateReason, r.StateChangedAt, r.NextProbeAt, r.LastSuccessAt = "", nil, nil, nil
	r.ConsecutiveFailures, r.WindowAttempts, r.WindowFailures = 0, 0, 0
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
