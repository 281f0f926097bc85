package alerting

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/adal-relay/adal/alert"
	"github.com/adal-relay/adal/ent"
)

// Alert is one alert, written for a subscription by Body in its format.
type Alert struct {
	Type alert.Type
	At   time.Time
	// Data is what a JSON alert carries under "data".
	Data map[string]any
	// Text is the alert in a sentence: what a Slack alert carries.
	Text string
}

// Body is the alert as its format writes it: {"type", "timestamp", "data"} (the shape of Standard Webhooks
// payloads) or Slack's {"text"}.
func (a Alert) Body(f Format) ([]byte, error) {
	var v any
	switch f {
	case FormatSlack:
		v = map[string]string{"text": a.Text}
	default:
		v = struct {
			Type      alert.Type     `json:"type"`
			Timestamp string         `json:"timestamp"`
			Data      map[string]any `json:"data"`
		}{a.Type, stamp(a.At), a.Data}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("write %s alert: %w", a.Type, err)
	}
	return b, nil
}

// formatHeader is the value of an alert's format header, which its subscriptions' filters compare.
func formatHeader(f Format) string { return strings.ToLower(string(f)) }

// eventAlert is the alert of one event (not delivery.failed: failureAlert counts those), about tenant and,
// for a recipient's event, rec.
func eventAlert(e *ent.PendingAlert, tenant *ent.Tenant, rec *ent.Recipient) (Alert, error) {
	a := Alert{Type: alert.Type(e.Type), At: e.OccurredAt, Data: map[string]any{"tenant": tenantData(tenant)}}
	switch a.Type {
	case alert.RecipientDisabled, alert.RecipientFrozen, alert.RecipientRecovered:
		var d alert.RecipientState
		if err := decode(e, &d); err != nil {
			return a, err
		}
		a.Data["recipient"], a.Data["state"], a.Data["reason"] = recipientData(rec), d.State, d.Reason
		who := recipientName(rec)
		switch a.Type {
		case alert.RecipientDisabled:
			a.Text = fmt.Sprintf("Adal: %s was disabled (%s). It gets one probe attempt at a time until one succeeds.", who, d.Reason)
		case alert.RecipientFrozen:
			a.Text = fmt.Sprintf("Adal: %s was frozen (%s). It gets no attempts until an owner enables it.", who, d.Reason)
		default:
			a.Text = fmt.Sprintf("Adal: %s is active again (%s).", who, cmp.Or(d.Reason, "recovered"))
		}
	case alert.CreditsLow:
		var d alert.Credits
		if err := decode(e, &d); err != nil {
			return a, err
		}
		a.Data["balance"], a.Data["threshold"] = d.Balance, d.Threshold
		threshold := int64(0)
		if d.Threshold != nil {
			threshold = *d.Threshold
		}
		a.Text = fmt.Sprintf("Adal: tenant %q has %d credits left, under its threshold of %d.", tenant.Name, d.Balance, threshold)
	case alert.CreditsExhausted:
		a.Data["balance"] = 0
		a.Text = fmt.Sprintf("Adal: tenant %q is out of credits: intake refuses its requests (402) until credits are added.", tenant.Name)
	default:
		return a, fmt.Errorf("alert event %d: unknown type %q", e.ID, e.Type)
	}
	return a, nil
}

// failureAlert is the delivery.failed alert counting events, the failures of rec's deliveries not yet told, in
// the order they happened.
func failureAlert(events []*ent.PendingAlert, tenant *ent.Tenant, rec *ent.Recipient) (Alert, error) {
	first, last := events[0], events[len(events)-1]
	var d alert.Failure
	if err := decode(last, &d); err != nil {
		return Alert{}, err
	}
	lastFailure := map[string]any{
		"deliveryId": strconv.Itoa(d.DeliveryID), "requestId": strconv.Itoa(d.RequestID), "errorKind": d.ErrorKind,
		"error": d.Error, "at": stamp(last.OccurredAt),
	}
	if d.HTTPStatus != 0 {
		lastFailure["httpStatus"] = d.HTTPStatus
	}
	a := Alert{Type: alert.DeliveryFailed, At: last.OccurredAt, Data: map[string]any{
		"tenant": tenantData(tenant), "recipient": recipientData(rec), "count": len(events),
		"since": stamp(first.OccurredAt), "lastFailure": lastFailure,
	}}
	what := "1 delivery"
	if len(events) > 1 {
		what = fmt.Sprintf("%d deliveries", len(events))
	}
	cause := d.ErrorKind
	if d.HTTPStatus != 0 {
		cause = fmt.Sprintf("HTTP %d", d.HTTPStatus)
	}
	if d.Error != "" {
		cause += ": " + d.Error
	}
	a.Text = fmt.Sprintf("Adal: %s to %s failed after their last attempt since %s; the last one: %s.",
		what, recipientName(rec), stamp(first.OccurredAt), cause)
	return a, nil
}

func tenantData(t *ent.Tenant) map[string]any {
	return map[string]any{"id": strconv.Itoa(t.ID), "name": t.Name}
}

func recipientData(r *ent.Recipient) map[string]any {
	return map[string]any{
		"id": strconv.Itoa(r.ID), "name": r.Name, "method": string(r.Method), "url": r.URL,
		"serverId": strconv.Itoa(r.ServerID), "serverName": r.Edges.Server.Name,
	}
}

func recipientName(r *ent.Recipient) string {
	return fmt.Sprintf("recipient %q of server %q", r.Name, r.Edges.Server.Name)
}

// stamp is t as alerts write times: RFC 3339, UTC.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
