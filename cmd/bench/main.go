// Command bench measures Adal against its performance budgets on PostgreSQL and prints one Markdown table row
// per figure, each with the cost of a unit of its work (CPU, statements, WAL, allocations), which is what two
// builds are compared on (docs/benchmarks.md):
//
//	go run ./cmd/bench [-scenarios ingest,dispatch,backlog,latency,noisy,punctuality,purge,cli,graphql,search,cluster] [-database-url …] [-duration 10s]
//	go run ./cmd/bench -scenarios destinations   # HTTP against RabbitMQ, NATS JetStream, Redis Streams and MQTT
//	go run ./cmd/bench -scenarios shaping        # schema validation at intake, transformations at dispatch, each against none
//
// Each scenario creates a database of its own on the server of -database-url and drops it afterwards. The
// destinations scenario, which needs the four brokers, and shaping run only when named. The logic is in
// package bench.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/adal-relay/adal/bench"
	"github.com/adal-relay/adal/relay"
)

func main() {
	if bench.IsTrafficProcess() {
		// The bench runs this binary again as its load generator and receiver (bench.Traffic).
		if err := bench.ServeTraffic(); err != nil {
			fmt.Fprintln(os.Stderr, "bench traffic:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	var cfg bench.Config
	var scenarios, rates, singleRates, fanoutRates, clusterProcesses, clusterRates string
	flag.StringVar(&scenarios, "scenarios", strings.Join(bench.Scenarios, ","),
		"comma-separated scenarios to run; "+strings.Join(bench.NamedScenarios, ", ")+" only when named")
	flag.StringVar(&cfg.DatabaseURL, "database-url", envOr("ADAL_BENCH_DATABASE_URL",
		"postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
		"a database on the PostgreSQL server to use; scenarios create and drop databases next to it")
	flag.DurationVar(&cfg.Duration, "duration", 10*time.Second, "length of each measured load phase")
	flag.DurationVar(&cfg.WarmUp, "warm-up", 3*time.Second, "unmeasured load before ingest and latency, followed by ANALYZE (negative: none)")
	flag.StringVar(&rates, "ingest-rates", "2500,5000,7500,10000,12500,15000", "offered rates of the 100-tenant ingest (req/s)")
	flag.StringVar(&singleRates, "ingest-single-rates", "2000,4000", "offered rates of the single-tenant ingest")
	flag.StringVar(&fanoutRates, "ingest-fanout-rates", "1000,2500", "offered rates of the 10-recipients ingest")
	flag.StringVar(&cfg.IngestRecipients, "ingest-recipients", "paused",
		"paused: recipients paused, pure intake; receiver: active recipients deliver to a loopback receiver meanwhile")
	flag.Float64Var(&cfg.Ceiling, "ceiling", 0, "ingest ceiling (req/s) for latency and purge when ingest does not run")
	flag.IntVar(&cfg.DispatchDeliveries, "dispatch-deliveries", 100_000, "due deliveries the dispatch scenario burns down")
	flag.IntVar(&cfg.BacklogDeliveries, "backlog-deliveries", 1_000_000, "due deliveries the backlog scenario burns down (its memory against dispatch's)")
	flag.IntVar(&cfg.DispatchWorkers, "dispatch-workers", 0, "ADAL_WORKERS for dispatch (0: the default)")
	flag.IntVar(&cfg.IntakeCommitters, "intake-committers", 0, "ADAL_INTAKE_COMMITTERS of every scenario's process (0: the default)")
	flag.IntVar(&cfg.PunctualityRows, "punctuality-rows", 1_000_000, "future retries in the table")
	flag.Float64Var(&cfg.PunctualityRate, "punctuality-rate", 500, "retries per second coming due during the window")
	flag.DurationVar(&cfg.PunctualityUnit, "punctuality-unit", 100*time.Millisecond, "ADAL_RETRY_UNIT of the punctuality process")
	flag.DurationVar(&cfg.PunctualityWindow, "punctuality-window", 30*time.Second, "how long retries keep coming due")
	flag.IntVar(&cfg.PurgeRequests, "purge-requests", 100_000, "expired requests (2 deliveries × 3 attempts each) to purge")
	flag.Float64Var(&cfg.NoisyRate, "noisy-rate", 10, "requests per second of the noisy scenario's noisy tenant (each to 20 hanging recipients)")
	flag.Float64Var(&cfg.NoisyQuietRate, "noisy-quiet-rate", 100, "requests per second of the noisy scenario's quiet tenant")
	flag.IntVar(&cfg.CLIBacklog, "cli-backlog", 5000, "requests the cli scenario accepts before its CLI connects")
	flag.IntVar(&cfg.GraphQLClients, "graphql-clients", 16, "connections the graphql scenario sends its worst query from at once")
	flag.IntVar(&cfg.SearchRequests, "search-requests", 1_000_000, "requests of one server the search scenario searches")
	flag.Float64Var(&cfg.CLIRate, "cli-rate", 100, "requests per second the cli scenario sends while its CLI is connected")
	flag.StringVar(&cfg.AdalBinary, "adal-binary", "", "the adal CLI the cli scenario runs (default: built from this module)")
	flag.StringVar(&clusterProcesses, "cluster-processes", "1,2,4", "cmd/server processes sharing the cluster scenario's database, one run each")
	flag.StringVar(&clusterRates, "cluster-rates", "2500,5000,10000", "offered rates (req/s, over all processes) the cluster's intake ceiling is looked for among")
	flag.IntVar(&cfg.ClusterDeliveries, "cluster-deliveries", 50_000, "due deliveries each cluster run burns down")
	flag.StringVar(&cfg.ServerBinary, "server-binary", "", "the cmd/server the cluster scenario runs (default: built from this module)")
	flag.IntVar(&cfg.DestinationDeliveries, "destination-deliveries", 100_000, "due deliveries the destinations scenario burns down to each destination")
	flag.StringVar(&cfg.RabbitMQURL, "rabbitmq-url", "amqp://guest:guest@127.0.0.1:5672/", "the RabbitMQ the destinations scenario publishes to")
	flag.StringVar(&cfg.NATSURL, "nats-url", "nats://127.0.0.1:4222", "the NATS server, with JetStream, the destinations scenario publishes to")
	flag.StringVar(&cfg.RedisURL, "redis-url", "redis://127.0.0.1:6379/0", "the Redis the destinations scenario publishes to")
	flag.StringVar(&cfg.MQTTURL, "mqtt-url", "mqtt://127.0.0.1:1883", "the MQTT broker the destinations scenario publishes to")
	flag.Float64Var(&cfg.ShapingRate, "shaping-rate", 15000, "offered rate (req/s) of the shaping scenario's intake runs, with schema validation and without")
	flag.IntVar(&cfg.ShapingDeliveries, "shaping-deliveries", 50_000, "due deliveries each of the shaping scenario's burn-downs, with a transformation and without, burns down")
	flag.IntVar(&cfg.PgbenchClients, "pgbench-clients", 16, "pgbench -c")
	flag.IntVar(&cfg.PgbenchScale, "pgbench-scale", 16, "pgbench -i -s (when its database is first created)")
	flag.BoolVar(&cfg.SQLBreakdown, "sql-breakdown", false, "log the statements dispatch sent, by text")
	flag.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write a CPU profile per scenario (file name gets the scenario added)")
	debugAddr := flag.String("debug-addr", "", "serve net/http/pprof on this loopback address while the bench runs (e.g. 127.0.0.1:6060)")
	flag.Parse()
	if *debugAddr != "" {
		// The default mux carries net/http/pprof's handlers: goroutine dumps and traces of a run in progress.
		go func() { fmt.Fprintln(os.Stderr, "bench: debug server:", http.ListenAndServe(*debugAddr, nil)) }()
	}
	cfg.Scenarios = strings.Split(scenarios, ",")
	var err error
	if cfg.IngestRates, err = floats(rates); err != nil {
		return err
	}
	if cfg.IngestSingleRates, err = floats(singleRates); err != nil {
		return err
	}
	if cfg.IngestFanoutRates, err = floats(fanoutRates); err != nil {
		return err
	}
	if cfg.ClusterRates, err = floats(clusterRates); err != nil {
		return err
	}
	if cfg.ClusterProcesses, err = counts(clusterProcesses); err != nil {
		return err
	}
	// The relay runs in this process: with the collector's target cmd/server gives it (relay.GCPercent, or GOGC).
	fmt.Fprintf(os.Stderr, "bench: the Adal process's GOGC is %d\n", relay.SetGCPercent())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	_, err = bench.Run(ctx, cfg)
	return err
}

func floats(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("bad rate %q", f)
		}
		out = append(out, v)
	}
	return out, nil
}

func counts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("bad count %q", f)
		}
		out = append(out, v)
	}
	return out, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
