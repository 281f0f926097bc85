package billing_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/storage/dbtest"
)

// An installation is empty until it has a plan (and so, a tenant can follow).
func TestEmpty(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t)
	empty, err := billing.Empty(t.Context(), db.Client)
	require.NoError(t, err)
	require.True(t, empty, "a fresh database")

	newLedgerTenant(t, db, billing.New(db.Dialect, nil), 5)
	empty, err = billing.Empty(t.Context(), db.Client)
	require.NoError(t, err)
	require.False(t, empty, "with a plan and a tenant")
}
