// Package bench measures an Adal process against its performance budgets: intake, dispatch, accept-to-delivery
// latency, retry punctuality and purge, each on a fresh PostgreSQL database, with the process running inside
// the bench so its peak memory can be read, and the load generator and the receiver in a traffic process of
// their own; the cluster scenario runs several cmd/server processes on one database instead. Every row states
// what a unit of its work cost (Cost), the figures two builds are compared on. cmd/bench is its command line.
package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/adal-relay/adal/storage"
)

// Scenarios are the scenario names in the order they run: those a run without a list runs.
var Scenarios = []string{"ingest", "dispatch", "backlog", "latency", "noisy", "punctuality", "purge", "cli", "graphql", "search", "cluster"}

// NamedScenarios run only when named, after the others: destinations needs more than PostgreSQL (the four
// brokers), and shaping is an A/B of optional features, not a budget every run checks.
var NamedScenarios = []string{"destinations", "shaping"}

// Config configures a bench run.
type Config struct {
	// DatabaseURL is a postgres:// URL of a database on the server to use; each scenario creates (and drops)
	// a database of its own next to it.
	DatabaseURL string
	Scenarios   []string
	// Duration of each measured load phase.
	Duration time.Duration
	// WarmUp is the unmeasured load that ingest and latency run first, at their first rate, on a fresh
	// database: then the tables are analyzed — as autovacuum does within a minute of a real deployment's
	// start — so the measurement sees the steady state, not plans made for empty tables. Default 3s; negative
	// skips it.
	WarmUp time.Duration

	// IngestRates are the offered rates of the 100-tenant ingest (requests/s); the highest accepted rate
	// among them is the ceiling that latency and purge run at half of.
	IngestRates []float64
	// IngestSingleRates and IngestFanoutRates are the offered rates of the single-tenant and the
	// 10-recipients-per-server ingest.
	IngestSingleRates []float64
	IngestFanoutRates []float64
	// IngestRecipients is "paused" (recipients exist but are paused, so dispatch does not compete: pure
	// intake) or "receiver" (active, delivering to the loopback receiver while intake runs).
	IngestRecipients string
	// Ceiling is the ingest ceiling to use when ingest does not run in the same invocation (requests/s).
	Ceiling float64

	DispatchDeliveries int
	// BacklogDeliveries is the backlog scenario's due deliveries, whose burn-down's memory is set beside
	// dispatch's.
	BacklogDeliveries int
	DispatchWorkers   int // ADAL_WORKERS of the dispatch process; 0 keeps the default
	// IntakeCommitters is ADAL_INTAKE_COMMITTERS of every scenario's process; 0 keeps the default.
	IntakeCommitters int

	PunctualityRows   int     // future retries in the table
	PunctualityRate   float64 // of which so many per second come due during the window
	PunctualityUnit   time.Duration
	PunctualityWindow time.Duration

	PurgeRequests int

	// NoisyRate is the noisy tenant's requests per second in the noisy scenario (each to 20 hanging
	// recipients), NoisyQuietRate the quiet tenant's.
	NoisyRate      float64
	NoisyQuietRate float64

	// CLIBacklog is how many requests the cli scenario accepts before its CLI connects, CLIRate the rate it
	// sends once connected. AdalBinary is the adal CLI to run; empty builds one from this module.
	CLIBacklog int
	CLIRate    float64
	AdalBinary string

	// GraphQLClients is how many connections the graphql scenario sends its worst query from at once.
	GraphQLClients int

	// SearchRequests is how many requests the search scenario stores on its one server.
	SearchRequests int

	// ClusterProcesses are the sizes of the cluster scenario: how many cmd/server processes share its database
	// in each run; the first is the one the others' scaling is a ratio of. ClusterRates are the offered rates
	// (requests/s, spread over the processes) its intake ceiling is looked for among, ClusterDeliveries the
	// due deliveries each run burns down. ServerBinary is the cmd/server it runs; empty builds one from this
	// module.
	ClusterProcesses  []int
	ClusterRates      []float64
	ClusterDeliveries int
	ServerBinary      string

	// DestinationDeliveries are the due deliveries the destinations scenario burns down to each destination:
	// the receiver and each broker of RabbitMQURL, NATSURL (with JetStream), RedisURL and MQTTURL.
	DestinationDeliveries                   int
	RabbitMQURL, NATSURL, RedisURL, MQTTURL string

	// ShapingRate is the offered rate (requests/s) of the shaping scenario's intake runs, with schema validation
	// and without; ShapingDeliveries the due deliveries each of its burn-downs, with a transformation and
	// without, burns down.
	ShapingRate       float64
	ShapingDeliveries int

	PgbenchClients int
	PgbenchScale   int

	// SQLBreakdown logs, after dispatch, how many of each statement the process sent.
	SQLBreakdown bool

	// CPUProfile, when set, is where a CPU profile of each scenario is written (the scenario's name is added
	// before the extension).
	CPUProfile string
	Out        io.Writer
}

