// Package metrics exposes Adal's Prometheus metrics: intake, attempts and the dispatch backlog.
package metrics

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/verify"
)

// Metrics holds the collectors and implements the scheduler's Observer.
type Metrics struct {
	intake          *prometheus.CounterVec
	rejections      *prometheus.CounterVec
	attempts        *prometheus.CounterVec
	attemptDuration prometheus.Histogram
	claimBatch      prometheus.Histogram
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
	}
	reg.MustRegister(m.intake, m.rejections, m.attempts, m.attemptDuration, m.claimBatch)
	for _, r := range verify.Reasons { // present at zero, so a rate over them starts from the first scrape
		m.rejections.WithLabelValues(string(r))
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
