package inbound

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/storage/dbtest"
	"github.com/adal-relay/adal/viewer"
)

// BenchmarkServers reads an intake batch's servers — 25 servers with one recipient each — as a committer
// does, inside a transaction. ns/op is per batch.
func BenchmarkServers(b *testing.B) {
	db := dbtest.Open(b)
	ctx := viewer.SystemContext(b.Context())
	plan, err := db.Client.Plan.Create().SetName("p").SetMonthlyCredits(0).SetRetentionDays(7).
		SetMaxServers(1).SetMaxRecipientsPerServer(1).Save(ctx)
	require.NoError(b, err)
	var batch []*pendingAccept
	for i := range 25 {
		tn, err := db.Client.Tenant.Create().SetName("t").SetPlanID(plan.ID).Save(ctx)
		require.NoError(b, err)
		key := fmt.Sprintf("key-%d", i)
		srv, err := db.Client.Server.Create().SetTenantID(tn.ID).SetName("s").SetInboundKey(key).Save(ctx)
		require.NoError(b, err)
		_, err = db.Client.Recipient.Create().SetTenantID(tn.ID).SetServerID(srv.ID).SetName("r").
			SetMethod(recipient.MethodDIRECT_HTTP).SetURL("http://127.0.0.1:1/").Save(ctx)
		require.NoError(b, err)
		batch = append(batch, &pendingAccept{key: key})
	}
	bt := &batcher{postgres: db.Postgres()}
	b.ReportAllocs()
	for b.Loop() {
		tx, err := db.Client.Tx(ctx)
		require.NoError(b, err)
		got, err := bt.servers(ctx, tx.Client(), batch)
		require.NoError(b, err)
		require.Len(b, got, 25)
		_ = tx.Rollback()
	}
}
