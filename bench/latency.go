package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// errNoCeiling says latency and purge need the ingest ceiling.
var errNoCeiling = errors.New("no ingest ceiling: run the ingest scenario in the same invocation or pass -ceiling")

// startAtHalfCeiling starts, for latency and purge, a stage with layout l and its background services running,
// and returns the rate both load it at: half the ingest ceiling.
func (b *Runner) startAtHalfCeiling(scenario string, l layout) (*stage, float64, error) {
	if b.ceiling == 0 {
		return nil, 0, errNoCeiling
	}
	s, err := b.startStage(scenario, Refusal{}, nil, l)
	if err != nil {
		return nil, 0, err
	}
	if err := s.p.Start(); err != nil {
		s.Close()
		return nil, 0, err
	}
	return s, b.ceiling / 2, nil
}

// latency measures accept → first byte at the receiver at half the ingest ceiling, from the scheduled send
// time (a slow generator cannot hide delay), and the cost of a request accepted and delivered. Its ledger must
// balance: every request answered 202 (published) is delivered or counted missing, the receiver sees no
// request that was not published, and the database holds exactly the published requests with one debit each.
func (b *Runner) latency(ctx context.Context) error {
	s, rate, err := b.startAtHalfCeiling("latency", layout{tenants: 100, recipients: 1})
	if err != nil {
		return err
	}
	defer s.Close()
	tr, p, fx := s.tr, s.p, s.fx
	warm, err := b.warmUp(ctx, tr, p, fx, rate)
	if err != nil {
		return err
	}
	// The warm-up's requests are delivered, and forgotten, before the measured run.
	if _, err := tr.awaitReceived(ctx, warm, time.Minute); err != nil {
		return err
	}
	if err := tr.Reset(ctx); err != nil {
		return err
	}
	b.startMeasure()
	cost := b.startCosts(ctx, p.admin)
	res, err := tr.Run(ctx, Load{Rate: rate, Duration: b.cfg.Duration, Targets: fx.Inbound(), Body: body1K(), KeepIDs: true})
	if err != nil {
		return err
	}
	published := res.published()
	// Drain: wait (bounded) until every published request has reached the receiver.
	if _, err := tr.awaitReceived(ctx, int64(len(published)), time.Minute); err != nil {
		return err
	}
	// Each request accepted and delivered: the whole path's cost.
	spent := cost.stop(ctx, int64(len(published)), "request")
	rss := peakRSS()
	arrivals, err := tr.Arrivals(ctx)
	if err != nil {
		return err
	}
	m := matchArrivals(published, arrivals)
	lat := m.latencies(published)
	bySecond := map[int][]time.Duration{} // by the second of the run the request was scheduled in
	for id, at := range m.first {
		sec := int(published[id].Sub(res.Start) / time.Second)
		bySecond[sec] = append(bySecond[sec], at.Sub(published[id]))
	}
	acceptBySecond := res.BySecond()
	for sec := range int(b.cfg.Duration / time.Second) {
		d, a := bySecond[sec], acceptBySecond[sec]
		b.logf("latency: second %d: %d delivered, p50 %s, p99 %s, max %s; answered p99 %s, max %s", sec, len(d), ms(Percentile(d, 0.5)),
			ms(Percentile(d, 0.99)), ms(Percentile(d, 1)), ms(Percentile(a, 0.99)), ms(Percentile(a, 1)))
	}
	p50, p99 := Percentile(lat, 0.5), Percentile(lat, 0.99)
	row := Row{
		Scenario: "latency",
		Figure:   fmt.Sprintf("p99 %s", ms(p99)),
		Detail: fmt.Sprintf("p50 %s; ledger: %s; non-202 %d, unanswered %d; accepted %.0f/s",
			ms(p50), m.ledger(published), res.Others(), res.Failed(), res.AcceptedPerSecond()),
		Target: fmt.Sprintf("accept → first byte p99 ≤ 50 ms: %s", met(p99 <= 50*time.Millisecond)),
		Settings: fmt.Sprintf("open model %.0f/s (50%% of the %.0f/s ingest ceiling) for %v; 100 tenants × 1 recipient → loopback receiver answering 200; measured from the scheduled send to the receiver's handler",
			rate, b.ceiling, b.cfg.Duration),
		PeakRSS: rss,
		Cost:    spent,
	}
	void := m.voids(published)
	if err := p.checkLedger(warm + int64(len(published))); err != nil { // the warm-up's requests are stored too
		void = append(void, err)
	}
	if err := errors.Join(void...); err != nil {
		row.Void = err.Error()
	}
	b.add(row)
	return nil
}

// published is, for every request answered 202 (run with KeepIDs), its scheduled send time by request ID.
func (r LoadResult) published() map[int64]time.Time {
	out := make(map[int64]time.Time, len(r.Requests))
	for _, s := range r.Requests {
		if s.Status == http.StatusAccepted {
			out[s.RequestID] = s.Scheduled
		}
	}
	return out
}

// arrivalMatch is what the receiver saw, against what was published.
type arrivalMatch struct {
	first      map[int64]time.Time // the earliest arrival of each published request that arrived
	duplicates int                 // arrivals of a published request beyond its first
	unknown    int                 // arrivals of requests never published
}

// matchArrivals matches arrivals to the published requests (request ID → scheduled send).
func matchArrivals(published map[int64]time.Time, arrivals []Arrival) arrivalMatch {
	m := arrivalMatch{first: make(map[int64]time.Time, len(published))}
	for _, a := range arrivals {
		if _, ok := published[a.RequestID]; !ok {
			m.unknown++
			continue
		}
		if t, seen := m.first[a.RequestID]; seen {
			m.duplicates++
			if a.At.After(t) {
				continue
			}
		}
		m.first[a.RequestID] = a.At
	}
	return m
}

// latencies are, for each published request that arrived, the time from its scheduled send to its first arrival.
func (m arrivalMatch) latencies(published map[int64]time.Time) []time.Duration {
	out := make([]time.Duration, 0, len(m.first))
	for id, at := range m.first {
		out = append(out, at.Sub(published[id]))
	}
	return out
}

// ledger states the match as the run's ledger: published = delivered + missing, and the duplicates.
func (m arrivalMatch) ledger(published map[int64]time.Time) string {
	return fmt.Sprintf("published %d = delivered %d + missing %d; duplicates %d", len(published), len(m.first),
		len(published)-len(m.first), m.duplicates)
}

// voids are what makes a run void: arrivals of requests never published, and published requests that never
// arrived.
func (m arrivalMatch) voids(published map[int64]time.Time) []error {
	var out []error
	if m.unknown > 0 {
		out = append(out, fmt.Errorf("%d deliveries of requests never published", m.unknown))
	}
	if missing := len(published) - len(m.first); missing != 0 {
		out = append(out, fmt.Errorf("%d published requests never delivered", missing))
	}
	return out
}
