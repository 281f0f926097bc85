package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/adal-relay/adal/leader"
	"github.com/adal-relay/adal/retention"
	"github.com/adal-relay/adal/storage"
)

// purge measures retention while ingest runs at half its ceiling: PurgeRequests expired requests (two
// deliveries of three attempts each) purged, and the ingest p99 meanwhile against a run without a purge just
// before. Two purges run, one after the other:
//   - by day: the requests expired on a day that has wholly passed, in that day's partition, which the purge
//     drops (how the history is purged on PostgreSQL);
//   - by rows: the same number expired earlier today, in today's partition, which the row purge deletes
//     batch by batch (how a day still current is purged, and the whole purge before partitioning).
//
// Each row reports the history's size on disk before and after the purge, and the cost per request purged.
func (b *Runner) purge(ctx context.Context) error {
	const nowhere = "http://127.0.0.1:9" // recipients are paused: pure intake, as in the ingest scenario
	s, rate, err := b.startAtHalfCeiling("purge", layout{tenants: 100, recipients: 1, target: nowhere, paused: true})
	if err != nil {
		return err
	}
	defer s.Close()
	tr, p, fx := s.tr, s.p, s.fx
	// The days ahead exist before anything is measured, as on a server that has run a day: the fixtures'
	// plan came after the migration made the first ones.
	horizon, err := storage.PartitionHorizon(ctx, p.Relay.DB, time.Now())
	if err != nil {
		return err
	}
	if _, err := storage.EnsurePartitions(ctx, p.Relay.DB, time.Now(), horizon); err != nil {
		return err
	}
	body := body1K()
	load := Load{Rate: rate, Duration: b.cfg.Duration, Targets: fx.Inbound(), Body: body}
	b.startMeasure()
	base, err := tr.Run(ctx, load)
	if err != nil {
		return err
	}
	baseP99 := Percentile(base.Latencies(time.Time{}, time.Time{}), 0.99)

	now := time.Now().UTC()
	today := now.Truncate(24 * time.Hour)
	for _, mode := range []struct {
		name    string
		expires time.Time
	}{
		// Noon of a day a week ago: wholly past, so the purge drops it.
		{"by day", today.AddDate(0, 0, -7).Add(12 * time.Hour)},
		// Earlier today, in today's partition: the row purge's.
		{"by rows", now.Add(-min(time.Hour, now.Sub(today)/2))},
	} {
		// The expired history belongs to a tenant of its own with two (paused) recipients.
		extra, err := p.setup(1, 2, nowhere, true)
		if err != nil {
			return err
		}
		if _, err := storage.EnsurePartitions(ctx, p.Relay.DB, mode.expires, mode.expires); err != nil {
			return err
		}
		b.logf("purge %s: inserting %d expired requests with history", mode.name, b.cfg.PurgeRequests)
		if err := insertExpired(ctx, p.DB, extra.Servers[0], b.cfg.PurgeRequests, body, mode.expires); err != nil {
			return err
		}
		if err := b.purgeBesideIntake(ctx, s, load, mode.name, rate, baseP99); err != nil {
			return err
		}
	}
	return nil
}

// purgeBesideIntake runs one purge while ingest runs, and adds its row.
func (b *Runner) purgeBesideIntake(ctx context.Context, s *stage, load Load, mode string, rate float64, baseP99 time.Duration) error {
	tr, p := s.tr, s.p
	purger, err := retention.New(retention.Config{DB: p.Relay.DB, Leader: leader.Always{}})
	if err != nil {
		return err
	}
	before, err := historyBytes(ctx, p.DB)
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
	// The purge's cost: what the process spent while it ran, the intake beside it included.
	cost := b.startCosts(ctx, p.admin)
	purgeStart := time.Now()
	st, err := purger.PurgeOnce(ctx)
	purgeEnd := time.Now()
	spent := cost.stop(ctx, int64(b.cfg.PurgeRequests), "request purged")
	loaded := <-done
	rss := peakRSS()
	if err := errors.Join(err, loaded.err); err != nil {
		return err
	}
	after, err := historyBytes(ctx, p.DB)
	if err != nil {
		return err
	}
	during := loaded.res
	// A purge by day takes milliseconds: its window is widened to a second, so that its p99 rests on enough
	// requests and counts the ones queued behind the drop.
	windowEnd := purgeEnd
	if minEnd := purgeStart.Add(time.Second); windowEnd.Before(minEnd) {
		windowEnd = minEnd
	}
	inPurge := during.Latencies(purgeStart, windowEnd)
	duringP99 := Percentile(inPurge, 0.99)
	wholeP99 := Percentile(during.Latencies(time.Time{}, time.Time{}), 0.99)
	ratio := float64(duringP99) / float64(baseP99)
	row := Row{
		Scenario: "purge",
		Figure:   fmt.Sprintf("%s: ingest p99 %.2f× without a purge", mode, ratio),
		Detail: fmt.Sprintf("%d requests expired, purged in %v (%d days dropped in %v; %d requests, %d deliveries, %d attempts deleted by rows in %d batches, %d busy); "+
			"ingest p99 during the purge %s (%d requests) vs %s without, %s over the whole run; history on disk %s → %s; ingest %.0f/s",
			b.cfg.PurgeRequests, st.Elapsed.Round(time.Millisecond), st.DaysDropped, st.PartitionsTook.Round(time.Millisecond),
			st.Requests, st.Deliveries, st.Attempts,
			st.Batches, st.Busy, ms(duringP99), len(inPurge), ms(baseP99), ms(wholeP99), mib(before), mib(after),
			during.AcceptedPerSecond()),
		Target: fmt.Sprintf("ingest p99 during the purge ≤ 1.2× without: %s", met(ratio <= 1.2)),
		Settings: fmt.Sprintf("retention.PurgeOnce (batch %d) while ingest runs at %.0f/s (50%% of %.0f/s), 100 tenants × 1 paused recipient; cost§ while the purge ran, the intake beside it included",
			retention.DefaultBatchSize, rate, b.ceiling),
		PeakRSS: rss,
		Cost:    spent,
	}
	if left := int64(b.cfg.PurgeRequests) - st.Requests; st.DaysDropped == 0 && left != 0 {
		row.Void = fmt.Sprintf("purged %d of %d expired requests", st.Requests, b.cfg.PurgeRequests)
	}
	b.add(row)
	return nil
}

// historyBytes is the size on disk of the request history: the tables, their partitions, indexes and TOAST.
func historyBytes(ctx context.Context, db *sql.DB) (int64, error) {
	var n int64
	err := db.QueryRowContext(ctx, `SELECT COALESCE(sum(pg_total_relation_size(t.relid)), 0)
		FROM unnest(ARRAY['requests', 'deliveries', 'attempts']) AS h(name),
		LATERAL pg_partition_tree(h.name::regclass) AS t WHERE t.isleaf`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("measure the history: %w", err)
	}
	return n, nil
}