func (c *Config) defaults() {
	c.WarmUp = cmp.Or(c.WarmUp, 3*time.Second)
	c.Duration = cmp.Or(c.Duration, 10*time.Second)
	if len(c.Scenarios) == 0 {
		c.Scenarios = Scenarios
	}
	if len(c.IngestRates) == 0 {
		c.IngestRates = []float64{2500, 5000, 7500, 10000}
	}
	if len(c.IngestSingleRates) == 0 {
		c.IngestSingleRates = []float64{2000, 4000}
	}
	if len(c.IngestFanoutRates) == 0 {
		c.IngestFanoutRates = []float64{1000, 2500}
	}
	c.IngestRecipients = cmp.Or(c.IngestRecipients, "paused")
	c.DispatchDeliveries = cmp.Or(c.DispatchDeliveries, 100_000)
	c.BacklogDeliveries = cmp.Or(c.BacklogDeliveries, 1_000_000)
	c.PunctualityRows = cmp.Or(c.PunctualityRows, 1_000_000)
	c.PunctualityRate = cmp.Or(c.PunctualityRate, 500)
	c.PunctualityUnit = cmp.Or(c.PunctualityUnit, 100*time.Millisecond)
	c.PunctualityWindow = cmp.Or(c.PunctualityWindow, 30*time.Second)
	c.PurgeRequests = cmp.Or(c.PurgeRequests, 100_000)
	c.NoisyRate = cmp.Or(c.NoisyRate, 10)
	c.NoisyQuietRate = cmp.Or(c.NoisyQuietRate, 100)
	c.CLIBacklog = cmp.Or(c.CLIBacklog, 5000)
	c.GraphQLClients = cmp.Or(c.GraphQLClients, 16)
	c.SearchRequests = cmp.Or(c.SearchRequests, 1_000_000)
	c.CLIRate = cmp.Or(c.CLIRate, 100)
	if len(c.ClusterProcesses) == 0 {
		c.ClusterProcesses = []int{1, 2, 4}
	}
	if len(c.ClusterRates) == 0 {
		c.ClusterRates = []float64{2500, 5000, 10000}
	}
	c.ClusterDeliveries = cmp.Or(c.ClusterDeliveries, 50_000)
	c.DestinationDeliveries = cmp.Or(c.DestinationDeliveries, 100_000)
	c.RabbitMQURL = cmp.Or(c.RabbitMQURL, defaultRabbitMQURL)
	c.NATSURL = cmp.Or(c.NATSURL, defaultNATSURL)
	c.RedisURL = cmp.Or(c.RedisURL, defaultRedisURL)
	c.MQTTURL = cmp.Or(c.MQTTURL, defaultMQTTURL)
	c.ShapingRate = cmp.Or(c.ShapingRate, 15000)
	c.ShapingDeliveries = cmp.Or(c.ShapingDeliveries, 50_000)
	c.PgbenchClients = cmp.Or(c.PgbenchClients, 16)
	c.PgbenchScale = cmp.Or(c.PgbenchScale, 16)
	c.Out = cmp.Or(c.Out, io.Writer(os.Stdout))
}

