package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/adal-relay/adal/scheduler"
)

// noisyRecipients is how many recipients the noisy tenant's server has, every one of them hanging until its
// timeout.
const noisyRecipients = 20

// noisy measures what a noisy neighbour costs another tenant: a quiet tenant, one recipient answering at once,
// sends NoisyQuietRate requests/s, and its accept → first byte p99 is measured twice in the same run on the
// same process — alone, then beside a noisy tenant that sends NoisyRate requests/s to 20 recipients that hang
// until their 30 s timeout (every delivery holds a worker as long as it can). The second phase starts once the
// noisy tenant holds its share of the workers. The figure is the ratio of the two p99s; the cost is per request
// accepted over both phases, either tenant's. The ledger must
// balance as latency's does: every quiet request answered 202 delivered once, and the database holding every
// request answered 202 (both tenants') with one debit each.
func (b *Runner) noisy(ctx context.Context) error {
	s, err := b.startStage("noisy", Refusal{}, nil, layout{tenants: 1, recipients: 1})
	if err != nil {
		return err
	}
	defer s.Close()
	tr, p, quiet := s.tr, s.p, s.fx
	noisy, err := p.setup(1, noisyRecipients, tr.ReceiverURL()+hangPath, false)
	if err != nil {
		return err
	}
	// Let the hanging calls go before the process stops: its Stop waits for attempts in flight.
	defer func() { _ = tr.Release(context.WithoutCancel(ctx)) }()
	if err := p.Start(); err != nil {
		return err
	}
	rate := b.cfg.NoisyQuietRate
	warm, err := b.warmUp(ctx, tr, p, quiet, rate)
	if err != nil {
		return err
	}
	if _, err := tr.awaitReceived(ctx, warm, time.Minute); err != nil {
		return err
	}
	quietPhase := func() (LoadResult, arrivalMatch, error) {
		if err := tr.Reset(ctx); err != nil {
			return LoadResult{}, arrivalMatch{}, err
		}
		res, err := tr.Run(ctx, Load{Rate: rate, Duration: b.cfg.Duration, Targets: quiet.Inbound(), Body: body1K(), KeepIDs: true})
		if err != nil {
			return res, arrivalMatch{}, err
		}
		published := res.published()
		if _, err := tr.awaitReceived(ctx, int64(len(published)), time.Minute); err != nil {
			return res, arrivalMatch{}, err
		}
		arrivals, err := tr.Arrivals(ctx)
		return res, matchArrivals(published, arrivals), err
	}

	b.startMeasure()
	cost := b.startCosts(ctx, p.admin)
	alone, aloneMatch, err := quietPhase()
	if err != nil {
		return fmt.Errorf("quiet tenant alone: %w", err)
	}

	// The noisy tenant's load runs through the second phase and a little beyond, from its own connections.
	share := scheduler.DefaultWorkers / 2
	noisyTenant := noisy.Servers[0].TenantID
	inFlight := func() (int64, error) {
		return p.count(`SELECT COUNT(*) FROM deliveries WHERE status = 'IN_PROGRESS' AND tenant_id = $1`, noisyTenant)
	}
	settle := 10 * time.Second
	var noisyRes LoadResult
	var noisyErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		noisyRes, noisyErr = tr.Run(ctx, Load{Rate: b.cfg.NoisyRate, Duration: settle + b.cfg.Duration + time.Second,
			Targets: noisy.Inbound(), Body: body1K(), KeepIDs: true})
	}()
	deadline := time.Now().Add(settle)
	for {
		n, err := inFlight()
		if err != nil {
			return err
		}
		if n >= int64(share) || !time.Now().Before(deadline) {
			b.logf("noisy: the noisy tenant holds %d workers; measuring the quiet tenant beside it", n)
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	var peak int64
	sampled := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if n, err := inFlight(); err == nil {
				peak = max(peak, n)
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	beside, besideMatch, err := quietPhase()
	close(stopSampling)
	<-sampled
	rss := peakRSS()
	wg.Wait()
	if err != nil {
		return fmt.Errorf("quiet tenant beside the noisy one: %w", err)
	}
	if noisyErr != nil {
		return fmt.Errorf("noisy tenant's load: %w", noisyErr)
	}
	// Both tenants' requests are the work: the quiet ones delivered, the noisy ones' deliveries held by their
	// hanging recipients.
	spent := cost.stop(ctx, int64(alone.Accepted()+beside.Accepted()+noisyRes.Accepted()), "request")

	alonePublished, besidePublished := alone.published(), beside.published()
	p99Alone := Percentile(aloneMatch.latencies(alonePublished), 0.99)
	p99Beside := Percentile(besideMatch.latencies(besidePublished), 0.99)
	ratio := 0.0
	if p99Alone > 0 {
		ratio = float64(p99Beside) / float64(p99Alone)
	}
	row := Row{
		Scenario: "noisy",
		Figure:   fmt.Sprintf("p99 %.2f× beside a noisy tenant", ratio),
		Detail: fmt.Sprintf("quiet tenant's accept → first byte p99 %s alone, %s beside; noisy tenant held at most %d of %d workers; "+
			"noisy accepted %d; ledger alone: %s; beside: %s", ms(p99Alone), ms(p99Beside), peak, scheduler.DefaultWorkers,
			noisyRes.Accepted(), aloneMatch.ledger(alonePublished), besideMatch.ledger(besidePublished)),
		Target: fmt.Sprintf("beside ≤ 2× alone: %s", met(ratio > 0 && ratio <= 2)),
		Settings: fmt.Sprintf("quiet tenant: 1 recipient answering 200, open model %.0f/s for %v per phase; noisy tenant: %d recipients hanging "+
			"until their 30 s timeout, %.0f/s; %d workers; cost§ over both phases, per request accepted of either tenant", rate, b.cfg.Duration,
			noisyRecipients, b.cfg.NoisyRate, scheduler.DefaultWorkers),
		PeakRSS: rss,
		Cost:    spent,
	}
	void := append(aloneMatch.voids(alonePublished), besideMatch.voids(besidePublished)...)
	if peak > int64(share) {
		void = append(void, fmt.Errorf("the noisy tenant held %d workers, beyond its share of %d", peak, share))
	}
	if err := p.checkLedger(warm + int64(len(alonePublished)+len(besidePublished)+noisyRes.Accepted())); err != nil {
		void = append(void, err)
	}
	if err := errors.Join(void...); err != nil {
		row.Void = err.Error()
	}
	b.add(row)
	return nil
}
