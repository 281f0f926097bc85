// Package tracing is Adal's OpenTelemetry tracing, off unless the OTEL_* variables ask for it (FromEnv). When on,
// each accepted request is one trace: its intake, the batch commit that stored it (linked, not nested: one
// commit serves many requests), and every claim and attempt of its deliveries, in whichever process and however
// late, parented on the trace context stored with the request (requests.trace_parent).
//
// Service owns the SDK's provider, the W3C propagator and the export queue. The queue is bounded and never
// blocks: a span that finds it full is dropped and counted, and each export has a timeout, so a collector that
// is slow or gone costs spans, never intake's or dispatch's time. When off, no provider exists and Tracer is
// off: the instrumented code checks On before it builds anything.
package tracing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/adal-relay/adal/startstop"
)

// The export queue's defaults: those the OpenTelemetry specification gives the OTEL_BSP_* variables.
const (
	DefaultQueueSize     = 2048
	DefaultBatchSize     = 512
	DefaultInterval      = 5 * time.Second
	DefaultExportTimeout = 30 * time.Second
)

// Why spans are dropped, as Config.Dropped hears it (the reason label of adal_trace_spans_dropped_total).
const (
	// DroppedQueueFull: the span ended while the export queue was full.
	DroppedQueueFull = "queue_full"
	// DroppedExportFailed: the export of the span's batch failed or ran out of time.
	DroppedExportFailed = "export_failed"
)

// ServiceName is the service.name of Adal's spans unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say
// otherwise.
const ServiceName = "adal"

// Config configures tracing.
type Config struct {
	// Enabled turns tracing on. Off, nothing below is used.
	Enabled bool
	// Exporter receives the spans. Nil: OTLP over HTTP as the OTEL_EXPORTER_OTLP_* variables configure it,
	// made by each Start and shut down by Stop. A given exporter is the caller's: it is never shut down here.
	Exporter sdktrace.SpanExporter
	// Sampler decides which traces are recorded; nil: parent-based, always on (FromEnv reads
	// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG).
	Sampler sdktrace.Sampler
	// Resource describes this process on every span; nil: service.name "adal" (FromEnv adds
	// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES).
	Resource *resource.Resource
	// QueueSize bounds the spans waiting for export (OTEL_BSP_MAX_QUEUE_SIZE); a span that finds the queue
	// full is dropped. Default DefaultQueueSize.
	QueueSize int
	// BatchSize bounds the spans of one export (OTEL_BSP_MAX_EXPORT_BATCH_SIZE). Default DefaultBatchSize, and
	// never more than QueueSize.
	BatchSize int
	// Interval is the longest a span waits in the queue for its batch to fill (OTEL_BSP_SCHEDULE_DELAY).
	// Default DefaultInterval.
	Interval time.Duration
	// ExportTimeout bounds one export (OTEL_BSP_EXPORT_TIMEOUT); its spans are dropped past it. Default
	// DefaultExportTimeout.
	ExportTimeout time.Duration
	// Dropped, if set, hears of n spans dropped and why (DroppedQueueFull, DroppedExportFailed); it is called
	// on the paths that end spans and must not block (metrics.Metrics.SpansDropped).
	Dropped func(reason string, n int)
	Logger  *slog.Logger
}

// FromEnv reads the standard OpenTelemetry variables. Tracing is on only when OTEL_TRACES_EXPORTER is otlp, or
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set — and OTEL_SDK_DISABLED is not true.
// Adal exports over OTLP/HTTP only: another exporter or a gRPC protocol is an error, as is a malformed number,
// sampler or resource attribute while tracing is on. The exporter reads its own variables (endpoint, headers,
// timeout, compression, certificates) when it is made.
func FromEnv() (Config, error) {
	var cfg Config
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return cfg, nil
	}
	switch exporters := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")); exporters {
	case "":
		cfg.Enabled = os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	default:
		for _, e := range strings.Split(exporters, ",") {
			switch e = strings.TrimSpace(e); e {
			case "otlp":
				cfg.Enabled = true
			case "none", "":
			default:
				return Config{}, fmt.Errorf("OTEL_TRACES_EXPORTER must be otlp or none, got %q", exporters)
			}
		}
	}
	if !cfg.Enabled {
		return cfg, nil
	}
	if p := cmp.Or(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")); p != "" && p != "http/protobuf" && p != "http/json" {
		return Config{}, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf or http/json (Adal exports over OTLP/HTTP), got %q", p)
	}
	var err error
	if cfg.Sampler, err = samplerFromEnv(); err != nil {
		return Config{}, err
	}
	if cfg.Resource, err = resource.New(context.Background(), resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", ServiceName)), resource.WithFromEnv()); err != nil {
		return Config{}, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES or OTEL_SERVICE_NAME: %w", err)
	}
	if err := errors.Join(
		envPositive(&cfg.QueueSize, "OTEL_BSP_MAX_QUEUE_SIZE", 1),
		envPositive(&cfg.BatchSize, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 1),
		envPositive(&cfg.Interval, "OTEL_BSP_SCHEDULE_DELAY", time.Millisecond),
		envPositive(&cfg.ExportTimeout, "OTEL_BSP_EXPORT_TIMEOUT", time.Millisecond),
	); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// envPositive sets *dst to the variable's value times unit when it is set: a positive whole number.
