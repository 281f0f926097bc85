package delivery_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/ledgerentry"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/storage/dbtest"
)

// TestStoreBatchBeyondOneStatement stores a batch whose deliveries need more bind parameters than PostgreSQL
// takes in one statement (65,535): a full intake batch for a server with many recipients. It must be stored
// whole, not refused.
func TestStoreBatchBeyondOneStatement(t *testing.T) {
	t.Parallel()
	db, ctx := dbtest.OpenAsSystem(t)
	svc := delivery.New(delivery.Config{Billing: billing.New(db.Dialect, time.Now)})
	const requests, recipients = 256, 25 // 6,400 deliveries: ~90,000 parameters in one insert
	plan := newPlan(t, ctx, db, requests, 1, recipients)
	tn := newTenant(t, ctx, db, plan.ID, requests)
	srv := newServer(t, ctx, db, tn.ID)
	builders := make([]*ent.RecipientCreate, recipients)
	for i := range builders {
		builders[i] = db.Client.Recipient.Create().SetTenantID(tn.ID).SetServerID(srv.ID).SetName("r").
			SetMethod(recipient.MethodDIRECT_HTTP).SetURL("http://127.0.0.1:1/")
	}
	recs, err := db.Client.Recipient.CreateBulk(builders...).Save(ctx)
	require.NoError(t, err)
	items := make([]delivery.Incoming, requests)
	for i := range items {
		items[i] = delivery.Incoming{Server: srv, Recipients: recs, Key: hexID(),
			Request: delivery.NewRequest{Method: http.MethodPost, Header: http.Header{}, Body: []byte("{}")}}
	}
	stored, err := svc.StoreBatch(ctx, db.Client, items, billing.ReasonRequestAccepted, delivery.Handoff{})
	require.NoError(t, err)
	for i, s := range stored {
		require.NoError(t, s.Err, "item %d", i)
		require.Len(t, s.Deliveries, recipients, "item %d", i)
	}
	n, err := db.Client.Delivery.Query().Count(ctx)
	require.NoError(t, err)
	require.Equal(t, requests*recipients, n)
}

