package delivery

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/request"
	"github.com/adal-relay/adal/storage/dbtest"
)

// requestStatusCases are the statuses of a request's current deliveries and the request status they make.
var requestStatusCases = []struct {
	deliveries string // their statuses, space separated
	want       request.Status
}{
	{"", request.StatusFAILED}, // no recipient to go to: nothing will ever succeed
	{"PENDING", request.StatusPENDING},
	{"IN_PROGRESS", request.StatusPENDING},
	{"SUCCEEDED PENDING", request.StatusPENDING},
	{"FAILED IN_PROGRESS SUCCEEDED", request.StatusPENDING},
	{"SUCCEEDED", request.StatusDELIVERED},
	{"SUCCEEDED SUCCEEDED SUCCEEDED", request.StatusDELIVERED},
	{"FAILED", request.StatusFAILED},
	{"CANCELED", request.StatusFAILED},
	{"FAILED CANCELED", request.StatusFAILED},
	{"SUCCEEDED FAILED", request.StatusPARTIAL},
	{"CANCELED SUCCEEDED SUCCEEDED", request.StatusPARTIAL},
}

// statuses are the delivery statuses named in s; a name that is none is a mistake in the cases.
func statuses(s string) []entdelivery.Status {
	var out []entdelivery.Status
	for _, f := range strings.Fields(s) {
		if err := entdelivery.StatusValidator(entdelivery.Status(f)); err != nil {
			panic(err)
		}
		out = append(out, entdelivery.Status(f))
	}
	return out
}

func TestDeriveRequestStatusSpec(t *testing.T) {
	t.Parallel()
	for _, c := range requestStatusCases {
		require.Equal(t, c.want, DeriveRequestStatus(statuses(c.deliveries)), "deliveries %q", c.deliveries)
	}
}

// TestRequestStatusConformance holds requestStatusSQL, which derives request statuses set-wise on PostgreSQL,
// to DeriveRequestStatus: the same cases, aggregated by the database under test.
func TestRequestStatusConformance(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t)
	for _, c := range requestStatusCases {
		// The statuses are the enum's own constants, so writing them into the statement is safe.
		rows := []string{"SELECT CAST(NULL AS TEXT) AS status WHERE 1 = 0"}
		for _, s := range statuses(c.deliveries) {
			rows = append(rows, "SELECT '"+string(s)+"'")
		}
		query := "SELECT " + requestStatusSQL + " FROM (" + strings.Join(rows, " UNION ALL ") + ") AS deliveries"
		var got string
		require.NoError(t, db.SQL.QueryRowContext(t.Context(), query).Scan(&got), "deliveries %q", c.deliveries)
		require.Equal(t, string(DeriveRequestStatus(statuses(c.deliveries))), got, "deliveries %q", c.deliveries)
	}
}
