package billing

import (
	"context"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/viewer"
)

// Empty reports whether the installation has neither a plan nor a tenant: a first run, before any operator
// has set anything up, when the server offers a sign-in link instead of asking for a token.
func Empty(ctx context.Context, client *ent.Client) (bool, error) {
	const op = "billing.Empty"
	ctx = viewer.SystemContext(ctx)
	plans, err := client.Plan.Query().Exist(ctx)
	if err != nil {
		return false, storage.Err(op, "plan", err)
	}
	if plans {
		return false, nil
	}
	tenants, err := client.Tenant.Query().Exist(ctx)
	if err != nil {
		return false, storage.Err(op, "tenant", err)
	}
	return !tenants, nil
}
