// Package metrics exposes Adal's Prometheus metrics: intake, attempts, the dispatch backlog and the spans
// tracing dropped.
package metrics

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/tracing"
	"github.com/adal-relay/adal/verify"
)

// Metrics holds the collectors and implements the scheduler's Observer.
type Metrics struct {
	intake          *prometheus.CounterVec
	rejections      *prometheus.CounterVec
	attempts        *prometheus.CounterVec
	attemptDuration prometheus.Histogram
	claimBatch      prometheus.Histogram
	spansDropped    map[string]prometheus.Counter // by reason, resolved once: drops come in floods
}

// New registers Adal's collectors on reg. dueBacklog counts deliveries that are due and not yet claimed; it
// is called at scrape time.
func New(reg prometheus.Registerer, dueBacklog func(ctx context.Context) (int, error)) *Metrics {
	m := &Metrics{
		intake: counterVec("adal_inbound_requests_total",
			"Inbound webhook requests by HTTP answer (202 accepted, 401 failed verification, 402 no credit, 404 unknown server, 405 method not allowed, 413 too large, 429 over a rate, 503 storage unavailable).",
			"code"),
		rejections: counterVec("adal_inbound_rejections_total",
			"Inbound requests refused (401) for failing their server's enforced verification, by reason: MISSING, MALFORMED, MISMATCH, STALE.",
			"reason"),
		attempts: counterVec("adal_attempts_total",
			"Delivery attempts by outcome: succeeded, or the error kind of a failed attempt.", "outcome"),
		attemptDuration: histogram("adal_attempt_duration_seconds",
			"Duration of delivery attempts, from connect to the end of the response.",
			.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30),
		claimBatch: histogram("adal_claim_batch_size", "Deliveries taken per scheduler claim.",
			0, 1, 2, 5, 10, 25, 50, 100, 250, 500),
		spansDropped: map[string]prometheus.Counter{},
	}
	dropped := counterVec("adal_trace_spans_dropped_total",
		"Trace spans never exported, by reason: queue_full (the export queue was full when the span ended), export_failed (the export of its batch failed or timed out).",
		"reason")
	reg.MustRegister(m.intake, m.rejections, m.attempts, m.attemptDuration, m.claimBatch, dropped)
	for _, r := range verify.Reasons { // present at zero, so a rate over them starts from the first scrape
		m.rejections.WithLabelValues(string(r))
	}
	for _, r := range []string{tracing.DroppedQueueFull, tracing.DroppedExportFailed} {
		m.spansDropped[r] = dropped.WithLabelValues(r)
	}
	if dueBacklog != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "adal_due_deliveries",
			Help: "Pending deliveries whose due time has passed (the dispatch backlog), at scrape time.",
		}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			n, err := dueBacklog(ctx)
			if err != nil {
				return -1
			}
			return float64(n)
		}))
	}
	return m
}

func counterVec(name, help, label string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{label})
}

func histogram(name, help string, buckets ...float64) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
}

// Intake counts one inbound answer.
func (m *Metrics) Intake(status int) { m.intake.WithLabelValues(strconv.Itoa(status)).Inc() }

// Rejected counts one request refused for failing verification.
func (m *Metrics) Rejected(reason verify.Reason) { m.rejections.WithLabelValues(string(reason)).Inc() }

// Claimed records the size of one claim.
func (m *Metrics) Claimed(n int) { m.claimBatch.Observe(float64(n)) }

// Attempted records one attempt's outcome and duration.
func (m *Metrics) Attempted(o delivery.Outcome) {
	outcome := "succeeded"
	if !o.Succeeded() {
		outcome = string(o.ErrorKind)
	}
	m.attempts.WithLabelValues(outcome).Inc()
	m.attemptDuration.Observe(o.FinishedAt.Sub(o.StartedAt).Seconds())
}

// SpansDropped counts n trace spans dropped for reason (tracing.Config.Dropped): it never blocks.
func (m *Metrics) SpansDropped(reason string, n int) {
	if c := m.spansDropped[reason]; c != nil {
		c.Add(float64(n))
	}
}
