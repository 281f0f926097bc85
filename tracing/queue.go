package tracing

import (
	"context"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// queue is the span processor between the spans that end and the exporter: a bounded channel that OnEnd
// never waits on — a span that finds it full is dropped and counted — and one goroutine (run) that takes the
// spans in batches and exports each within the export timeout, counting the spans of a batch that failed. The
// SDK's batch processor keeps its drops to itself, and can be told to block; intake and dispatch must never
// wait on a collector, and the drops must show on /metrics.
type queue struct {
	spans   chan sdktrace.ReadOnlySpan
	dropped func(reason string, n int)
	// failing is set while exports fail, so that a collector that is gone is logged once, not once a batch.
	// Only run uses it.
	failing bool
}

var _ sdktrace.SpanProcessor = (*queue)(nil)

func newQueue(size int, dropped func(string, int)) *queue {
	if dropped == nil {
		dropped = func(string, int) {}
	}
	return &queue{spans: make(chan sdktrace.ReadOnlySpan, size), dropped: dropped}
}

// OnStart does nothing: spans are handled once they end.
func (*queue) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues a sampled span for export, or drops it when the queue is full.
func (q *queue) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	select {
	case q.spans <- s:
	default:
		q.dropped(DroppedQueueFull, 1)
	}
}

// ForceFlush does nothing: the export loop exports on its own schedule, and nothing in Adal needs to wait for
// it.
func (*queue) ForceFlush(context.Context) error { return nil }

// Shutdown does nothing: the export loop belongs to Service, which ends it at Stop.
func (*queue) Shutdown(context.Context) error { return nil }

// run exports the queued spans until ctx ends: a batch as soon as it is full, or once the oldest of its spans
// has waited the interval. Then it exports what is queued and returns. Exports run under base, which ends one
// export timeout after ctx does: the export in flight when the run is stopped and the last ones share that
// time, so that a collector that hangs holds a shutdown up no longer.
func (q *queue) run(ctx context.Context, exporter sdktrace.SpanExporter, cfg Config) {
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(cfg.ExportTimeout, cancel) })
	defer stop()
	batch := make([]sdktrace.ReadOnlySpan, 0, cfg.BatchSize)
	timer := time.NewTimer(cfg.Interval)
	defer timer.Stop()
	export := func() {
		if len(batch) > 0 {
			q.export(base, exporter, batch, cfg)
			clear(batch) // the exported spans are not kept alive by the batch's array
			batch = batch[:0]
		}
	}
	for {
		select {
		case <-ctx.Done():
			q.drain(&batch, export)
			return
		case s := <-q.spans:
			if len(batch) == 0 {
				timer.Reset(cfg.Interval)
			}
			batch = append(batch, s)
			if len(batch) == cap(batch) {
				export()
			}
		case <-timer.C:
			export()
		}
	}
}

// drain exports what is queued now, in batches; not what comes meanwhile, which could go on for ever.
func (q *queue) drain(batch *[]sdktrace.ReadOnlySpan, export func()) {
	for range len(q.spans) {
		*batch = append(*batch, <-q.spans)
		if len(*batch) == cap(*batch) {
			export()
		}
	}
	export()
}

// export hands batch to the exporter, within the export timeout and ctx; a batch that fails is dropped and
// counted.
func (q *queue) export(ctx context.Context, exporter sdktrace.SpanExporter, batch []sdktrace.ReadOnlySpan, cfg Config) {
	err := ctx.Err()
	if err == nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.ExportTimeout)
		err = exporter.ExportSpans(ctx, batch)
		cancel()
	}
	switch {
	case err != nil:
		q.dropped(DroppedExportFailed, len(batch))
		if !q.failing {
			q.failing = true
			cfg.Logger.Warn("tracing: export failed; spans are dropped until it works again", "spans", len(batch), "err", err)
		}
	case q.failing:
		q.failing = false
		cfg.Logger.Info("tracing: export works again")
	}
}
