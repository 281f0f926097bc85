package tracing_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/adal-relay/adal/tracing"
)

const senderParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// drops counts dropped spans by reason.
type drops struct {
	mu sync.Mutex
	n  map[string]int
}

func (d *drops) add(reason string, n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == nil {
		d.n = map[string]int{}
	}
	d.n[reason] += n
}

func (d *drops) of(reason string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[reason]
}

// start runs a tracing service with cfg (on) until the test ends.
func start(t *testing.T, cfg tracing.Config) *tracing.Service {
	t.Helper()
	cfg.Enabled = true
	svc := tracing.New(cfg)
	require.NoError(t, svc.Start(t.Context()))
	t.Cleanup(svc.Stop)
	return svc
}

func TestTraceParentRoundTrip(t *testing.T) {
	t.Parallel()
	sc, ok := tracing.ParseTraceParent(senderParent)
	require.True(t, ok)
	require.Equal(t, "0af7651916cd43dd8448eb211c80319c", sc.TraceID().String())
	require.Equal(t, "b7ad6b7169203331", sc.SpanID().String())
	require.True(t, sc.IsSampled())
	require.True(t, sc.IsRemote())
	require.Equal(t, senderParent, tracing.TraceParent(sc))

	unsampled := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
	sc, ok = tracing.ParseTraceParent(unsampled)
	require.True(t, ok)
	require.False(t, sc.IsSampled())
	require.Equal(t, unsampled, tracing.TraceParent(sc))

	for _, bad := range []string{
		"",
		"00-00000000000000000000000000000000-b7ad6b7169203331-01", // no trace
		"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", // no span
		"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", // not a version TraceParent writes
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0g",
		"00-0af7651916cd43dd8448eb211c80319c_b7ad6b7169203331-01",
		senderParent + "-",
	} {
		_, ok := tracing.ParseTraceParent(bad)
		require.False(t, ok, bad)
	}
	require.Empty(t, tracing.TraceParent(trace.SpanContext{}))

	id := tracing.SpanIDOf("cli:owner:0123456789abcdef0123456789abcdef")
	require.True(t, id.IsValid())
	require.Equal(t, id, tracing.SpanIDOf("cli:owner:0123456789abcdef0123456789abcdef"), "the same in every process")
	require.NotEqual(t, id, tracing.SpanIDOf("cli:owner:0123456789abcdef0123456789abcdee"))
	require.Equal(t, "00-0af7651916cd43dd8448eb211c80319c-"+id.String()+"-01", tracing.ChildTraceParent(senderParent, id))
	require.Empty(t, tracing.ChildTraceParent("", id))
}

// A child of a stored traceparent is in its trace, under its span, with the span ID it asks for.
func TestStartChildContinuesAStoredTrace(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	svc := start(t, tracing.Config{Exporter: exp, Interval: time.Millisecond})
	tr := svc.Tracer()
	require.True(t, tr.On())

	span, ok := tr.StartChild(senderParent, trace.SpanID{}, "random id")
	require.True(t, ok)
	span.End()
	id := tracing.SpanIDOf("a lease token")
	span, ok = tr.StartChild(senderParent, id, "chosen id")
	require.True(t, ok)
	require.Equal(t, id, span.SpanContext().SpanID())
	span.End()
	_, ok = tr.StartChild("", trace.SpanID{}, "no parent")
	require.False(t, ok, "a request stored while tracing was off has no trace to join")

	eventually(t, "two spans exported", func() bool { return len(exp.GetSpans()) == 2 })
	for _, s := range exp.GetSpans() {
		require.Equal(t, "0af7651916cd43dd8448eb211c80319c", s.SpanContext.TraceID().String(), s.Name)
		require.Equal(t, "b7ad6b7169203331", s.Parent.SpanID().String(), s.Name)
	}
	require.Equal(t, id, exp.GetSpans()[1].SpanContext.SpanID())
}

// Off, there is no tracer, Start does nothing, and asking costs nothing.
func TestOffMakesNoTracer(t *testing.T) {
	svc := tracing.New(tracing.Config{Exporter: tracetest.NewInMemoryExporter()})
	require.NoError(t, svc.Start(t.Context()))
	svc.Stop()
	tr := svc.Tracer()
	require.False(t, tr.On())
	allocs := testing.AllocsPerRun(100, func() {
		if _, ok := tr.StartChild(senderParent, trace.SpanID{}, "x"); ok {
			t.Fatal("a span while off")
		}
		_ = tr.On()
	})
	require.Zero(t, allocs)
}

// blockingExporter blocks each export until released or until its context ends, as an unreachable collector
// does.
type blockingExporter struct {
	entered  chan struct{} // receives when an export starts
	release  chan struct{}
	exported atomic.Int64
}

