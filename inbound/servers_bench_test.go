package inbound

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/storage/dbtest"
	"github.com/adal-relay/adal/viewer"
)

// BenchmarkServers reads an intake batch's servers — 25 servers with one recipient each — as a committer
// does: on PostgreSQL on its own, on SQLite inside the batch's transaction. ns/op is per batch.
func BenchmarkServers(b *testing.B) {
	db, ctx, keys := benchServers(b, 25)
	b.ReportAllocs()
	for b.Loop() {
		if db.Postgres() {
			got, _, err := serversPostgres(ctx, db.Client, keys, time.Now())
			require.NoError(b, err)
			require.Len(b, got, 25)
			continue
		}
		tx, err := db.Client.Tx(ctx)
		require.NoError(b, err)
		got, err := serversSQLite(ctx, tx.Client(), keys, time.Now())
		require.NoError(b, err)
		require.Len(b, got, 25)
		_ = tx.Rollback()
	}
}

// benchServers opens a database holding n tenants with a server each, with one direct recipient, and plenty of
// credits; it returns it, a system context and the servers' inbound keys.
func benchServers(b *testing.B, n int) (*dbtest.DB, context.Context, []string) {
	db := dbtest.Open(b)
	ctx := viewer.SystemContext(b.Context())
	plan, err := db.Client.Plan.Create().SetName("p").SetMonthlyCredits(0).SetRetentionDays(7).
		SetMaxServers(1).SetMaxRecipientsPerServer(1).Save(ctx)
	require.NoError(b, err)
	keys := make([]string, n)
	for i := range keys {
		tn, err := db.Client.Tenant.Create().SetName("t").SetPlanID(plan.ID).SetCreditBalance(1 << 40).Save(ctx)
		require.NoError(b, err)
		keys[i] = fmt.Sprintf("key-%d", i)
		srv, err := db.Client.Server.Create().SetTenantID(tn.ID).SetName("s").SetInboundKey(keys[i]).Save(ctx)
		require.NoError(b, err)
		_, err = db.Client.Recipient.Create().SetTenantID(tn.ID).SetServerID(srv.ID).SetName("r").
			SetMethod(recipient.MethodDIRECT_HTTP).SetURL("http://127.0.0.1:1/").Save(ctx)
		require.NoError(b, err)
	}
	return db, ctx, keys
}