// TestStoreBatchStoresWhatItReturns: the requests and deliveries StoreBatch returns are the rows as the
// database then holds them, field for field — pending and handed-off deliveries, a server without recipients
// (its request is FAILED at once), headers or none, an empty body, a replay's origin — on whichever statement
// the dialect uses.
func TestStoreBatchStoresWhatItReturns(t *testing.T) {
	t.Parallel()
	db, ctx := dbtest.OpenAsSystem(t)
	now := time.Now().UTC().Truncate(time.Microsecond) // what both databases keep of a time
	svc := delivery.New(delivery.Config{Billing: billing.New(db.Dialect, func() time.Time { return now }),
		Dialect: db.Dialect, Now: func() time.Time { return now },
		CLIConnected: func(*ent.Recipient, time.Time) bool { return false }})
	plan := newPlan(t, ctx, db, 0, 2, 2)
	tn := newTenant(t, ctx, db, plan.ID, 10)
	three := 3
	withRecipients, err := db.Client.Server.Create().SetTenantID(tn.ID).SetName("s").SetInboundKey(hexID()).
		SetRetentionDays(three).Save(ctx)
	require.NoError(t, err)
	empty, err := db.Client.Server.Create().SetTenantID(tn.ID).SetName("e").SetInboundKey(hexID()).Save(ctx)
	require.NoError(t, err)
	direct, err := db.Client.Recipient.Create().SetTenantID(tn.ID).SetServerID(withRecipients.ID).SetName("d").
		SetMethod(recipient.MethodDIRECT_HTTP).SetURL("http://127.0.0.1:1/").SetMaxAttempts(4).
		SetRetrySchedule(recipient.RetryScheduleSTEPPED).Save(ctx)
	require.NoError(t, err)
	cli, err := db.Client.Recipient.Create().SetTenantID(tn.ID).SetServerID(withRecipients.ID).SetName("c").
		SetMethod(recipient.MethodCLI).Save(ctx)
	require.NoError(t, err)
	recs := []*ent.Recipient{direct, cli}
	in := func(body string) delivery.NewRequest {
		return delivery.NewRequest{Method: http.MethodPut, Path: "/p", Query: "a=1",
			Header: http.Header{"X-Many": {"1", "2"}, "Content-Type": {"text/plain"}}, Body: []byte(body),
			SourceAddr: "127.0.0.1:5"}
	}
	first, err := svc.StoreBatch(ctx, db.Client, []delivery.Incoming{{Server: withRecipients, Recipients: recs,
		Key: hexID(), Request: in("first")}}, billing.ReasonRequestAccepted, delivery.Handoff{})
	require.NoError(t, err)
	replayOf := first[0].Request.ID
	replay := in("again")
	replay.ReplayOf = &replayOf
	items := []delivery.Incoming{
		{Server: withRecipients, Recipients: recs, Key: hexID(), Request: in("one")},
		{Server: empty, Key: hexID(), Request: delivery.NewRequest{Method: http.MethodGet}}, // no header, no body
		{Server: withRecipients, Recipients: recs, Key: hexID(), Request: replay},
	}
	stored, err := svc.StoreBatch(ctx, db.Client, items, billing.ReasonRequestAccepted,
		delivery.Handoff{Owner: "me", Lease: time.Minute, Slots: 1})
	require.NoError(t, err)
	require.Len(t, stored, 3)
	require.Len(t, stored[0].Claimed, 1, "the one slot goes to the first direct delivery")
	require.Empty(t, stored[2].Claimed)
	require.Empty(t, stored[1].Deliveries)
	require.Equal(t, "FAILED", string(stored[1].Request.Status))
	require.Equal(t, now.Add(3*24*time.Hour), stored[0].Request.ExpiresAt, "the server's shorter retention")
	require.Equal(t, now.Add(7*24*time.Hour), stored[1].Request.ExpiresAt, "the plan's retention")
	asJSON := func(v any) string {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		return string(b)
	}
	for i, s := range stored {
		require.NoError(t, s.Err, "item %d", i)
		got, err := db.Client.Request.Get(ctx, s.Request.ID)
		require.NoError(t, err)
		require.Equal(t, asJSON(got), asJSON(s.Request), "item %d: the request as stored", i)
		require.Len(t, s.Deliveries, len(items[i].Recipients))
		for _, d := range s.Deliveries {
			got, err := db.Client.Delivery.Get(ctx, d.ID)
			require.NoError(t, err)
			require.Equal(t, asJSON(got), asJSON(d), "item %d: delivery %d as stored", i, d.ID)
		}
	}
	claimed := stored[0].Deliveries[0]
	require.Equal(t, "IN_PROGRESS", string(claimed.Status))
	require.Equal(t, "me", claimed.LeaseOwner)
	require.Equal(t, 1, claimed.AttemptCount)
	require.True(t, stored[0].Deliveries[1].Backlog, "a CLI delivery with no CLI attached is backlog")
	require.Equal(t, &replayOf, stored[2].Request.ReplayOfID)
	require.Equal(t, int64(10-4), db.Client.Tenant.GetX(ctx, tn.ID).CreditBalance)

	// One entry per request, in the order of the batch, each with the balance it left: on PostgreSQL the
	// requests' statement writes them, on SQLite billing.Settle.
	entries, err := db.Client.LedgerEntry.Query().Where(ledgerentry.TenantID(tn.ID)).Order(ledgerentry.ByID()).All(ctx)
	require.NoError(t, err)
	paid := []*ent.Request{first[0].Request, stored[0].Request, stored[1].Request, stored[2].Request}
	require.Len(t, entries, len(paid))
	for i, e := range entries {
		require.Equal(t, fmt.Sprintf("request:%d", paid[i].ID), e.Reference, "entry %d", i)
		require.Equal(t, ledgerentry.ReasonREQUEST_ACCEPTED, e.Reason, "entry %d", i)
		require.Equal(t, int64(-1), e.Amount, "entry %d", i)
		require.Equal(t, int64(10-i-1), e.BalanceAfter, "entry %d", i)
		require.True(t, now.Equal(e.CreatedAt), "entry %d at %v", i, e.CreatedAt)
	}
}

