package bench

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/adal-relay/adal/eventtype"
	"github.com/adal-relay/adal/storage/dbtest"
	"github.com/adal-relay/adal/transform"
)

// TestMemoryScenarios runs, small, the scenarios that hold memory to its budgets: dispatch and backlog (the
// same burn-down at two sizes, the larger's peak RSS set beside the smaller's) and cli (the real adal binary,
// built here, draining a backlog and then live traffic to the receiver) and graphql (a tenant's worst query,
// from several connections at once). Each must finish with its ledger
// balanced — a row is void when a request answered 202 did not reach the receiver, or one never published did
// — and with the peak RSS it is judged by read. The budgets themselves are the bench's to judge, at full size.
// The bench runs on PostgreSQL only.
func TestMemoryScenarios(t *testing.T) {
	url := os.Getenv(dbtest.EnvURL)
	if !strings.HasPrefix(url, "postgres") {
		t.Skipf("the bench runs on PostgreSQL: set %s", dbtest.EnvURL)
	}
	rows, err := Run(t.Context(), Config{
		DatabaseURL: url,
		Scenarios:   []string{"dispatch", "backlog", "cli", "graphql"},
		Duration:    time.Second,
		// Sizes for a test: the burn-downs a few seconds, the CLI a few hundred deliveries.
		DispatchDeliveries: 300, BacklogDeliveries: 3000, CLIBacklog: 200, CLIRate: 50, GraphQLClients: 4,
		Out: io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Row{}
	for _, r := range rows {
		byName[r.Scenario] = r
	}
	for _, name := range []string{"dispatch", "backlog", "cli", "graphql"} {
		r, ok := byName[name]
		if !ok {
			t.Fatalf("no %s row in %+v", name, rows)
		}
		if r.Void != "" {
			t.Errorf("%s is void: %s", name, r.Void)
		}
		if r.PeakRSS <= 0 {
			t.Errorf("%s: the server's peak RSS was not read", name)
		}
		if k := r.Cost; k.Units <= 0 || !k.SQLOK || !k.WALOK || !k.HeapOK || k.Allocs == 0 || !k.CPUOK {
			t.Errorf("%s: cost %q not read whole: %+v", name, k.Format(), k)
		}
	}
	if k := byName["dispatch"].Cost; k.Unit != "attempt" || k.Units != 300 || k.Statements <= 0 || k.WAL <= 0 {
		t.Errorf("dispatch: cost %+v is not that of its 300 attempts", k)
	}
	if r := byName["cli"]; !strings.HasPrefix(r.Figure, "CLI peak RSS ") || strings.HasPrefix(r.Figure, "CLI peak RSS 0 MiB") {
		t.Errorf("cli: figure %q does not give the CLI's peak RSS", r.Figure)
	}
	if r := byName["cli"]; !strings.Contains(r.Detail, "published 200 = delivered 200 + missing 0; duplicates 0") {
		t.Errorf("cli: the backlog's 200 requests were not each delivered once through the CLI: %s", r.Detail)
	}
	if r := byName["cli"]; !strings.Contains(r.Detail, "published 50 = delivered 50 + missing 0; duplicates 0") {
		t.Errorf("cli: the live second's 50 requests were not each delivered once through the CLI: %s", r.Detail)
	}
	if r := byName["graphql"]; !strings.Contains(r.Detail, "pages of 3 bodies of 1 MiB") || strings.HasPrefix(r.Detail, "0 responses") {
		t.Errorf("graphql: the worst query (the largest page of bodies the complexity limit allows) was not answered: %s", r.Detail)
	}
	if r := byName["backlog"]; !strings.Contains(r.Detail, "3000 attempts") || !strings.Contains(r.Detail, "3000 succeeded") {
		t.Errorf("backlog: not every one of its 3000 deliveries was attempted once and succeeded: %s", r.Detail)
	}
}

// TestNoisyScenario runs the noisy scenario small: both phases of the quiet tenant delivered exactly once, the
// noisy tenant never beyond half the workers, and the ratio of the p99s read.
func TestNoisyScenario(t *testing.T) {
	url := os.Getenv(dbtest.EnvURL)
	if !strings.HasPrefix(url, "postgres") {
		t.Skipf("the bench runs on PostgreSQL: set %s", dbtest.EnvURL)
	}
	rows, err := Run(t.Context(), Config{
		DatabaseURL: url, Scenarios: []string{"noisy"}, Duration: time.Second, WarmUp: -1,
		NoisyQuietRate: 50, Out: io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("rows %+v, want the noisy one", rows)
	}
	r := rows[0]
	if r.Void != "" {
		t.Errorf("noisy is void: %s", r.Void)
	}
	if !strings.HasPrefix(r.Figure, "p99 ") || strings.HasPrefix(r.Figure, "p99 0.00×") {
		t.Errorf("noisy: figure %q gives no ratio", r.Figure)
	}
	for _, want := range []string{"alone: published 50 = delivered 50 + missing 0; duplicates 0",
		"beside: published 50 = delivered 50 + missing 0; duplicates 0"} {
		if !strings.Contains(r.Detail, want) {
			t.Errorf("noisy: %q lacks %q", r.Detail, want)
		}
	}
}

// TestSearchScenario runs the search scenario small: its row must not be void (every request of the history
// examined once by paging on, every rare one found).
func TestSearchScenario(t *testing.T) {
	url := os.Getenv(dbtest.EnvURL)
	if !strings.HasPrefix(url, "postgres") {
		t.Skipf("the bench runs on PostgreSQL: set %s", dbtest.EnvURL)
	}
	rows, err := Run(t.Context(), Config{DatabaseURL: url, Scenarios: []string{"search"}, SearchRequests: 20_000, Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Void != "" || !strings.Contains(rows[0].Detail, "20000 requests examined") {
		t.Fatalf("search: %+v", rows)
	}
}

// TestDestinationsScenario runs the destinations scenario small against the brokers running beside the tests:
// a row for HTTP and one for each broker, none void (every delivery attempted once and succeeded, and each
// place that keeps a count holding one message per delivery), the brokers' rates given as a ratio to HTTP's.
func TestDestinationsScenario(t *testing.T) {
	url := os.Getenv(dbtest.EnvURL)
	if !strings.HasPrefix(url, "postgres") {
		t.Skipf("the bench runs on PostgreSQL: set %s", dbtest.EnvURL)
	}
	rows, err := Run(t.Context(), Config{DatabaseURL: url, Scenarios: []string{"destinations"},
		DestinationDeliveries: 200, Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"destinations HTTP", "destinations RabbitMQ", "destinations NATS JetStream",
		"destinations Redis Streams", "destinations MQTT"}
	if len(rows) != len(want) {
		t.Fatalf("rows %+v, want %v", rows, want)
	}
	for i, r := range rows {
		if r.Scenario != want[i] {
			t.Errorf("row %d is %q, want %q", i, r.Scenario, want[i])
		}
		if r.Void != "" {
			t.Errorf("%s is void: %s", r.Scenario, r.Void)
		}
		if k := r.Cost; k.Unit != "attempt" || k.Units != 200 || !k.SQLOK || !k.CPUOK {
			t.Errorf("%s: cost %+v is not that of its 200 attempts", r.Scenario, k)
		}
		if !strings.Contains(r.Detail, "200 attempts") || !strings.Contains(r.Detail, "200 succeeded") {
			t.Errorf("%s: not every one of its 200 deliveries was attempted once and succeeded: %s", r.Scenario, r.Detail)
		}
		if i > 0 && !strings.Contains(r.Figure, "× HTTP)") {
			t.Errorf("%s: figure %q gives no ratio to HTTP", r.Scenario, r.Figure)
		}
	}
	for _, r := range rows[1:4] { // the brokers that keep a count
		if !strings.Contains(r.Detail, "200 messages in ") {
			t.Errorf("%s: its place was not counted: %s", r.Scenario, r.Detail)
		}
	}
}

// TestShapingScenario runs the shaping scenario small: a row for each side of intake (schema validation ENFORCE
// and none) and of dispatch (a transformation and none), none void — the validated servers typed every request
// and refused a body outside the schema, every transformed attempt arrived shaped and no other did, every
// delivery attempted once —, each side's cost read over both its runs and the feature's rows given as ratios.
func TestShapingScenario(t *testing.T) {
	url := os.Getenv(dbtest.EnvURL)
	if !strings.HasPrefix(url, "postgres") {
		t.Skipf("the bench runs on PostgreSQL: set %s", dbtest.EnvURL)
	}
	// Few workers: a transformation's time limit is on the clock, and hundreds of runs at once on a small, busy
	// machine overrun it, which voids the row (the full-size run is where that is reported).
	rows, err := Run(t.Context(), Config{DatabaseURL: url, Scenarios: []string{"shaping"}, Duration: time.Second,
		WarmUp: -1, ShapingRate: 100, ShapingDeliveries: 200, DispatchWorkers: 16, Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name, unit string
		units      int64
	}{
		{"shaping intake plain", "request", 200}, {"shaping intake ENFORCE", "request", 200},
		{"shaping dispatch plain", "attempt", 400}, {"shaping dispatch transform", "attempt", 400},
		{"shaping dispatch script", "attempt", 400},
	}
	if len(rows) != len(want) {
		t.Fatalf("rows %+v, want %v", rows, want)
	}
	for i, r := range rows {
		w := want[i]
		if r.Scenario != w.name {
			t.Errorf("row %d is %q, want %q", i, r.Scenario, w.name)
		}
		if r.Void != "" {
			t.Errorf("%s is void: %s", r.Scenario, r.Void)
		}
		if k := r.Cost; k.Unit != w.unit || k.Units != w.units || !k.SQLOK || !k.CPUOK || k.CPU <= 0 {
			t.Errorf("%s: cost %+v is not that of its two runs' %d %ss", r.Scenario, k, w.units, w.unit)
		}
		if r.CPU == "" || !strings.Contains(r.Load, ", ") {
			t.Errorf("%s: cores busy %q or load %q not read over both runs", r.Scenario, r.CPU, r.Load)
		}
		if i != 0 && i != 2 && (!strings.Contains(r.Figure, "× without)") || !strings.Contains(r.Target, "× without (")) {
			t.Errorf("%s: figure %q or target %q gives no ratio", r.Scenario, r.Figure, r.Target)
		}
	}
	if d := rows[1].Detail; !strings.Contains(d, `answered 422 at "/currency"`) {
		t.Errorf("intake ENFORCE: a body outside the schema was not refused: %s", d)
	}
	for _, r := range rows[3:] {
		if !strings.Contains(r.Detail, "400 arrived shaped") {
			t.Errorf("%s: not every attempt arrived transformed: %s", r.Scenario, r.Detail)
		}
	}
}

// TestShapingFixtures: without a database, the shaping scenario's body is 1 KiB and follows its schema, the
// invalid one fails it at /currency, and its transformation compiles.
func TestShapingFixtures(t *testing.T) {
	sch, err := eventtype.CompileSchema([]byte(shapingSchema))
	if err != nil {
		t.Fatal(err)
	}
	body := shapingBody()
	if typ := (eventtype.Source{JSONPath: "type"}).TypeOf(nil, body); len(body) != 1024 || typ != shapingType {
		t.Errorf("body of %d B, typed %q", len(body), typ)
	} else if err := sch.Validate(body); err != nil {
		t.Errorf("the body does not follow the schema: %v", err)
	}
	var verr *eventtype.ValidationError
	if err := sch.Validate(shapingInvalid()); !errors.As(err, &verr) || verr.Pointer != "/currency" {
		t.Errorf("the invalid body: %v", err)
	}
	for _, src := range []string{shapingTransform, shapingScript} {
		p, err := transform.Compile(src)
		if err != nil {
			t.Fatal(err)
		}
		in := transform.Request{Method: "POST", Path: "/", Header: http.Header{}, Body: body}
		out, _, err := p.Run(context.Background(), in, transform.Limits{})
		if err != nil || out.Header.Get(shapedHeader) != "1" || !bytes.HasPrefix(out.Body, []byte(shapedPrefix)) {
			t.Errorf("%s: %s %v, %v", src, out.Body, out.Header, err)
		}
	}
}
