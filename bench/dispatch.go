package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/scheduler"
)

// dispatch measures the delivery engine alone: DispatchDeliveries due deliveries, inserted in bulk (not through
// intake) over 10 tenants × 10 recipients, burned down to a receiver that answers 200 at once. It reports
// attempts per second and the cost of an attempt, whose SQL statements are budgeted.
func (b *Runner) dispatch(ctx context.Context) error {
	return b.burnDown(ctx, "dispatch", b.cfg.DispatchDeliveries, func(bd *burnDown) bool {
		b.dispatchRSS = bd.row.PeakRSS
		bd.row.Target = fmt.Sprintf("≥ 5,000 attempts/s: %s; ≤ 3 statements/attempt (%.2f): %s", met(bd.rate >= 5000),
			bd.perAttempt, met(bd.perAttempt <= 3))
		return true
	})
}

// backlog measures the server's memory against the size of the backlog (the budget: flat whatever the backlog,
// since claims and pages are bounded): BacklogDeliveries due deliveries — a million — burned down as dispatch
// burns down its own, and the peak RSS set beside dispatch's, whose backlog is smaller. When dispatch did not
// run in the same invocation, its burn-down runs here first as the baseline.
func (b *Runner) backlog(ctx context.Context) error {
	if b.dispatchRSS == 0 {
		b.logf("backlog: burning down %d deliveries first, as dispatch does, for the baseline", b.cfg.DispatchDeliveries)
		var void string
		err := b.burnDown(ctx, "backlog_baseline", b.cfg.DispatchDeliveries, func(bd *burnDown) bool {
			b.dispatchRSS, void = bd.row.PeakRSS, bd.row.Void
			return false // not a row of its own
		})
		if err != nil {
			return err
		}
		if void != "" {
			return fmt.Errorf("baseline: %s", void)
		}
	}
	return b.burnDown(ctx, "backlog", b.cfg.BacklogDeliveries, func(bd *burnDown) bool {
		growth := bd.row.PeakRSS - b.dispatchRSS
		bd.row.Figure = fmt.Sprintf("peak RSS %s with %d due", mib(bd.row.PeakRSS), b.cfg.BacklogDeliveries)
		bd.row.Detail = fmt.Sprintf("%s against %s burning down %d (%+.0f MiB); %.0f attempts/s; %s", mib(bd.row.PeakRSS),
			mib(b.dispatchRSS), b.cfg.DispatchDeliveries, float64(growth)/(1<<20), bd.rate, bd.row.Detail)
		bd.row.Target = fmt.Sprintf("≤ 150 MiB: %s; flat (within %s of the smaller backlog's): %s",
			met(bd.row.PeakRSS <= 150<<20), mib(flatWithin), met(growth <= flatWithin))
		return true
	})
}

// flatWithin is how much more the larger backlog's burn-down may take before the memory is not flat: more than
// runs of one size differ by, far less than a backlog held in memory would add (a million 1 KiB bodies are a
// GiB).
const flatWithin = 20 << 20

// burnDown is a burn-down's row, before its budgets are judged, and the figures they judge.
type burnDown struct {
	row        Row
	rate       float64       // attempts per second
	perAttempt float64       // SQL statements per attempt
	elapsed    time.Duration // from the process's start to the last delivery, which rate is read over
}

// burnDown inserts n due deliveries in bulk over 10 tenants × 10 recipients, starts the process, and waits for
// the receiver to have them all and the table to hold none open. judge completes the row and says whether it is
// one of the table's; it is added while the traffic process still runs, since its CPU is read then.
func (b *Runner) burnDown(ctx context.Context, scenario string, n int, judge func(*burnDown) bool) error {
	return b.burnDownTo(ctx, scenario, n, nil, judge)
}

// burnDownTo is burnDown with broker recipients publishing to place, when it is not nil. The broker's count
// is not polled, since some brokers keep none: the attempts' id sequence tells when n attempts were made, a
// read that costs the database nothing, and the place is counted once at the end.
func (b *Runner) burnDownTo(ctx context.Context, scenario string, n int, place *brokerPlace, judge func(*burnDown) bool) error {
	return b.burnDownOf(ctx, scenario, n, layout{tenants: 10, recipients: 10}, place, judge)
}

