package billing_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/storage/dbtest"
)

// TestRequestReferenceConformance holds the SQL rendering of a request's ledger reference, which intake on
// PostgreSQL writes, to RequestReference, on the database under test.
func TestRequestReferenceConformance(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t)
	for _, id := range []int{1, 42, 1 << 40} {
		var got string
		query := "SELECT " + billing.RequestReferenceSQL(strconv.Itoa(id))
		require.NoError(t, db.SQL.QueryRowContext(t.Context(), query).Scan(&got))
		require.Equal(t, billing.RequestReference(id), got)
	}
}