// Row is one line of the results table.
type Row struct {
	Scenario string
	Figure   string // the headline figure with its unit
	Detail   string // further figures (percentiles, ratios, counts)
	Target   string // the budget and whether it was met
	Settings string
	PeakRSS  int64 // bytes; VmHWM of the bench process (Adal under test) during the scenario
	Void     string
	// Load is the machine's 1-minute load average when the measurement started and ended.
	Load string
	// CPU is the cores kept busy during the measurement: the machine's, Adal's and the traffic's (coresBusy).
	CPU string
	// Cost is what one unit of the row's work cost (see Cost); its zero value, for rows without a unit of work
	// of their own, prints nothing.
	Cost Cost
}

// Runner runs scenarios and collects rows.
type Runner struct {
	cfg     Config
	counter *SQLCounter
	rows    []Row
	ceiling float64 // measured by ingest, used by latency and purge
	// dispatchRSS is the peak RSS of dispatch's burn-down, the baseline of backlog's.
	dispatchRSS int64
	logf        func(format string, args ...any)
	// loadAtStart is the load average when the current measurement started, cpuAtStart the CPU time spent
	// then (see startMeasure).
	loadAtStart float64
	cpuAtStart  cpuReading
	traffic     *Traffic // the current scenario's load generator and receiver
	// adalCPU, when set, reads the CPU time spent by the Adal processes under test when they are not this one
	// (the cluster scenario's cmd/server processes); ok is false while it cannot.
	adalCPU func() (spent time.Duration, ok bool)
}

// startMeasure marks the start of a measured phase: a new peak-RSS window, the machine's load and the CPU
// time spent so far noted.
func (b *Runner) startMeasure() {
	resetPeakRSS()
	b.loadAtStart = loadAverage()
	b.cpuAtStart = b.readCPU()
}

// pauseMeasure runs wait, an idle wait within a measured phase, and leaves its span out of the phase's CPU
// figures.
func (b *Runner) pauseMeasure(wait func() error) error {
	from := b.readCPU()
	err := wait()
	b.cpuAtStart = b.cpuAtStart.after(from, b.readCPU())
	return err
}

// readCPU reads the CPU time spent so far, Adal's from adalCPU when it is set.
func (b *Runner) readCPU() cpuReading {
	r := readCPU(b.traffic)
	if b.adalCPU != nil {
		r.processCPU, r.pOK = b.adalCPU()
	}
	return r
}

// Run runs the configured scenarios and prints the table.
func Run(ctx context.Context, cfg Config) ([]Row, error) {
	if IsTrafficProcess() {
		// The binary started as a traffic process did not call ServeTraffic: running the scenarios here would
		// start traffic processes of its own, without end.
		return nil, fmt.Errorf("started as a traffic process (%s is set): main must call bench.ServeTraffic", trafficEnv)
	}
	cfg.defaults()
	all := slices.Concat(Scenarios, NamedScenarios)
	for _, s := range cfg.Scenarios {
		if !slices.Contains(all, s) {
			return nil, fmt.Errorf("unknown scenario %q (have %s)", s, strings.Join(all, ", "))
		}
	}
	b := &Runner{cfg: cfg, counter: &SQLCounter{Tally: cfg.SQLBreakdown}, ceiling: cfg.Ceiling}
	b.logf = func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "bench %s: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	// Every PostgreSQL connection an Adal process in this bench opens counts its statements.
	storage.WrapPostgresConnector = b.counter.Wrap
	defer func() { storage.WrapPostgresConnector = nil }()
	var errs []error
	for _, name := range all {
		if !slices.Contains(cfg.Scenarios, name) || ctx.Err() != nil {
			continue
		}
		stop, err := b.profile(name, len(cfg.Scenarios) > 1)
		if err != nil {
			return b.rows, err
		}
		b.logf("scenario %s", name)
		err = b.scenario(ctx, name)
		stop()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			b.rows = append(b.rows, Row{Scenario: name, Void: "error: " + err.Error()})
		}
	}
	b.print()
	return b.rows, errors.Join(errs...)
}

