// Package alert records the events a tenant may subscribe alerts to — a recipient disabled, frozen or recovered,
// a delivery failed for good, credits low or exhausted — in the transaction of the change that caused them, as
// rows of an outbox (pending_alerts) that package alerting turns into alerts. Writing the event with its cause
// means neither is ever committed without the other, and the hot paths write it inside statements they already
// run (see InsertFromSQL and InsertRowsSQL).
package alert

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/adal-relay/adal/ent"
)

// Type is an event's name, dotted as alerts carry it.
type Type string

// The events.
const (
	RecipientDisabled  Type = "recipient.disabled"
	RecipientFrozen    Type = "recipient.frozen"
	RecipientRecovered Type = "recipient.recovered"
	// DeliveryFailed: a delivery used up its attempts. Alerts about it come at most once an hour per recipient.
	DeliveryFailed Type = "delivery.failed"
	// CreditsLow: a debit took the balance under the tenant's threshold.
	CreditsLow Type = "credits.low"
	// CreditsExhausted: intake started refusing the tenant's requests for want of credit.
	CreditsExhausted Type = "credits.exhausted"
)

// Types are all the events, in the order they are listed to users.
var Types = []Type{RecipientDisabled, RecipientFrozen, RecipientRecovered, DeliveryFailed, CreditsLow, CreditsExhausted}

// Valid reports whether t is one of Types.
func (t Type) Valid() bool {
	for _, x := range Types {
		if x == t {
			return true
		}
	}
	return false
}

// Event is an event to record. Data is its details, marshalled to JSON: a RecipientState, a Failure or a
// Credits.
type Event struct {
	TenantID    int
	Type        Type
	RecipientID int // 0 for tenant events
	Data        any
	At          time.Time
}

// RecipientState is the data of the recipient.* events: the state the recipient moved to, and why.
type RecipientState struct {
	State  string `json:"state"`
	Reason string `json:"reason"`
}

// Failure is the data of delivery.failed: the delivery and its last attempt.
type Failure struct {
	DeliveryID int    `json:"deliveryId"`
	RequestID  int    `json:"requestId"`
	ErrorKind  string `json:"errorKind,omitempty"`
	HTTPStatus int    `json:"httpStatus,omitempty"`
	Error      string `json:"error,omitempty"`
}

// Credits is the data of the credits.* events (the names InsertFromSQL's callers build in SQL too).
type Credits struct {
	Balance   int64  `json:"balance"`
	Threshold *int64 `json:"threshold,omitempty"`
}

// Record writes events in the caller's transaction.
func Record(ctx context.Context, client *ent.Client, events ...Event) error {
	if len(events) == 0 {
		return nil
	}
	builders := make([]*ent.PendingAlertCreate, len(events))
	for i, e := range events {
		data, err := json.Marshal(e.Data)
		if err != nil {
			return fmt.Errorf("alert %s data: %w", e.Type, err)
		}
		c := client.PendingAlert.Create().SetTenantID(e.TenantID).SetType(string(e.Type)).SetData(data).
			SetOccurredAt(e.At).SetDueAt(e.At)
		if e.RecipientID != 0 {
			c.SetRecipientID(e.RecipientID)
		}
		builders[i] = c
	}
	if err := client.PendingAlert.CreateBulk(builders...).Exec(ctx); err != nil {
		return fmt.Errorf("record alert events: %w", err)
	}
	return nil
}

// InsertFromSQL is a data-modifying statement, for a WITH list of PostgreSQL, that records an event per row of
// query, whose columns are tenant_id, type, recipient_id, data (JSON as bytea) and occurred_at.
func InsertFromSQL(query string) string {
	return `INSERT INTO pending_alerts (tenant_id, type, recipient_id, data, occurred_at, due_at)
	SELECT a.tenant_id, a.type, a.recipient_id, a.data, a.occurred_at, a.occurred_at FROM (` + query + `) AS a
	RETURNING 1`
}

// InsertRowsSQL is InsertFromSQL of the events that AppendRows wrote into the JSON array parameter param.
func InsertRowsSQL(param string) string {
	return InsertFromSQL(`SELECT tenant_id, type, recipient_id, convert_to(data::text, 'UTF8') AS data, at AS occurred_at
	FROM json_to_recordset(` + param + `::json) AS v(tenant_id bigint, type text, recipient_id bigint, data json, at timestamptz)`)
}

// Rows is events as InsertRowsSQL takes them: a JSON array ("[]" for none).
func Rows(events []Event) ([]byte, error) {
	if len(events) == 0 {
		return []byte("[]"), nil // most batches: no event, and nothing to marshal
	}
	type row struct {
		TenantID    int       `json:"tenant_id"`
		Type        Type      `json:"type"`
		RecipientID *int      `json:"recipient_id"`
		Data        any       `json:"data"`
		At          time.Time `json:"at"`
	}
	rows := make([]row, len(events))
	for i, e := range events {
		rows[i] = row{TenantID: e.TenantID, Type: e.Type, Data: e.Data, At: e.At}
		if e.RecipientID != 0 {
			id := e.RecipientID
			rows[i].RecipientID = &id
		}
	}
	b, err := json.Marshal(rows)
	if err != nil {
		return nil, fmt.Errorf("alert events: %w", err)
	}
	return b, nil
}
