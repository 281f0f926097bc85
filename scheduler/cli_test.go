package scheduler_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/ent"
	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/scheduler"
	"github.com/adal-relay/adal/viewer"
)

// These tests drive the CLI lane's claim and release statements directly: no CLI is attached, so the running
// engine claims nothing of its own.

type cliBundle struct {
	env    *relaytest.Env
	tenant relaytest.Tenant
}

func setupCLI(t *testing.T) cliBundle {
	t.Helper()
	env := relaytest.Start(t)
	return cliBundle{env: env, tenant: env.NewTenant("acme", relaytest.PlanLimits{Credits: 100})}
}

func (b cliBundle) cliDelivery(t *testing.T, requestID int) *ent.Delivery {
	t.Helper()
	d, err := b.env.DB.Client.Delivery.Query().Where(entdelivery.RequestID(requestID)).Only(viewer.SystemContext(t.Context()))
	require.NoError(t, err)
	return d
}

func TestClaimHoldsBacklogBackUnlessPendingOnConnect(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	ctx := viewer.SystemContext(t.Context())
	off, recOff := b.env.NewCLIRecipient(b.tenant, false)
	on, recOn := b.env.NewCLIRecipient(b.tenant, true)
	reqOff, reqOn := b.env.Accept(off.Key), b.env.Accept(on.Key)
	require.True(t, b.cliDelivery(t, reqOff).Backlog)
	require.True(t, b.cliDelivery(t, reqOn).Backlog)

	later := time.Now().UTC().Add(time.Minute)
	claims, err := scheduler.ClaimCLIForTest(ctx, b.env.DB.DB, later, 10, "cli:test:", scheduler.CLIReady{RecipientID: recOff, Since: later}, scheduler.CLIReady{RecipientID: recOn, Since: later})
	require.NoError(t, err)
	require.Len(t, claims, 1, "only the server that delivers pending requests on connect gives up its backlog")
	require.Equal(t, b.cliDelivery(t, reqOn).ID, claims[0].DeliveryID)
	require.Equal(t, 1, claims[0].Attempt)
	require.Regexp(t, `^cli:test:[0-9a-f]{32}$`, claims[0].Owner)

	// A delivery created after the CLI attached is not backlog for it, whatever its flag says (the heartbeat
	// that sets the flag is eventually consistent).
	long := time.Now().UTC().Add(-time.Hour)
	claims, err = scheduler.ClaimCLIForTest(ctx, b.env.DB.DB, later, 10, "cli:test:", scheduler.CLIReady{RecipientID: recOff, Since: long})
	require.NoError(t, err)
	require.Len(t, claims, 1)
	require.Equal(t, b.cliDelivery(t, reqOff).ID, claims[0].DeliveryID)
	d := b.cliDelivery(t, reqOff)
	require.Equal(t, entdelivery.StatusIN_PROGRESS, d.Status)
	require.False(t, d.Backlog)
}

func TestClaimTakesOnlyAttachedActiveCLIRecipients(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	ctx := viewer.SystemContext(t.Context())
	srv, rec := b.env.NewCLIRecipient(b.tenant, true)
	_, other := b.env.NewCLIRecipient(b.tenant, true)
	req := b.env.Accept(srv.Key)
	later := time.Now().UTC().Add(time.Minute)

	claims, err := scheduler.ClaimCLIForTest(ctx, b.env.DB.DB, later, 10, "cli:test:", scheduler.CLIReady{RecipientID: other, Since: later})
	require.NoError(t, err)
	require.Empty(t, claims, "not attached")

	var out struct{ PauseRecipient struct{ State string } }
	b.env.MustGraphQL(b.tenant.Owner, `mutation($id: ID!){ pauseRecipient(id: $id){ state } }`, map[string]any{"id": strconv.Itoa(rec)}, &out)
	claims, err = scheduler.ClaimCLIForTest(ctx, b.env.DB.DB, later, 10, "cli:test:", scheduler.CLIReady{RecipientID: rec, Since: later})
	require.NoError(t, err)
	require.Empty(t, claims, "paused")
	require.Equal(t, entdelivery.StatusPENDING, b.cliDelivery(t, req).Status)
	require.Zero(t, b.cliDelivery(t, req).AttemptCount)
}

func TestReleaseUndoesAClaim(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	ctx := viewer.SystemContext(t.Context())
	srv, rec := b.env.NewCLIRecipient(b.tenant, true)
	req := b.env.Accept(srv.Key)
	later := time.Now().UTC().Add(time.Minute)
	claims, err := scheduler.ClaimCLIForTest(ctx, b.env.DB.DB, later, 10, "cli:test:", scheduler.CLIReady{RecipientID: rec, Since: later})
	require.NoError(t, err)
	require.Len(t, claims, 1)

	stale := claims[0]
	stale.Owner = "cli:test:someone-else"
	require.NoError(t, scheduler.ReleaseCLI(ctx, b.env.DB.DB, stale))
	require.Equal(t, entdelivery.StatusIN_PROGRESS, b.cliDelivery(t, req).Status, "another lease is not released")

	require.NoError(t, scheduler.ReleaseCLI(ctx, b.env.DB.DB, claims[0]))
	d := b.cliDelivery(t, req)
	require.Equal(t, entdelivery.StatusPENDING, d.Status)
	require.Zero(t, d.AttemptCount)
	require.Nil(t, d.FirstAttemptAt)
	require.Empty(t, d.LeaseOwner)
}
