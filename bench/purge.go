package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/adal-relay/adal/leader"
	"github.com/adal-relay/adal/retention"
)

// purge measures retention: PurgeRequests expired requests (two deliveries of three attempts each) purged while
// ingest runs at half its ceiling, and the ingest p99 during the purge against a baseline run just before.
func (b *Runner) purge(ctx context.Context) error {
	const nowhere = "http://127.0.0.1:9" // recipients are paused: pure intake, as in the ingest scenario
	s, rate, err := b.startAtHalfCeiling("purge", layout{tenants: 100, recipients: 1, target: nowhere, paused: true})
	if err != nil {
		return err
	}
	defer s.Close()
	tr, p, fx := s.tr, s.p, s.fx
	body := body1K()
	load := Load{Rate: rate, Duration: b.cfg.Duration, Targets: fx.Inbound(), Body: body}
	b.startMeasure()
	base, err := tr.Run(ctx, load)
	if err != nil {
		return err
	}
	baseP99 := Percentile(base.Latencies(time.Time{}, time.Time{}), 0.99)

	// The expired history belongs to a tenant of its own with two (paused) recipients.
	extra, err := p.setup(1, 2, nowhere, true)
	if err != nil {
		return err
	}
	b.logf("purge: inserting %d expired requests with history", b.cfg.PurgeRequests)
	if err := insertExpired(ctx, p.DB, extra.Servers[0], b.cfg.PurgeRequests, body); err != nil {
		return err
	}
	purger, err := retention.New(retention.Config{DB: p.Relay.DB, Leader: leader.Always{}})
	if err != nil {
		return err
	}
	b.startMeasure()
	load.Duration = 2 * b.cfg.Duration
	type ran struct {
		res LoadResult
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := tr.Run(ctx, load)
		done <- ran{res, err}
	}()
	time.Sleep(time.Second)
	purgeStart := time.Now()
	st, err := purger.PurgeOnce(ctx)
	purgeEnd := time.Now()
	loaded := <-done
	rss := peakRSS()
	if err := errors.Join(err, loaded.err); err != nil {
		return err
	}
	during := loaded.res
	inPurge := during.Latencies(purgeStart, purgeEnd)
	duringP99 := Percentile(inPurge, 0.99)
	rps := st.RequestsPerSecond()
	row := Row{
		Scenario: "purge",
		Figure:   fmt.Sprintf("%.0f requests/s purged", rps),
		Detail: fmt.Sprintf("%d requests, %d deliveries, %d attempts in %v (%.0f rows/s, %d batches, longest %v, %d busy); ingest p99 during purge %s (%d requests) vs %s baseline; ingest over the whole run %.0f/s",
			st.Requests, st.Deliveries, st.Attempts, st.Elapsed.Round(time.Millisecond), st.RowsPerSecond(), st.Batches,
			st.LongestBatch.Round(time.Millisecond), st.Busy, ms(duringP99), len(inPurge), ms(baseP99), during.AcceptedPerSecond()),
		Target: fmt.Sprintf("≥ 20,000 requests/s: %s", met(rps >= 20000)),
		Settings: fmt.Sprintf("retention.PurgeOnce (batch %d) while ingest runs at %.0f/s (50%% of %.0f/s), 100 tenants × 1 paused recipient",
			retention.DefaultBatchSize, rate, b.ceiling),
		PeakRSS: rss,
	}
	if st.Requests != int64(b.cfg.PurgeRequests) {
		row.Void = fmt.Sprintf("purged %d of %d expired requests", st.Requests, b.cfg.PurgeRequests)
	}
	b.add(row)
	return nil
}
