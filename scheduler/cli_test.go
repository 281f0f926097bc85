package scheduler_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/scheduler"
	"github.com/adal-relay/adal/viewer"
)

// These tests drive the CLI lane's claim and release statements directly: no CLI is attached, so the running
// engine claims nothing of its own.

// cliBundle is a process with a tenant for CLI recipients.
type cliBundle struct{ relaytest.Fixture }

func setupCLI(t *testing.T) cliBundle { return cliBundle{relaytest.StartFixture(t, 100)} }

func (b cliBundle) cliDelivery(t *testing.T, requestID int) *ent.Delivery {
	t.Helper()
	d, err := b.Env.DB.Client.Delivery.Query().Where(entdelivery.RequestID(requestID)).Only(viewer.SystemContext(t.Context()))
	require.NoError(t, err)
	return d
}

// claim runs the CLI lane's claim at now, of up to 10 deliveries for an owner "cli:test:…", with the recipients
// ready.
func (b cliBundle) claim(t *testing.T, now time.Time, ready ...scheduler.CLIReady) []delivery.Claim {
	t.Helper()
	claims, err := scheduler.ClaimCLIForTest(viewer.SystemContext(t.Context()), b.Env.DB.DB, now, 10, "cli:test:", ready...)
	require.NoError(t, err)
	return claims
}

func TestClaimHoldsBacklogBackUnlessPendingOnConnect(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	off, recOff := b.Env.NewCLIRecipient(b.Tenant, false)
	on, recOn := b.Env.NewCLIRecipient(b.Tenant, true)
	reqOff, reqOn := b.Env.Accept(off.Key), b.Env.Accept(on.Key)
	require.True(t, b.cliDelivery(t, reqOff).Backlog)
	require.True(t, b.cliDelivery(t, reqOn).Backlog)

	later := time.Now().UTC().Add(time.Minute)
	claims := b.claim(t, later, scheduler.CLIReady{RecipientID: recOff, Since: later}, scheduler.CLIReady{RecipientID: recOn, Since: later})
	require.Len(t, claims, 1, "only the server that delivers pending requests on connect gives up its backlog")
	require.Equal(t, b.cliDelivery(t, reqOn).ID, claims[0].DeliveryID)
	require.Equal(t, 1, claims[0].Attempt)
	require.Regexp(t, `^cli:test:[0-9a-f]{32}$`, claims[0].Owner)

	// A delivery created after the CLI attached is not backlog for it, whatever its flag says (the heartbeat
	// that sets the flag is eventually consistent).
	long := time.Now().UTC().Add(-time.Hour)
	claims = b.claim(t, later, scheduler.CLIReady{RecipientID: recOff, Since: long})
	require.Len(t, claims, 1)
	require.Equal(t, b.cliDelivery(t, reqOff).ID, claims[0].DeliveryID)
	d := b.cliDelivery(t, reqOff)
	require.Equal(t, entdelivery.StatusIN_PROGRESS, d.Status)
	require.False(t, d.Backlog)
}

func TestClaimTakesOnlyAttachedActiveCLIRecipients(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	srv, rec := b.Env.NewCLIRecipient(b.Tenant, true)
	_, other := b.Env.NewCLIRecipient(b.Tenant, true)
	req := b.Env.Accept(srv.Key)
	later := time.Now().UTC().Add(time.Minute)

	claims := b.claim(t, later, scheduler.CLIReady{RecipientID: other, Since: later})
	require.Empty(t, claims, "not attached")

	var out struct{ PauseRecipient struct{ State string } }
	b.Env.MustGraphQL(b.Tenant.Owner, `mutation($id: ID!){ pauseRecipient(id: $id){ state } }`, map[string]any{"id": strconv.Itoa(rec)}, &out)
	claims = b.claim(t, later, scheduler.CLIReady{RecipientID: rec, Since: later})
	require.Empty(t, claims, "paused")
	require.Equal(t, entdelivery.StatusPENDING, b.cliDelivery(t, req).Status)
	require.Zero(t, b.cliDelivery(t, req).AttemptCount)
}

func TestReleaseUndoesAClaim(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	ctx := viewer.SystemContext(t.Context())
	srv, rec := b.Env.NewCLIRecipient(b.Tenant, true)
	req := b.Env.Accept(srv.Key)
	later := time.Now().UTC().Add(time.Minute)
	claims := b.claim(t, later, scheduler.CLIReady{RecipientID: rec, Since: later})
	require.Len(t, claims, 1)

	stale := claims[0]
	stale.Owner = "cli:test:someone-else"
	require.NoError(t, scheduler.ReleaseCLI(ctx, b.Env.DB.DB, stale))
	require.Equal(t, entdelivery.StatusIN_PROGRESS, b.cliDelivery(t, req).Status, "another lease is not released")

	require.NoError(t, scheduler.ReleaseCLI(ctx, b.Env.DB.DB, claims[0]))
	d := b.cliDelivery(t, req)
	require.Equal(t, entdelivery.StatusPENDING, d.Status)
	require.Zero(t, d.AttemptCount)
	require.Nil(t, d.FirstAttemptAt)
	require.Empty(t, d.LeaseOwner)
}
