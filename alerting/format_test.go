package alerting

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/alert"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/recipient"
)

func TestFormatFor(t *testing.T) {
	t.Parallel()
	require.Equal(t, FormatSlack, FormatFor("https://hooks.slack.com/services/T0/B0/x"))
	require.Equal(t, FormatSlack, FormatFor("https://HOOKS.SLACK.COM/services/T0/B0/x"))
	require.Equal(t, FormatJSON, FormatFor("https://hooks.slack.com.evil.test/services/x"))
	require.Equal(t, FormatJSON, FormatFor("https://example.test/hooks.slack.com"))
	require.Equal(t, FormatJSON, FormatFor("::not a url"))
}

// Each event written in each format: Slack's one sentence, and the JSON payload's type, timestamp and data.
func TestAlertBodies(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	tenant := &ent.Tenant{ID: 7, Name: "acme"}
	rec := &ent.Recipient{ID: 9, Name: "orders", Method: recipient.MethodDIRECT_HTTP, URL: "https://x.test/h", ServerID: 3}
	rec.Edges.Server = &ent.Server{ID: 3, Name: "shop"}
	event := func(typ alert.Type, v any) *ent.PendingAlert {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		return &ent.PendingAlert{ID: 1, Type: string(typ), Data: b, OccurredAt: at}
	}
	threshold := int64(50)
	for _, c := range []struct {
		e    *ent.PendingAlert
		text string
		data map[string]any
	}{
		{event(alert.RecipientDisabled, alert.RecipientState{State: "DISABLED", Reason: "3 consecutive failures"}),
			`Adal: recipient "orders" of server "shop" was disabled (3 consecutive failures). It gets one probe attempt at a time until one succeeds.`,
			map[string]any{"state": "DISABLED", "reason": "3 consecutive failures"}},
		{event(alert.RecipientFrozen, alert.RecipientState{State: "FROZEN", Reason: "50000 consecutive failures"}),
			`Adal: recipient "orders" of server "shop" was frozen (50000 consecutive failures). It gets no attempts until an owner enables it.`,
			map[string]any{"state": "FROZEN"}},
		{event(alert.RecipientRecovered, alert.RecipientState{State: "ACTIVE", Reason: "probe succeeded"}),
			`Adal: recipient "orders" of server "shop" is active again (probe succeeded).`, map[string]any{"state": "ACTIVE"}},
		{event(alert.CreditsLow, alert.Credits{Balance: 49, Threshold: &threshold}),
			`Adal: tenant "acme" has 49 credits left, under its threshold of 50.`, map[string]any{"balance": float64(49), "threshold": float64(50)}},
		{event(alert.CreditsExhausted, alert.Credits{}),
			`Adal: tenant "acme" is out of credits: intake refuses its requests (402) until credits are added.`, map[string]any{"balance": float64(0)}},
	} {
		a, err := eventAlert(c.e, tenant, rec)
		require.NoError(t, err)
		slack, err := a.Body(FormatSlack)
		require.NoError(t, err)
		require.JSONEq(t, `{"text": `+quote(c.text)+`}`, string(slack))
		var body struct {
			Type      string
			Timestamp string
			Data      map[string]any
		}
		raw, err := a.Body(FormatJSON)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(raw, &body))
		require.Equal(t, c.e.Type, body.Type)
		require.Equal(t, "2026-06-01T12:00:00Z", body.Timestamp)
		require.Equal(t, map[string]any{"id": "7", "name": "acme"}, body.Data["tenant"])
		for k, v := range c.data {
			require.Equal(t, v, body.Data[k], "%s %s", c.e.Type, k)
		}
	}

	failures := []*ent.PendingAlert{
		event(alert.DeliveryFailed, alert.Failure{DeliveryID: 1, RequestID: 2, ErrorKind: "TIMEOUT", Error: "deadline"}),
		event(alert.DeliveryFailed, alert.Failure{DeliveryID: 3, RequestID: 4, ErrorKind: "HTTP_STATUS", HTTPStatus: 502}),
	}
	failures[1].OccurredAt = at.Add(time.Minute)
	a, err := failureAlert(failures, tenant, rec)
	require.NoError(t, err)
	slack, err := a.Body(FormatSlack)
	require.NoError(t, err)
	require.JSONEq(t, `{"text": "Adal: 2 deliveries to recipient \"orders\" of server \"shop\" failed after their last attempt since 2026-06-01T12:00:00Z; the last one: HTTP 502."}`, string(slack))
	require.EqualValues(t, 2, a.Data["count"])
	require.Equal(t, "2026-06-01T12:00:00Z", a.Data["since"])
	require.Equal(t, "4", a.Data["lastFailure"].(map[string]any)["requestId"])
	require.Equal(t, map[string]any{"id": "9", "name": "orders", "method": "DIRECT_HTTP", "url": "https://x.test/h",
		"serverId": "3", "serverName": "shop"}, a.Data["recipient"])
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
