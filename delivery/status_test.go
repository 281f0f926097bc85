package delivery

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/request"
	"github.com/adal-relay/adal/storage/dbtest"
)

const (
	pending    = entdelivery.StatusPENDING
	inProgress = entdelivery.StatusIN_PROGRESS
	succeeded  = entdelivery.StatusSUCCEEDED
	failed     = entdelivery.StatusFAILED
	canceled   = entdelivery.StatusCANCELED
)

// requestStatusCases are the statuses of a request's current deliveries and the request status they make.
var requestStatusCases = []struct {
	deliveries []entdelivery.Status
	want       request.Status
}{
	{nil, request.StatusFAILED}, // no recipient to go to: nothing will ever succeed
	{[]entdelivery.Status{pending}, request.StatusPENDING},
	{[]entdelivery.Status{inProgress}, request.StatusPENDING},
	{[]entdelivery.Status{succeeded, pending}, request.StatusPENDING},
	{[]entdelivery.Status{failed, inProgress, succeeded}, request.StatusPENDING},
	{[]entdelivery.Status{succeeded}, request.StatusDELIVERED},
	{[]entdelivery.Status{succeeded, succeeded, succeeded}, request.StatusDELIVERED},
	{[]entdelivery.Status{failed}, request.StatusFAILED},
	{[]entdelivery.Status{canceled}, request.StatusFAILED},
	{[]entdelivery.Status{failed, canceled}, request.StatusFAILED},
	{[]entdelivery.Status{succeeded, failed}, request.StatusPARTIAL},
	{[]entdelivery.Status{canceled, succeeded, succeeded}, request.StatusPARTIAL},
}

func TestDeriveRequestStatusSpec(t *testing.T) {
	t.Parallel()
	for _, c := range requestStatusCases {
		require.Equal(t, c.want, DeriveRequestStatus(c.deliveries), "deliveries %v", c.deliveries)
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
		for _, s := range c.deliveries {
			rows = append(rows, "SELECT '"+string(s)+"'")
		}
		query := "SELECT " + requestStatusSQL + " FROM (" + strings.Join(rows, " UNION ALL ") + ") AS deliveries"
		var got string
		require.NoError(t, db.SQL.QueryRowContext(t.Context(), query).Scan(&got), "deliveries %v", c.deliveries)
		require.Equal(t, string(DeriveRequestStatus(c.deliveries)), got, "deliveries %v", c.deliveries)
	}
}
