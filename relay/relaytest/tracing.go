package relaytest

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/tracing"
)

// Traces turns tracing on in a process, with the default sampler (parent-based, always on), and returns the
// in-memory exporter its spans go to, a few milliseconds after they end, and the option to pass to Start.
func Traces() (*Spans, func(*relay.Config)) {
	s := &Spans{InMemoryExporter: tracetest.NewInMemoryExporter()}
	return s, func(c *relay.Config) {
		c.Tracing = tracing.Config{Enabled: true, Exporter: s.InMemoryExporter, Interval: 5 * time.Millisecond}
	}
}

// Spans are the spans a process exported.
type Spans struct{ *tracetest.InMemoryExporter }

// Named returns the spans exported so far with the given name, in the order they were exported.
func (s *Spans) Named(name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, span := range s.GetSpans() {
		if span.Name == name {
			out = append(out, span)
		}
	}
	return out
}

// Sync waits until every span e's process ended before the call is exported: it ends one of its own and waits
// for it, behind them in the export queue. Then a span that is not there was never made.
func (s *Spans) Sync(t testing.TB, e *Env) {
	t.Helper()
	n := len(s.Named(syncSpan))
	_, span := e.Relay.Tracing.Tracer().Start(context.Background(), syncSpan)
	span.End()
	s.Wait(t, syncSpan, n+1)
}

const syncSpan = "relaytest.sync"

// Wait polls until at least n spans with the given name have been exported, and returns them.
func (s *Spans) Wait(t testing.TB, name string, n int) tracetest.SpanStubs {
	t.Helper()
	Eventually(t, 20*time.Second, "spans named "+name, func() bool { return len(s.Named(name)) >= n })
	return s.Named(name)
}

// Attr is the value of span's attribute key, or the empty value when it has none.
func Attr(span tracetest.SpanStub, key attribute.Key) attribute.Value {
	for _, kv := range span.Attributes {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}