func (e *blockingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	select {
	case e.entered <- struct{}{}:
	default:
	}
	select {
	case <-e.release:
		e.exported.Add(int64(len(spans)))
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (*blockingExporter) Shutdown(context.Context) error { return nil }

// While the exporter is stuck, ending spans never waits: the queue holds what it can and drops, and counts,
// the rest. Once the exporter answers again, what the queue held is exported.
func TestQueueDropsAndCountsWhenTheExporterBlocks(t *testing.T) {
	t.Parallel()
	exp := &blockingExporter{entered: make(chan struct{}, 1), release: make(chan struct{})}
	var dropped drops
	const queue, batch = 8, 4
	svc := start(t, tracing.Config{Exporter: exp, QueueSize: queue, BatchSize: batch, Interval: time.Hour,
		ExportTimeout: time.Hour, Dropped: dropped.add})
	tr := svc.Tracer()
	end := func(n int) {
		for range n {
			_, span := tr.Start(context.Background(), "s")
			span.End()
		}
	}
	end(batch) // a full batch: exported at once, and the export hangs
	select {
	case <-exp.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first batch was not exported")
	}

	const more = 1000
	began := time.Now()
	end(more) // would hang the test if ending a span waited for the queue
	require.Less(t, time.Since(began), 5*time.Second, "ending spans does not wait for the exporter")
	require.Equal(t, more-queue, dropped.of(tracing.DroppedQueueFull))

	close(exp.release)
	eventually(t, "the queued spans exported", func() bool { return exp.exported.Load() == batch+queue })
	require.Zero(t, dropped.of(tracing.DroppedExportFailed))
}

// A collector that takes the connection and never answers costs each batch the export timeout, and the batch:
// its spans are dropped and counted, and the process goes on. Stop does not wait for it longer than one export
// timeout either.
func TestExportTimesOutAgainstAHangingCollector(t *testing.T) {
	hang := make(chan struct{})
	var requests atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(collector.Close)
	t.Cleanup(func() { close(hang) })
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", collector.URL+"/v1/traces")
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	t.Setenv("OTEL_SDK_DISABLED", "")
	cfg, err := tracing.FromEnv()
	require.NoError(t, err)
	require.True(t, cfg.Enabled)

	var dropped drops
	cfg.Dropped = dropped.add
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.BatchSize, cfg.Interval, cfg.ExportTimeout = 2, time.Millisecond, 200*time.Millisecond
	svc := tracing.New(cfg)
	require.NoError(t, svc.Start(t.Context()))
	tr := svc.Tracer()
	began := time.Now()
	for range 2 {
		_, span := tr.Start(context.Background(), "s")
		span.End()
	}
	require.Less(t, time.Since(began), time.Second)
	eventually(t, "the timed-out batch counted", func() bool { return dropped.of(tracing.DroppedExportFailed) == 2 })
	require.Positive(t, requests.Load(), "the collector was called")

	_, span := tr.Start(context.Background(), "left at stop")
	span.End()
	began = time.Now()
	svc.Stop()
	require.Less(t, time.Since(began), 5*time.Second, "Stop waits one export timeout at most")
	require.Equal(t, 3, dropped.of(tracing.DroppedExportFailed)+dropped.of(tracing.DroppedQueueFull))
}

func TestFromEnv(t *testing.T) {
	unset := func() {
		for _, v := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
			"OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG", "OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
			"OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_EXPORT_TIMEOUT", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"} {
			t.Setenv(v, "")
		}
	}
	on := map[string]map[string]string{
		"an OTLP endpoint":        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
		"an OTLP traces endpoint": {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"},
		"the otlp exporter":       {"OTEL_TRACES_EXPORTER": "otlp"},
	}
	off := map[string]map[string]string{
		"nothing":               {},
		"the SDK disabled":      {"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "otlp"},
		"no exporter":           {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
		"only the sampler":      {"OTEL_TRACES_SAMPLER": "always_on"},
		"a bad value, unneeded": {"OTEL_BSP_MAX_QUEUE_SIZE": "many"},
	}
	wrong := map[string]map[string]string{
		"another exporter":   {"OTEL_TRACES_EXPORTER": "zipkin"},
		"gRPC":               {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
		"a bad queue size":   {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_BSP_MAX_QUEUE_SIZE": "many"},
		"a negative delay":   {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_BSP_SCHEDULE_DELAY": "-5"},
		"a bad sampler":      {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "sometimes"},
		"a ratio above one":  {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"},
		"a bad resource key": {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_RESOURCE_ATTRIBUTES": "novalue"},
	}
	set := func(vars map[string]string) {
		unset()
		for k, v := range vars {
			t.Setenv(k, v)
		}
	}
	for name, vars := range on {
		set(vars)
		cfg, err := tracing.FromEnv()
		require.NoError(t, err, name)
		require.True(t, cfg.Enabled, name)
	}
	for name, vars := range off {
		set(vars)
		cfg, err := tracing.FromEnv()
		require.NoError(t, err, name)
		require.False(t, cfg.Enabled, name)
	}
	for name, vars := range wrong {
		set(vars)
		_, err := tracing.FromEnv()
		require.Error(t, err, name)
	}

	set(map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_BSP_MAX_QUEUE_SIZE": "100",
		"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "10", "OTEL_BSP_SCHEDULE_DELAY": "250", "OTEL_BSP_EXPORT_TIMEOUT": "2000",
		"OTEL_SERVICE_NAME": "relay-eu", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"})
	cfg, err := tracing.FromEnv()
	require.NoError(t, err)
	require.Equal(t, 100, cfg.QueueSize)
	require.Equal(t, 10, cfg.BatchSize)
	require.Equal(t, 250*time.Millisecond, cfg.Interval)
	require.Equal(t, 2*time.Second, cfg.ExportTimeout)
	require.Contains(t, cfg.Sampler.Description(), "TraceIDRatioBased{0.25}")
	name, ok := cfg.Resource.Set().Value("service.name")
	require.True(t, ok)
	require.Equal(t, "relay-eu", name.AsString())

	set(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
	cfg, err = tracing.FromEnv()
	require.NoError(t, err)
	name, _ = cfg.Resource.Set().Value("service.name")
	require.Equal(t, tracing.ServiceName, name.AsString())
}
