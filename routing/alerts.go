package routing

import (
	"context"

	"github.com/adal-relay/adal/alert"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/ent/server"
	"github.com/adal-relay/adal/ent/tenant"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/storage"
)

// AlertServer returns the tenant's hidden server of alerts, creating it the first time. Its key is never
// accepted by intake (which serves INBOUND servers only); it is listed nowhere and counts in no plan limit.
func (s *Service) AlertServer(ctx context.Context, client *ent.Client, tenantID int) (*ent.Server, error) {
	const op = "routing.AlertServer"
	find := func() (*ent.Server, error) {
		return client.Server.Query().
			Where(server.TenantID(tenantID), server.KindEQ(server.KindALERTS), server.DeletedAtIsNil()).
			First(ctx)
	}
	srv, err := find()
	if err == nil || !ent.IsNotFound(err) {
		return srv, storage.Err(op, "server", err)
	}
	// Under the tenant's row lock, so that two first subscriptions make one server.
	if _, err := client.Tenant.Query().Where(tenant.ID(tenantID)).Select(tenant.FieldID).Modify(lockRow).Ints(ctx); err != nil {
		return nil, storage.Err(op, "tenant", err)
	}
	if srv, err := find(); err == nil || !ent.IsNotFound(err) {
		return srv, storage.Err(op, "server", err)
	}
	srv, err = client.Server.Create().
		SetTenantID(tenantID).
		SetName("alerts").
		SetKind(server.KindALERTS).
		SetInboundKey(NewKey()).
		SetCreatedAt(s.now()).
		Save(ctx)
	return srv, storage.Err(op, "server", err)
}

// AlertRecipient is how alerts reach one subscribed URL.
type AlertRecipient struct {
	Name string
	URL  string
	// Filter is the routing rule that selects the subscribed events.
	Filter []byte
}

// AddAlertRecipient adds a DIRECT_HTTP recipient to srv, the tenant's server of alerts, validated as any
// recipient and retried on the STEPPED schedule, so that an alert gets through within hours or is known lost.
func (s *Service) AddAlertRecipient(ctx context.Context, client *ent.Client, srv *ent.Server, in AlertRecipient) (*ent.Recipient, error) {
	const op = "routing.AddAlertRecipient"
	if err := requireManagerOf(ctx, op); err != nil {
		return nil, err
	}
	if srv.Kind != server.KindALERTS {
		return nil, fault.E(op, fault.Internal, "server %d is not a server of alerts", srv.ID)
	}
	rs := recipientSettings{
		name: in.Name, method: recipient.MethodDIRECT_HTTP, url: in.URL, maxAttempts: 10,
		schedule: recipient.RetryScheduleSTEPPED, timeoutSecond: MaxTimeoutSeconds, filterIn: in.Filter,
		sigHeaders: recipient.DefaultSignatureHeaders,
	}
	if err := rs.validate(op); err != nil {
		return nil, err
	}
	return s.createRecipient(ctx, client, op, srv, rs)
}

// RemoveAlertRecipient deletes an alert subscription's recipient and cancels its pending deliveries.
func (s *Service) RemoveAlertRecipient(ctx context.Context, client *ent.Client, id int) error {
	const op = "routing.RemoveAlertRecipient"
	if err := requireManagerOf(ctx, op); err != nil {
		return err
	}
	if err := s.deleteRecipients(ctx, client, s.now(), id); err != nil {
		return fault.Wrap(op, fault.Internal, err)
	}
	return nil
}

// recoveredEvent is the recipient.recovered event of r, brought back to ACTIVE by its owner.
func recoveredEvent(r *ent.Recipient) alert.Event {
	return alert.Event{TenantID: r.TenantID, Type: alert.RecipientRecovered, RecipientID: r.ID, At: *r.StateChangedAt,
		Data: alert.RecipientState{State: string(r.State), Reason: r.StateReason}}
}
