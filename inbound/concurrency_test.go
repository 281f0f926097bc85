package inbound_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/ledgerentry"
	"github.com/adal-relay/adal/ent/request"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/viewer"
)

// TestConcurrentIntakeNeverOverdraws: 100 webhooks at once against 20 credits. Exactly 20 are accepted, the
// balance ends at 0 and never below, the ledger sums to the balance, and every answer matches what is stored.
func TestConcurrentIntakeNeverOverdraws(t *testing.T) {
	t.Parallel()
	const credits, posts = 20, 100
	env, tn, srv := relaytest.StartTenantServer(t, "rush", credits)
	// CLI recipients with no CLI attached: deliveries stay PENDING, so the counts below are stable.
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "CLI"})
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "CLI"})

	type answer struct {
		status    int
		requestID string
	}
	answers := make([]answer, posts)
	var wg sync.WaitGroup
	start := make(chan struct{})
	client := env.Server.Client()
	for i := range posts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, err := client.Post(env.Server.URL+"/in/"+srv.Key+"/n/"+strconv.Itoa(i), "application/json",
				strings.NewReader(fmt.Sprintf(`{"n":%d}`, i)))
			if err != nil {
				answers[i] = answer{status: -1}
				return
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			a := answer{status: resp.StatusCode}
			if resp.StatusCode == http.StatusAccepted {
				var body struct{ RequestID string }
				if json.Unmarshal(raw, &body) == nil {
					a.requestID = body.RequestID
				}
			}
			answers[i] = a
		}()
	}
	close(start)
	wg.Wait()

	var acceptedIDs []string
	counts := map[int]int{}
	for _, a := range answers {
		counts[a.status]++
		if a.status == http.StatusAccepted {
			require.NotEmpty(t, a.requestID, "a 202 names its request")
			acceptedIDs = append(acceptedIDs, a.requestID)
		}
	}
	require.Equal(t, map[int]int{http.StatusAccepted: credits, http.StatusPaymentRequired: posts - credits}, counts,
		"exactly the credits' worth accepted, the rest refused for lack of credit, nothing else")

	ctx := viewer.SystemContext(t.Context())
	db := env.DB.Client
	tid := relaytest.RowID(t, tn.ID)
	tenant, err := db.Tenant.Get(ctx, tid)
	require.NoError(t, err)
	require.EqualValues(t, 0, tenant.CreditBalance)

	entries, err := db.LedgerEntry.Query().Where(ledgerentry.TenantID(tid)).Order(ledgerentry.ByID()).All(ctx)
	require.NoError(t, err)
	var sum int64
	debits := 0
	for _, e := range entries {
		sum += e.Amount
		require.GreaterOrEqual(t, e.BalanceAfter, int64(0), "no entry ever records a negative balance")
		require.Equal(t, sum, e.BalanceAfter, "entry %d: balance after is the running sum", e.ID)
		if e.Reason == ledgerentry.ReasonREQUEST_ACCEPTED {
			debits++
			require.EqualValues(t, -1, e.Amount)
		}
	}
	require.Equal(t, tenant.CreditBalance, sum, "the ledger sums to the balance")
	require.Equal(t, credits, debits)

	stored, err := db.Request.Query().Where(request.TenantID(tid)).IDs(ctx)
	require.NoError(t, err)
	storedIDs := make([]string, len(stored))
	for i, id := range stored {
		storedIDs[i] = strconv.Itoa(id)
	}
	sort.Strings(storedIDs)
	sort.Strings(acceptedIDs)
	require.Equal(t, acceptedIDs, storedIDs, "stored requests are exactly the accepted ones: a 402 stored nothing")

	nd, err := db.Delivery.Query().Where(delivery.TenantID(tid)).Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 2*credits, nd, "deliveries only for accepted requests, one per recipient")
}
