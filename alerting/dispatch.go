package alerting

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	entsql "entgo.io/ent/dialect/sql"

	"github.com/adal-relay/adal/alert"
	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/alertsubscription"
	"github.com/adal-relay/adal/ent/pendingalert"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/ent/server"
	"github.com/adal-relay/adal/routing"
	"github.com/adal-relay/adal/startstop"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/viewer"
)

// Start runs the dispatcher until Stop or ctx ends.
func (s *Service) Start(ctx context.Context) error {
	return s.Run(ctx, nil, func(ctx context.Context) {
		ctx = viewer.SystemContext(ctx)
		ticker := time.NewTicker(s.cfg.Interval)
		defer ticker.Stop()
		for {
			s.run(ctx)
			if !startstop.Wait(ctx, ticker.C, s.wake) {
				return
			}
		}
	})
}

// run marks the tenants intake refused for want of credit (every process: the refusals were seen here), then,
// on the leader, turns the due events into alerts, a batch per transaction until none is left.
func (s *Service) run(ctx context.Context) {
	s.markExhausted(ctx)
	if !s.cfg.Leader.IsLeader() {
		return
	}
	for ctx.Err() == nil {
		n, err := s.dispatch(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.cfg.Logger.Error("dispatch alerts", "err", err)
			}
			return
		}
		if n < batch {
			return
		}
	}
}

// markExhausted passes the refusals heard since the last run to billing, which records a credits.exhausted
// event for a tenant whose refusals just began. A mark that fails is dropped: the next refusal raises it again.
func (s *Service) markExhausted(ctx context.Context) {
	s.mu.Lock()
	tenants := make([]int, 0, len(s.noCredit))
	for id := range s.noCredit {
		tenants = append(tenants, id)
	}
	clear(s.noCredit)
	s.mu.Unlock()
	slices.Sort(tenants)
	marked := false
	for _, id := range tenants {
		err := storage.InTx(ctx, s.cfg.DB.Client, func(ctx context.Context, tx *ent.Client) error {
			ok, err := s.cfg.Billing.MarkExhausted(ctx, tx, id)
			marked = marked || ok
			return err
		})
		if err != nil {
			if ctx.Err() == nil {
				s.cfg.Logger.Error("mark credits exhausted", "tenant", id, "err", err)
			}
		}
	}
	if marked && s.cfg.Leader.IsLeader() {
		s.Wake()
	}
}

// lockDue locks the events a dispatch takes until it commits, skipping those another dispatch holds (a leader
// that just lost its lock may still be at it). SQLite's one writer needs no lock.
var lockDue = storage.PerDialect[func(*entsql.Selector)]{
	Postgres: func(s *entsql.Selector) { s.ForUpdate(entsql.WithLockAction(entsql.SkipLocked)) },
	SQLite:   func(*entsql.Selector) {},
}

