package delivery_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/storage/dbtest"
	"github.com/adal-relay/adal/viewer"
)

// TestStoreBatchBeyondOneStatement stores a batch whose deliveries need more bind parameters than PostgreSQL
// takes in one statement (65,535): a full intake batch for a server with many recipients. It must be stored
// whole, not refused.
func TestStoreBatchBeyondOneStatement(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t)
	ctx := viewer.SystemContext(t.Context())
	svc := delivery.New(delivery.Config{Billing: billing.New(db.Dialect, time.Now)})
	const requests, recipients = 256, 25 // 6,400 deliveries: ~90,000 parameters in one insert
	plan, err := db.Client.Plan.Create().SetName("p-" + hexID()).SetMonthlyCredits(requests).SetRetentionDays(7).
		SetMaxServers(1).SetMaxRecipientsPerServer(recipients).Save(ctx)
	require.NoError(t, err)
	tn, err := db.Client.Tenant.Create().SetName("t").SetPlanID(plan.ID).SetCreditBalance(requests).Save(ctx)
	require.NoError(t, err)
	srv, err := db.Client.Server.Create().SetTenantID(tn.ID).SetName("s").SetInboundKey(hexID()).Save(ctx)
	require.NoError(t, err)
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
