package delivery

import (
	"context"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/server"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/storage"
)

// StoreFree stores a request of Adal's own making for srv — an alert, on the tenant's server of alerts — with a
// delivery per recipient whose routing filter it matches, and charges nothing: no debit, no ledger entry. It
// is kept for planDays (the tenant's plan's retention) or the server's, the shorter. client must be bound to
// a transaction. The deliveries are then attempted, retried and recorded as any.
func (s *Service) StoreFree(ctx context.Context, client *ent.Client, srv *ent.Server, recipients []*ent.Recipient, in NewRequest, key string, planDays int) (*ent.Request, []*ent.Delivery, error) {
	const op = "delivery.StoreFree"
	if srv.Kind != server.KindALERTS {
		return nil, nil, fault.E(op, fault.Internal, "only a server of alerts stores requests free of charge")
	}
	items := []Incoming{{Server: srv, Recipients: recipients, Request: in, Key: key}}
	route(items)
	now := s.cfg.Now()
	b := s.build(items, []int{0}, map[int]int{srv.TenantID: planDays}, Handoff{}, now)
	if err := insertEach(ctx, client, b.reqs, b.ds, b.owners); err != nil {
		return nil, nil, storage.Err(op, "request", err)
	}
	out := make([]Stored, 1)
	s.finish(ctx, out, b, now)
	return out[0].Request, out[0].Deliveries, nil
}

// free reports whether the request of the given server costs nothing to retry or replay: an alert.
func free(ctx context.Context, client *ent.Client, serverID int) (bool, error) {
	return client.Server.Query().Where(server.ID(serverID), server.KindEQ(server.KindALERTS)).Exist(ctx)
}