// dispatch turns a batch of due events into alerts in one transaction, and reports how many it took.
func (s *Service) dispatch(ctx context.Context) (int, error) {
	var n int
	err := storage.InTx(ctx, s.cfg.DB.Client, func(ctx context.Context, tx *ent.Client) error {
		now := s.cfg.Now()
		q := tx.PendingAlert.Query().Where(pendingalert.DueAtLTE(now)).
			Order(ent.Asc(pendingalert.FieldDueAt), ent.Asc(pendingalert.FieldID)).Limit(batch)
		q.Modify(lockDue.For(s.cfg.DB))
		events, err := q.All(ctx)
		if err != nil {
			return fmt.Errorf("read alert events: %w", err)
		}
		n = len(events)
		var tenants []int
		byTenant := map[int][]*ent.PendingAlert{}
		for _, e := range events {
			if _, ok := byTenant[e.TenantID]; !ok {
				tenants = append(tenants, e.TenantID)
			}
			byTenant[e.TenantID] = append(byTenant[e.TenantID], e)
		}
		for _, id := range tenants {
			if err := s.tenantEvents(ctx, tx, id, byTenant[id], now); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}

// target is where a tenant's alerts go: its server of alerts, the recipients of its subscriptions, and which
// formats the subscriptions of each event want.
type target struct {
	tenant     *ent.Tenant
	srv        *ent.Server
	recipients []*ent.Recipient
	formats    map[alert.Type][]Format
	planDays   int
}

// tenantEvents turns one tenant's events into alerts. Events about the recipients of its alerts are dropped
// (an alert failing to reach a subscription would otherwise raise alerts about itself), and so are all of a
// tenant without subscriptions. delivery.failed events wait until their recipient's last such alert is an hour
// old, then go out as one alert that counts them.
func (s *Service) tenantEvents(ctx context.Context, tx *ent.Client, tenantID int, events []*ent.PendingAlert, now time.Time) error {
	t, err := s.target(ctx, tx, tenantID)
	if err != nil {
		return err
	}
	var done []int
	if t == nil {
		for _, e := range events {
			done = append(done, e.ID)
		}
		return deleteEvents(ctx, tx, done)
	}
	recs := map[int]*ent.Recipient{}
	var failedOf []int // recipients with delivery.failed events, in order of first event
	failed := map[int][]*ent.PendingAlert{}
	for _, e := range events {
		var rec *ent.Recipient
		if e.RecipientID != nil {
			if rec, err = recipientOf(ctx, tx, recs, *e.RecipientID); err != nil {
				return err
			}
			if rec == nil || rec.Edges.Server.Kind == server.KindALERTS {
				done = append(done, e.ID)
				continue
			}
		}
		if alert.Type(e.Type) == alert.DeliveryFailed {
			if _, ok := failed[rec.ID]; !ok {
				failedOf = append(failedOf, rec.ID)
			}
			failed[rec.ID] = append(failed[rec.ID], e)
			continue
		}
		a, err := eventAlert(e, t.tenant, rec)
		if err != nil {
			return err
		}
		if err := s.send(ctx, tx, t, a); err != nil {
			return err
		}
		done = append(done, e.ID)
	}
	for _, id := range failedOf {
		if err := s.failures(ctx, tx, t, recs[id], failed[id], now); err != nil {
			return err
		}
	}
	return deleteEvents(ctx, tx, done)
}

// failures sends one delivery.failed alert about rec counting all its failures not yet told, unless its last
// was less than FailureWindow ago: then the events wait for the window's end.
func (s *Service) failures(ctx context.Context, tx *ent.Client, t *target, rec *ent.Recipient, events []*ent.PendingAlert, now time.Time) error {
	if len(t.formats[alert.DeliveryFailed]) == 0 { // nobody listens: nothing to tell, no hour to start
		ids := make([]int, len(events))
		for i, e := range events {
			ids[i] = e.ID
		}
		return deleteEvents(ctx, tx, ids)
	}
	if last := rec.FailureAlertedAt; last != nil && now.Before(last.Add(FailureWindow)) {
		ids := make([]int, len(events))
		for i, e := range events {
			ids[i] = e.ID
		}
		return tx.PendingAlert.Update().Where(pendingalert.IDIn(ids...)).SetDueAt(last.Add(FailureWindow)).Exec(ctx)
	}
	// All of the recipient's due failures, beyond this batch too, so that the count is whole.
	all, err := tx.PendingAlert.Query().
		Where(pendingalert.RecipientID(rec.ID), pendingalert.Type(string(alert.DeliveryFailed)), pendingalert.DueAtLTE(now)).
		Order(ent.Asc(pendingalert.FieldOccurredAt), ent.Asc(pendingalert.FieldID)).All(ctx)
	if err != nil {
		return fmt.Errorf("read failures of recipient %d: %w", rec.ID, err)
	}
	a, err := failureAlert(all, t.tenant, rec)
	if err != nil {
		return err
	}
	if err := s.send(ctx, tx, t, a); err != nil {
		return err
	}
	if err := tx.Recipient.UpdateOneID(rec.ID).SetFailureAlertedAt(now).Exec(ctx); err != nil {
		return fmt.Errorf("recipient %d: %w", rec.ID, err)
	}
	ids := make([]int, len(all))
	for i, e := range all {
		ids[i] = e.ID
	}
	return deleteEvents(ctx, tx, ids)
}

// target reads where the tenant's alerts go; nil when it has no subscription.
func (s *Service) target(ctx context.Context, tx *ent.Client, tenantID int) (*target, error) {
	subs, err := tx.AlertSubscription.Query().Where(alertsubscription.TenantID(tenantID)).
		WithRecipient(func(q *ent.RecipientQuery) { q.Where(recipient.DeletedAtIsNil()) }).
		Order(ent.Asc(alertsubscription.FieldID)).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("read alert subscriptions: %w", err)
	}
	t := &target{formats: map[alert.Type][]Format{}}
	for _, sub := range subs {
		r := sub.Edges.Recipient
		if r == nil {
			continue
		}
		t.recipients = append(t.recipients, r)
		for _, e := range sub.Events {
			if f := Format(sub.Format); !slices.Contains(t.formats[alert.Type(e)], f) {
				t.formats[alert.Type(e)] = append(t.formats[alert.Type(e)], f)
			}
		}
	}
	if len(t.recipients) == 0 {
		return nil, nil
	}
	if t.srv, err = tx.Server.Get(ctx, t.recipients[0].ServerID); err != nil {
		return nil, fmt.Errorf("read server of alerts: %w", err)
	}
	if t.tenant, err = tx.Tenant.Get(ctx, tenantID); err != nil {
		return nil, fmt.Errorf("read tenant: %w", err)
	}
	plan, err := billing.PlanOf(ctx, tx, tenantID)
	if err != nil {
		return nil, err
	}
	t.planDays = plan.RetentionDays
	return t, nil
}

// send stores the alert once per format its event's subscriptions want, each a request of the server of
// alerts that the subscriptions' filters route; it costs nothing.
func (s *Service) send(ctx context.Context, tx *ent.Client, t *target, a Alert) error {
	for _, f := range t.formats[a.Type] {
		body, err := a.Body(f)
		if err != nil {
			return err
		}
		header := http.Header{}
		header.Set("Content-Type", "application/json")
		header.Set(headerType, string(a.Type))
		header.Set(headerFormat, formatHeader(f))
		_, _, err = s.cfg.Delivery.StoreFree(ctx, tx, t.srv, t.recipients, delivery.NewRequest{
			Method: http.MethodPost, Header: header, Body: body,
		}, routing.NewKey(), t.planDays)
		if err != nil {
			return fmt.Errorf("store %s alert: %w", a.Type, err)
		}
	}
	return nil
}

// recipientOf reads a recipient with its server, once per dispatch; nil when there is none.
func recipientOf(ctx context.Context, tx *ent.Client, seen map[int]*ent.Recipient, id int) (*ent.Recipient, error) {
	if r, ok := seen[id]; ok {
		return r, nil
	}
	r, err := tx.Recipient.Query().Where(recipient.ID(id)).WithServer().Only(ctx)
	if ent.IsNotFound(err) {
		seen[id] = nil
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read recipient %d: %w", id, err)
	}
	seen[id] = r
	return r, nil
}

func deleteEvents(ctx context.Context, tx *ent.Client, ids []int) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := tx.PendingAlert.Delete().Where(pendingalert.IDIn(ids...)).Exec(ctx); err != nil {
		return fmt.Errorf("delete alert events: %w", err)
	}
	return nil
}

// decode reads an event's data into v.
func decode(e *ent.PendingAlert, v any) error {
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("alert event %d data: %w", e.ID, err)
	}
	return nil
}