// burnDownOf is burnDownTo over the fixture l (its recipients' options — a transformation — kept; its target
// the receiver, or place's).
func (b *Runner) burnDownOf(ctx context.Context, scenario string, n int, l layout, place *brokerPlace, judge func(*burnDown) bool) error {
	var res burnDown
	if place != nil {
		l.method, l.target, l.destination = place.method, place.url, place.settings
	}
	s, err := b.startStage(scenario, Refusal{}, func(c *relay.Config) { c.Workers = b.cfg.DispatchWorkers }, l)
	if err != nil {
		return err
	}
	defer s.Close()
	tr, p, fx := s.tr, s.p, s.fx
	progress, done := tr.Received, "received"
	if place != nil {
		progress, done = p.attemptsMade, "attempted"
	}
	b.logf("%s: inserting %d due deliveries", scenario, n)
	err = insertDue(ctx, p.DB, fx, bulkDue{
		KeyPrefix: "due-", From: 0, To: int64(n - 1), Body: body1K(),
		Due: time.Now().Add(-time.Second), Traced: p.Relay.Tracing.Tracer().On(),
	})
	if err != nil {
		return err
	}
	b.startMeasure()
	b.counter.Breakdown()
	cost := b.startCosts(ctx, p.admin)
	start := time.Now()
	if err := p.Start(); err != nil {
		return err
	}
	deadline := start.Add(10 * time.Minute)
	var received int64
	lastReceived, moved := int64(-1), start
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if received, err = progress(ctx); err != nil {
			return err
		}
		if received != lastReceived {
			lastReceived, moved = received, time.Now()
		} else if place == nil && time.Since(moved) > 2*time.Second {
			// Nothing arrived for a while: if an attempt failed, its retry is minutes away and the row is void
			// whatever comes next (it says why).
			if p.failedAttempt() != nil {
				break
			}
			moved = time.Now()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %d of %d deliveries %s after %v", scenario, received, n, done, time.Since(start))
		}
		if received >= int64(n) {
			open, err := p.count(`SELECT COUNT(*) FROM deliveries WHERE status IN ('PENDING', 'IN_PROGRESS')`)
			if err != nil {
				return err
			}
			if open == 0 {
				break
			}
			if place != nil {
				// Every delivery was attempted and some are still open: a broker that refuses would keep the
				// burn-down waiting for retries until the deadline.
				if err := p.failedAttempt(); err != nil {
					return fmt.Errorf("%s: %w", scenario, err)
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(start)
	// Stopped before the bench's own counts below; its units are the attempts they find.
	spent := cost.stop(ctx, int64(n), "attempt")
	rss := peakRSS()
	attempts, succeeded, err := p.countBoth(`SELECT COUNT(*) FROM attempts`,
		`SELECT COUNT(*) FROM deliveries WHERE status = 'SUCCEEDED'`)
	if err != nil {
		return err
	}
	spent.Units = attempts
	b.logBreakdown("attempt", attempts)
	arrived, to := fmt.Sprintf("%d received", received), "receiver answers 200 at once"
	var void []string
	if place != nil {
		to = "publishing to " + place.what
		if arrived, err = place.held(ctx, int64(n)); err != nil {
			void = append(void, err.Error())
		}
	}
	res.rate, res.elapsed = float64(attempts)/elapsed.Seconds(), elapsed
	res.perAttempt = float64(spent.Statements) / float64(max(attempts, 1))
	res.row = Row{
		Scenario: scenario,
		Figure:   fmt.Sprintf("%.0f attempts/s", res.rate),
		Detail: fmt.Sprintf("%d attempts in %v, %d succeeded, %s", attempts, elapsed.Round(time.Millisecond),
			succeeded, arrived),
		Settings: fmt.Sprintf("%d due deliveries (bulk-inserted, 1 KiB bodies) over %d tenants × %d recipients, %s; workers %s; statements counted by a driver wrapper (pg_stat_statements not loaded); cost§ from the process's start to the last delivery",
			n, l.tenants, l.recipients, to, workers(b.cfg.DispatchWorkers)),
		PeakRSS: rss,
		Cost:    spent,
	}
	if attempts != int64(n) || succeeded != int64(n) {
		why := fmt.Sprintf("%d attempts and %d succeeded for %d deliveries", attempts, succeeded, n)
		if err := p.failedAttempt(); err != nil {
			why += " (" + err.Error() + ")"
		}
		void = append([]string{why}, void...)
	}
	res.row.Void = strings.Join(void, "; ")
	if judge(&res) {
		b.add(res.row)
	}
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
