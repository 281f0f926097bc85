package resolvers

import (
	"context"

	"github.com/adal-relay/adal/ent"
	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/events"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/startstop"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/viewer"
)

// watchDeliveries streams the deliveries that change under a server or a request. The bus carries only IDs;
// each delivery is read afresh under the subscriber's own viewer, so privacy rules apply to every event and
// a tenant never sees another tenant's data even if an ID leaked into its stream.
//
// A request's subscriber first gets a snapshot of the request's deliveries, read once the subscription is in
// place, so a change between the client's read and its subscribe is in the snapshot or comes after it. A
// server's subscriber gets none: a server's deliveries are its whole history.
func (r *Resolver) watchDeliveries(ctx context.Context, v viewer.Viewer, serverID, requestID *int) (<-chan *ent.Delivery, error) {
	const op = "deliveryUpdated"
	if serverID == nil && requestID == nil {
		return nil, fault.E(op, fault.InvalidInput, "give serverId, requestId or both")
	}
	filter := events.Filter{TenantID: v.TenantID}
	if serverID != nil {
		if _, err := r.Client.Server.Get(ctx, *serverID); err != nil {
			return nil, storage.Err(op, "server", err)
		}
		filter.ServerID = *serverID
	}
	if requestID != nil {
		req, err := r.Client.Request.Get(ctx, *requestID)
		if err != nil {
			return nil, storage.Err(op, "request", err)
		}
		if serverID != nil && req.ServerID != *serverID {
			return nil, fault.E(op, fault.NotFound, "request not found on that server")
		}
		filter.RequestID = *requestID
	}
	in, err := r.Events.Subscribe(ctx, filter)
	if err != nil {
		return nil, fault.Wrap(op, fault.Internal, err)
	}
	out := make(chan *ent.Delivery, 16)
	// A panic ends this subscription (its channel closes: the client sees it complete) and nothing else.
	startstop.Go(r.Logger, "deliveryUpdated subscription", func() {
		defer close(out)
		// forward sends what e points at; false once the subscriber is gone.
		forward := func(e events.Event) bool {
			for _, d := range r.deliveriesFor(ctx, e, filter) {
				select {
				case out <- d:
				case <-ctx.Done():
					return false
				}
			}
			return true
		}
		if filter.RequestID != 0 && !forward(events.Event{Kind: events.KindResync}) { // the snapshot
			return
		}
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-in:
				if !ok || !forward(e) {
					return
				}
			}
		}
	})
	return out, nil
}

// deliveriesFor reads what an event points at. After a resync or an overflow the subscriber may have missed
// events, so a request's subscriber gets all of that request's deliveries again.
func (r *Resolver) deliveriesFor(ctx context.Context, e events.Event, f events.Filter) []*ent.Delivery {
	if e.Kind == events.KindResync || e.Kind == events.KindOverflow {
		if f.RequestID == 0 {
			return nil
		}
		ds, err := r.Client.Delivery.Query().Where(entdelivery.RequestID(f.RequestID)).All(ctx)
		if err != nil {
			return nil
		}
		return ds
	}
	d, err := r.Client.Delivery.Get(ctx, e.DeliveryID)
	if err != nil {
		return nil // purged, or not this viewer's
	}
	return []*ent.Delivery{d}
}