// TestStoreBatchRefusesWhatItCannotStore: a batch spanning tenants stores, per tenant, a prefix of its items
// in arrival order as far as the balance goes, and nothing for a server deleted since the caller read it —
// each refusal with its own kind, leaving no request, delivery, ledger entry or debit behind. On PostgreSQL
// the batch is stored outside any transaction, as intake stores it: its one statement locks, grants and
// writes. A handoff slot that falls to a refused item is not handed out.
func TestStoreBatchRefusesWhatItCannotStore(t *testing.T) {
	t.Parallel()
	db, ctx := dbtest.OpenAsSystem(t)
	svc := delivery.New(delivery.Config{Billing: billing.New(db.Dialect, time.Now), Dialect: db.Dialect})
	plan := newPlan(t, ctx, db, 0, 2, 1)
	tenant := func(balance int64) (*ent.Server, []*ent.Recipient) {
		tn := newTenant(t, ctx, db, plan.ID, balance)
		srv := newServer(t, ctx, db, tn.ID)
		r, err := db.Client.Recipient.Create().SetTenantID(tn.ID).SetServerID(srv.ID).SetName("r").
			SetMethod(recipient.MethodDIRECT_HTTP).SetURL("http://127.0.0.1:1/").Save(ctx)
		require.NoError(t, err)
		return srv, []*ent.Recipient{r}
	}
	poor, poorRecs := tenant(2)
	rich, richRecs := tenant(5)
	gone, err := db.Client.Server.Create().SetTenantID(rich.TenantID).SetName("gone").SetInboundKey(hexID()).Save(ctx)
	require.NoError(t, err)
	goneRecs := richRecs // read before the server was deleted
	require.NoError(t, db.Client.Server.UpdateOne(gone).SetDeletedAt(time.Now()).Exec(ctx))

	item := func(srv *ent.Server, recs []*ent.Recipient) delivery.Incoming {
		return delivery.Incoming{Server: srv, Recipients: recs, Key: hexID(),
			Request: delivery.NewRequest{Method: http.MethodPost, Header: http.Header{}, Body: []byte("{}")}}
	}
	items := []delivery.Incoming{
		item(gone, goneRecs), // 0: deleted meanwhile; its delivery takes the first slot
		item(poor, poorRecs), // 1: paid
		item(rich, richRecs), // 2: paid
		item(poor, poorRecs), // 3: paid, the poor tenant's last credit
		item(poor, poorRecs), // 4: beyond the balance
		item(rich, richRecs), // 5: paid
		item(poor, poorRecs), // 6: beyond the balance
	}
	stored, err := svc.StoreBatch(ctx, db.Client, items, billing.ReasonRequestAccepted,
		delivery.Handoff{Owner: "me", Lease: time.Minute, Slots: 2})
	require.NoError(t, err)
	require.Len(t, stored, len(items))
	want := []fault.Kind{fault.NotFound, "", "", "", fault.InsufficientCredits, "", fault.InsufficientCredits}
	claimed := 0
	for i, s := range stored {
		claimed += len(s.Claimed)
		if want[i] != "" {
			require.Equal(t, want[i], fault.KindOf(s.Err), "item %d", i)
			require.Nil(t, s.Request, "item %d", i)
			require.Empty(t, s.Deliveries, "item %d", i)
			require.Empty(t, s.Claimed, "item %d", i)
			continue
		}
		require.NoError(t, s.Err, "item %d", i)
		require.NotZero(t, s.Request.ID, "item %d", i)
		require.Len(t, s.Deliveries, 1, "item %d", i)
		require.Equal(t, s.Request.ID, s.Deliveries[0].RequestID, "item %d", i)
	}
	if db.Postgres() {
		// In arrival order: the deleted server's delivery took the first slot and is not handed out.
		require.Len(t, stored[1].Claimed, 1)
		require.Equal(t, 1, claimed)
	} else {
		require.Equal(t, 2, claimed)
	}
	requests, err := db.Client.Request.Query().Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, requests, "the paid requests only")
	deliveries, err := db.Client.Delivery.Query().Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, deliveries, "the paid requests' deliveries only")
	require.Equal(t, int64(0), db.Client.Tenant.GetX(ctx, poor.TenantID).CreditBalance)
	require.Equal(t, int64(3), db.Client.Tenant.GetX(ctx, rich.TenantID).CreditBalance)
	for _, tc := range []struct {
		tenant   int
		balances []int64
	}{{poor.TenantID, []int64{1, 0}}, {rich.TenantID, []int64{4, 3}}} {
		entries, err := db.Client.LedgerEntry.Query().Where(ledgerentry.TenantID(tc.tenant)).Order(ledgerentry.ByID()).All(ctx)
		require.NoError(t, err)
		require.Len(t, entries, len(tc.balances), "tenant %d", tc.tenant)
		for i, e := range entries {
			require.Equal(t, tc.balances[i], e.BalanceAfter, "tenant %d, entry %d", tc.tenant, i)
		}
	}
}
