package bench

import (
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/adal-relay/adal/storage/dbtest"
)

// TestClusterScenario runs the cluster scenario small: 2 cmd/server processes (built here) burning down 300
// deliveries and offered one rate, then the kill run. No row may be void: every attempt received once,
// every request answered 202 stored with its debit, and after the kill nothing answered 202 lost and no attempt
// received twice.
func TestClusterScenario(t *testing.T) {
	url := os.Getenv(dbtest.EnvURL)
	if !strings.HasPrefix(url, "postgres") {
		t.Skipf("the bench runs on PostgreSQL: set %s", dbtest.EnvURL)
	}
	rows, err := Run(t.Context(), Config{
		DatabaseURL: url, Scenarios: []string{"cluster"}, Duration: 2 * time.Second, WarmUp: -1,
		ClusterProcesses: []int{2}, ClusterRates: []float64{200}, ClusterDeliveries: 300, Out: io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rows {
		names = append(names, r.Scenario)
		if r.Void != "" {
			t.Errorf("%s is void: %s", r.Scenario, r.Void)
		}
	}
	want := "cluster n=2 dispatch,cluster n=2 intake,cluster kill -9"
	if got := strings.Join(names, ","); got != want {
		t.Fatalf("rows %s, want %s", got, want)
	}
	// Across processes, transactions stand for statements; the bench process's allocations are not theirs.
	for _, r := range rows[:2] {
		if k := r.Cost; !k.TransactionsOK || k.TxUnits <= 0 || !k.WALOK || k.SQLOK || k.HeapOK {
			t.Errorf("%s: cost %+v", r.Scenario, k)
		}
	}
	if r := rows[2]; !strings.HasPrefix(r.Figure, "lost 0 of ") || strings.HasPrefix(r.Figure, "lost 0 of 0 ") {
		t.Errorf("kill -9: %q: requests answered 202 were lost, or none were", r.Figure)
	}
}
