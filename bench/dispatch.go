package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/scheduler"
)

// dispatch measures the delivery engine alone: DispatchDeliveries due deliveries, inserted in bulk (not through
// intake) over 10 tenants × 10 recipients, burned down to a receiver that answers 200 at once. It reports
// attempts per second and the SQL statements the process sent per attempt.
func (b *Runner) dispatch(ctx context.Context) error {
	tr, err := b.startTraffic(Refusal{})
	if err != nil {
		return err
	}
	defer tr.Close()
	p, err := b.startProcess("dispatch", func(c *relay.Config) { c.Workers = b.cfg.DispatchWorkers })
	if err != nil {
		return err
	}
	defer p.Close()
	fx, err := p.setup(10, 10, tr.ReceiverURL(), false)
	if err != nil {
		return err
	}
	n := b.cfg.DispatchDeliveries
	b.logf("dispatch: inserting %d due deliveries", n)
	err = insertDue(ctx, p.DB, fx, bulkDue{
		KeyPrefix: "due-", From: 0, To: int64(n - 1), Body: body1K(),
		Due: time.Now().Add(-time.Second),
	})
	if err != nil {
		return err
	}
	b.startMeasure()
	b.counter.Breakdown()
	before := b.counter.Read()
	start := time.Now()
	if err := p.Start(); err != nil {
		return err
	}
	deadline := start.Add(10 * time.Minute)
	var received int64
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if received, err = tr.Received(ctx); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("dispatch: %d of %d deliveries received after %v", received, n, time.Since(start))
		}
		if received >= int64(n) {
			open, err := p.count(`SELECT COUNT(*) FROM deliveries WHERE status IN ('PENDING', 'IN_PROGRESS')`)
			if err != nil {
				return err
			}
			if open == 0 {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(start)
	used := b.counter.Read().Sub(before)
	rss := peakRSS()
	attempts, err := p.count(`SELECT COUNT(*) FROM attempts`)
	if err != nil {
		return err
	}
	succeeded, err := p.count(`SELECT COUNT(*) FROM deliveries WHERE status = 'SUCCEEDED'`)
	if err != nil {
		return err
	}
	b.logBreakdown("attempt", attempts)
	rate := float64(attempts) / elapsed.Seconds()
	perAttempt := float64(used.Statements) / float64(attempts)
	withTx := float64(used.Statements+used.TxControl) / float64(attempts)
	row := Row{
		Scenario: "dispatch",
		Figure:   fmt.Sprintf("%.0f attempts/s", rate),
		Detail: fmt.Sprintf("%d attempts in %v, %d succeeded, %d received; %.2f SQL statements per attempt (%.2f with BEGIN/COMMIT)",
			attempts, elapsed.Round(time.Millisecond), succeeded, received, perAttempt, withTx),
		Target: fmt.Sprintf("≥ 5,000 attempts/s: %s; ≤ 3 statements/attempt: %s", met(rate >= 5000), met(perAttempt <= 3)),
		Settings: fmt.Sprintf("%d due deliveries (bulk-inserted, 1 KiB bodies) over 10 tenants × 10 recipients, receiver answers 200 at once; workers %s; statements counted by a driver wrapper (pg_stat_statements not loaded)",
			n, workers(b.cfg.DispatchWorkers)),
		PeakRSS: rss,
	}
	if attempts != int64(n) || succeeded != int64(n) {
		row.Void = fmt.Sprintf("%d attempts and %d succeeded for %d deliveries", attempts, succeeded, n)
	}
	b.add(row)
	return nil
}

func workers(n int) string {
	if n == 0 {
		return fmt.Sprintf("%d (default)", scheduler.DefaultWorkers)
	}
	return fmt.Sprint(n)
}

// logBreakdown logs the statements counted since the last reset, most frequent first, per unit of work.
func (b *Runner) logBreakdown(per string, n int64) {
	if !b.cfg.SQLBreakdown {
		return
	}
	type kv struct {
		sql string
		n   int64
	}
	var all []kv
	for q, n := range b.counter.Breakdown() {
		all = append(all, kv{q, n})
	}
	slices.SortFunc(all, func(a, b kv) int { return cmp.Compare(b.n, a.n) })
	for _, e := range all {
		b.logf("  %8d  %5.2f per %s  %s", e.n, float64(e.n)/float64(max(n, 1)), per, e.sql)
	}
}
