package delivery_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/storage/dbtest"
	"github.com/adal-relay/adal/viewer"
)

// BenchmarkStoreBatch stores intake-sized batches — 32 requests of 1 KiB for 8 tenants, one recipient each,
// handed to the dispatcher claimed — one transaction per batch, as intake does. ns/op is per batch.
func BenchmarkStoreBatch(b *testing.B) {
	db := dbtest.Open(b)
	ctx := viewer.SystemContext(b.Context())
	svc := delivery.New(delivery.Config{Billing: billing.New(db.Dialect, time.Now), Postgres: db.Postgres(), Now: time.Now,
		CLIConnected: func(*ent.Recipient, time.Time) bool { return false }})
	const tenants, batch = 8, 32
	plan, err := db.Client.Plan.Create().SetName("p-" + hexID()).SetMonthlyCredits(0).SetRetentionDays(7).
		SetMaxServers(1).SetMaxRecipientsPerServer(1).Save(ctx)
	require.NoError(b, err)
	type target struct {
		srv *ent.Server
		rec []*ent.Recipient
	}
	targets := make([]target, tenants)
	for i := range targets {
		tn, err := db.Client.Tenant.Create().SetName("t").SetPlanID(plan.ID).SetCreditBalance(1 << 40).Save(ctx)
		require.NoError(b, err)
		srv, err := db.Client.Server.Create().SetTenantID(tn.ID).SetName("s").SetInboundKey(hexID()).Save(ctx)
		require.NoError(b, err)
		rec, err := db.Client.Recipient.Create().SetTenantID(tn.ID).SetServerID(srv.ID).SetName("r").
			SetMethod(recipient.MethodDIRECT_HTTP).SetURL("http://127.0.0.1:1/").Save(ctx)
		require.NoError(b, err)
		targets[i] = target{srv, []*ent.Recipient{rec}}
	}
	body := bytes.Repeat([]byte("x"), 1024)
	header := http.Header{"Content-Type": {"application/json"}, "User-Agent": {"bench"}}
	items := make([]delivery.Incoming, batch)
	b.ReportAllocs()
	for b.Loop() {
		for i := range items {
			tg := targets[i%tenants]
			items[i] = delivery.Incoming{Server: tg.srv, Recipients: tg.rec, Key: hexID(), ServerLocked: true,
				Request: delivery.NewRequest{Method: http.MethodPost, Header: header, Body: body, SourceAddr: "127.0.0.1"}}
		}
		err := storage.InTx(ctx, db.Client, func(ctx context.Context, tx *ent.Client) error {
			stored, err := svc.StoreBatch(ctx, tx, items, billing.ReasonRequestAccepted,
				delivery.Handoff{Owner: "bench", Lease: time.Minute, Slots: batch})
			if err == nil && len(stored[batch-1].Claimed) != 1 {
				b.Fatalf("the last request's delivery was not handed off: %+v", stored[batch-1])
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