// scenarioRuns runs each scenario, by name.
var scenarioRuns = map[string]func(*Runner, context.Context) error{
	"ingest": (*Runner).ingest, "dispatch": (*Runner).dispatch, "latency": (*Runner).latency,
	"punctuality": (*Runner).punctuality, "purge": (*Runner).purge, "cli": (*Runner).cli,
	"backlog": (*Runner).backlog, "graphql": (*Runner).graphql, "noisy": (*Runner).noisy, "search": (*Runner).search,
	"cluster": (*Runner).cluster, "destinations": (*Runner).destinations, "shaping": (*Runner).shaping,
}

func (b *Runner) scenario(ctx context.Context, name string) error {
	run, ok := scenarioRuns[name]
	if !ok {
		return fmt.Errorf("unknown scenario %q", name)
	}
	return run(b, ctx)
}

// profile starts a CPU profile of one scenario when asked to.
func (b *Runner) profile(name string, several bool) (func(), error) {
	if b.cfg.CPUProfile == "" {
		return func() {}, nil
	}
	path := b.cfg.CPUProfile
	if several {
		ext := filepath.Ext(path)
		path = strings.TrimSuffix(path, ext) + "." + name + ext
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		b.logf("CPU profile of %s in %s", name, path)
	}, nil
}

func (b *Runner) add(r Row) {
	// A row summing several windows (the shaping scenario's) brings its own.
	if r.Load == "" {
		r.Load = fmt.Sprintf("%.1f → %.1f", b.loadAtStart, loadAverage())
	}
	if r.CPU == "" {
		r.CPU = coresBusy(b.cpuAtStart, b.readCPU())
	}
	b.rows = append(b.rows, r)
	b.logf("%s: %s  %s  [%s]  cost %s  %s  peak RSS %s, load %s, cores busy %s %s", r.Scenario, r.Figure, r.Detail,
		r.Target, r.Cost.Format(), r.Settings, mib(r.PeakRSS), r.Load, r.CPU, r.Void)
}

// print writes the rows as a Markdown table.
func (b *Runner) print() {
	out := b.cfg.Out
	fmt.Fprintln(out, "| scenario | figure | detail | target | cost per unit§ | peak RSS* | load† | cores busy‡ | settings |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|")
	for _, r := range b.rows {
		fig := r.Figure
		if r.Void != "" {
			fig = "VOID (" + r.Void + ") " + fig
		}
		rss := ""
		if r.PeakRSS > 0 {
			rss = mib(r.PeakRSS)
		}
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Scenario, fig, r.Detail, r.Target, r.Cost.Format(),
			rss, r.Load, r.CPU, r.Settings)
	}
	fmt.Fprintln(out, "\n\\* peak RSS is VmHWM of the bench process during the scenario: the Adal process under test and "+
		"the bench's bookkeeping; the load generator and the receiver run in a traffic process of their own. In the "+
		"cluster rows, the largest VmHWM among its cmd/server processes.")
	fmt.Fprintln(out, "† the machine's 1-minute load average when the measurement started → ended; the bench shares the "+
		"machine with whatever else runs, and a figure taken under load says little.")
	fmt.Fprintln(out, "‡ the cores kept busy on average during the measurement: the whole machine (PostgreSQL, pgbench and "+
		"anything else included), in brackets the bench process (Adal; in the cluster rows its cmd/server processes "+
		"together) and the traffic process, and how much of the "+
		"machine's was stolen by the hypervisor for other guests. With the same offered load, fewer is cheaper: steadier from run to run than a tail latency.")
	fmt.Fprintln(out, "§ what one unit of the row's work cost, over its measured window: the Adal process's statements "+
		"(+ BEGIN/COMMIT) and Go heap allocations (count and bytes) per unit, the WAL the PostgreSQL server wrote per "+
		"unit (the whole server's: run nothing else on it), and the Adal process's CPU (user + system) per 1,000 "+
		"units. The cluster rows count the database's transactions instead of statements (over a window of their own) "+
		"and have no allocations: their processes are not this one. The way to compare two builds: see "+
		"docs/benchmarks.md, \"Comparing two builds on cost\".")
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}