func envPositive[T int | time.Duration](dst *T, name string, unit T) error {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return fmt.Errorf("%s must be a positive whole number, got %q", name, v)
	}
	*dst = T(n) * unit
	return nil
}

// samplerFromEnv is the sampler OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG name, as the specification
// defines them; unset, parent-based always on. Read here rather than by the SDK so that a wrong value stops
// the server at start instead of being logged and ignored.
func samplerFromEnv() (sdktrace.Sampler, error) {
	name := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER")))
	ratio := func() (float64, error) {
		arg := strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER_ARG"))
		if arg == "" {
			return 1, nil
		}
		f, err := strconv.ParseFloat(arg, 64)
		if err != nil || f < 0 || f > 1 {
			return 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1, got %q", arg)
		}
		return f, nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio", "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		if name == "traceidratio" {
			return sdktrace.TraceIDRatioBased(r), nil
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
	}
	return nil, fmt.Errorf("OTEL_TRACES_SAMPLER must be always_on, always_off, traceidratio or their parentbased_ forms, got %q", name)
}

// Service owns the tracer provider and runs the export queue: Start exports what the queue holds in batches
// until Stop, which exports what is left, within one export timeout.
type Service struct {
	startstop.BaseStartStop
	cfg    Config
	tracer *Tracer
	queue  *queue
}

// New builds the provider when cfg.Enabled, and returns a stopped service; off, its Tracer is off and Start
// does nothing. Spans ended before Start wait in the queue, as far as it holds them.
func New(cfg Config) *Service {
	if !cfg.Enabled {
		return &Service{cfg: cfg}
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cfg.QueueSize = cmp.Or(cfg.QueueSize, DefaultQueueSize)
	cfg.BatchSize = min(cmp.Or(cfg.BatchSize, DefaultBatchSize), cfg.QueueSize)
	cfg.Interval = cmp.Or(cfg.Interval, DefaultInterval)
	cfg.ExportTimeout = cmp.Or(cfg.ExportTimeout, DefaultExportTimeout)
	if cfg.Sampler == nil {
		cfg.Sampler = sdktrace.ParentBased(sdktrace.AlwaysSample())
	}
	if cfg.Resource == nil {
		cfg.Resource = resource.NewSchemaless(attribute.String("service.name", ServiceName))
	}
	q := newQueue(cfg.QueueSize, cfg.Dropped)
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(q),
		sdktrace.WithSampler(cfg.Sampler),
		sdktrace.WithResource(cfg.Resource),
		sdktrace.WithIDGenerator(idGenerator{}),
	)
	return &Service{cfg: cfg, queue: q, tracer: newTracer(provider)}
}

// Tracer is what the instrumented packages hold: off when tracing is.
func (s *Service) Tracer() *Tracer { return s.tracer }

// Start runs the export loop until Stop or ctx ends; with no exporter given, it makes the OTLP/HTTP one first
// (it connects only when it first exports). Off, it does nothing.
func (s *Service) Start(ctx context.Context) error {
	if s.queue == nil {
		return nil
	}
	exporter := s.cfg.Exporter
	return s.Run(ctx, func(ctx context.Context) error {
		if exporter != nil {
			return nil
		}
		var err error
		if exporter, err = otlptracehttp.New(ctx); err != nil {
			return fmt.Errorf("tracing: OTLP exporter: %w", err)
		}
		// The SDK reports what goes wrong inside it (an attribute it refused, a failed export it retried) to a
		// process-wide handler, which would print with the standard logger.
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { s.cfg.Logger.Warn("tracing", "err", err) }))
		s.cfg.Logger.Info("tracing on: exporting spans over OTLP/HTTP", "endpoint",
			cmp.Or(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), "https://localhost:4318"))
		return nil
	}, func(ctx context.Context) {
		s.queue.run(ctx, exporter, s.cfg)
		if s.cfg.Exporter == nil {
			shut, cancel := context.WithTimeout(context.Background(), s.cfg.ExportTimeout)
			defer cancel()
			if err := exporter.Shutdown(shut); err != nil {
				s.cfg.Logger.Warn("tracing: shut the exporter down", "err", err)
			}
		}
	})
}
