package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/adal-relay/adal/internal/invoice"
	"github.com/lib/pq"
)

// The shaping scenario's bodies, their type (read at "type") and its schema.
const (
	shapingType   = invoice.Type
	shapingSchema = invoice.Schema
)

var shapingBody, shapingInvalid = invoice.Body, invoice.Invalid

// shapingTransform is a small transformation: one header added and the body wrapped, which the receiver counts
// (shapedHeader, shapedPrefix) so that a run whose attempts were not transformed is void.
const shapingTransform = `function transform(r) { r.headers["x-shaped"] = "1"; r.body = {data: r.body}; return r; }`

// shapingScript is a transformation that calls a function, which takes the JavaScript engine: plain ones like
// shapingTransform are run without it (docs/shaping.md). It reads the body, so the engine parses it and
// serializes it again. It arrives shaped as shapingTransform's do.
const shapingScript = `function transform(r) { r.headers["x-shaped"] = "1"; r.headers["x-event"] = r.body.type.toUpperCase(); r.body = {data: r.body}; return r; }`

// shapedHeader and shapedPrefix are how an attempt shaped by shapingTransform arrives.
const (
	shapedHeader = "X-Shaped"
	shapedPrefix = `{"data":`
)

// shapingTenants is the intake's tenants per side, one server each, as ingest's 100-tenant layout.
const shapingTenants = 100

// shapingOrder is the order of the runs, true for the feature's side: interleaved, so that a machine drifting
// over the scenario weighs on both sides alike.
var shapingOrder = []bool{false, true, true, false}

// shapingDispatchOrder is the order of the burn-downs: 0 without a transformation, 1 with shapingTransform,
// 2 with shapingScript.
var shapingDispatchOrder = []int{0, 1, 2, 2, 1, 0}

// shaping measures what the shaping features (docs/shaping.md) cost on the paths they add to, each beside the
// same work without them in the same invocation, runs interleaved as shapingOrder says:
//   - intake, on one process: servers that read the type at "type" and validate ENFORCE against shapingSchema,
//     against servers that type nothing, the same bodies offered at ShapingRate;
//   - dispatch: the burn-down of ShapingDeliveries due deliveries to recipients running shapingTransform,
//     and to recipients running shapingScript, against the same burn-down without, each run on a fresh
//     process and database.
//
// Each side is one row summing its two runs; the feature's row gives its rate and its CPU per unit as ratios to
// the other's, judged against the budget: ≥ 0.8× the rate, so ≤ 1/0.8× the CPU per unit.
func (b *Runner) shaping(ctx context.Context) error {
	var errs []string
	if err := b.shapingIntake(ctx); err != nil {
		errs = append(errs, "intake: "+err.Error())
	}
	if ctx.Err() == nil {
		if err := b.shapingDispatch(ctx); err != nil {
			errs = append(errs, "dispatch: "+err.Error())
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; ")) // one line: Run puts it in a row of the Markdown table
	}
	return nil
}

// shapingSide is one side of the shaping scenario's A/B, summed over its runs.
type shapingSide struct {
	cost    Cost
	elapsed time.Duration // the runs' spans, the rate is read over
	runs    []string      // each run's rate
	// from and to are the CPU readings of the runs together: to is moved on by each run's span alone.
	from, to cpuReading
	loads    []string
	rss      int64
	void     []string
}

// add counts one run: its cost, the span its rate is read over, its CPU readings, load and peak RSS.
func (s *shapingSide) add(k Cost, elapsed time.Duration, from, to cpuReading, load string, rss int64) {
	if s.cost.Unit == "" {
		s.from, s.to = from, from
	}
	s.to = s.to.after(from, to)
	s.cost = s.cost.plus(k)
	s.elapsed += elapsed
	run := "?"
	if elapsed > 0 {
		run = fmt.Sprintf("%.0f", float64(k.Units)/elapsed.Seconds())
	}
	s.runs = append(s.runs, run)
	s.loads = append(s.loads, load)
	s.rss = max(s.rss, rss)
}

func (s *shapingSide) rate() float64 {
	if s.elapsed <= 0 {
		return 0
	}
	return float64(s.cost.Units) / s.elapsed.Seconds()
}

// row is the side's row, its load and cores busy those of its runs.
func (s *shapingSide) row(scenario, figure, detail, target, settings string) Row {
	return Row{Scenario: scenario, Figure: figure, Detail: detail, Target: target, Settings: settings, PeakRSS: s.rss,
		Void: strings.Join(s.void, "; "), Load: strings.Join(s.loads, ", "), CPU: coresBusy(s.from, s.to), Cost: s.cost}
}

// shapingJudge compares the feature's side with the reference: the figure's ratio, the detail's CPU figures and
// the verdict. Per unit, the rate's budget of ≥ 0.8× is a CPU of ≤ 1/0.8 = 1.25×.
func shapingJudge(with, without *shapingSide, unit, rateUnit string) (ratio, cpu, target string) {
	cw, co := with.cost.cpuPer1000(), without.cost.cpuPer1000()
	cpu = fmt.Sprintf("CPU-ms per 1,000 %ss %s against %s", unit, sig3(cw), sig3(co))
	if without.rate() <= 0 || co <= 0 {
		return "(no reference)", cpu, "≥ 0.8× without: no reference"
	}
	r, c := with.rate()/without.rate(), cw/co
	return fmt.Sprintf("(%.2f× without)", r), cpu + fmt.Sprintf(" (%.2f×)", c),
		fmt.Sprintf("%s ≥ 0.8× without (%.2f×): %s; CPU per %s ≤ 1.25× without (%.2f×): %s", rateUnit, r, met(r >= 0.8),
			unit, c, met(c <= 1.25))
}

func (b *Runner) loadSpan() string { return fmt.Sprintf("%.1f → %.1f", b.loadAtStart, loadAverage()) }

// shapingIntake runs the intake side by side: one process with both sides' servers, one load per run.
func (b *Runner) shapingIntake(ctx context.Context) error {
	plainL := layout{tenants: shapingTenants, recipients: 1, target: "http://127.0.0.1:9", paused: true}
	s, err := b.startStage("shaping_intake", Refusal{}, nil, plainL)
	if err != nil {
		return err
	}
	defer s.Close()
	tr, p, plain := s.tr, s.p, s.fx
	typedL := plainL
	typedL.server = map[string]any{"eventTypePath": "type", "schemaValidation": "ENFORCE"}
	typedL.eventTypes = map[string]string{shapingType: shapingSchema}
	typed, err := p.setupLayout(typedL)
	if err != nil {
		return err
	}
	if err := p.Start(); err != nil {
		return err
	}
	body, rate := shapingBody(), b.cfg.ShapingRate
	// Every server's key and every tenant's schemas loaded before the first run, and the tables analyzed.
	accepted, err := b.warmUpWith(ctx, tr, p, slices.Concat(plain.Inbound(), typed.Inbound()), body, rate/2)
	if err != nil {
		return err
	}
	var sides [2]shapingSide // without, with
	var others, failed, refused [2]int
	for _, with := range shapingOrder {
		if err := ctx.Err(); err != nil {
			return err
		}
		side, fx := 0, plain
		if with {
			side, fx = 1, typed
		}
		b.startMeasure()
		cost := b.startCosts(ctx, p.admin)
		res, err := tr.Run(ctx, Load{Rate: rate, Duration: b.cfg.Duration, Targets: fx.Inbound(), Body: body})
		if err != nil {
			return err
		}
		spent := cost.stop(ctx, int64(res.Accepted()), "request")
		sides[side].add(spent, res.End.Sub(res.Start), b.cpuAtStart, b.readCPU(), b.loadSpan(), peakRSS())
		accepted += int64(res.Accepted())
		others[side] += res.Others()
		failed[side] += res.Failed()
		refused[side] += res.count(http.StatusUnprocessableEntity)
	}
	without, with := &sides[0], &sides[1]
	// The validated side must have validated: a body outside the schema refused, every request it stored typed,
	// and none of the plain side's.
	probe, err := p.probe422(typed.Servers[0].InboundURL, shapingInvalid())
	if err != nil {
		with.void = append(with.void, err.Error())
	}
	ids := make([]int64, len(typed.Servers))
	for i, srv := range typed.Servers {
		ids[i] = srv.ID
	}
	mistyped, err := p.count(`SELECT COUNT(*) FROM requests WHERE (server_id = ANY($1)) <> (event_type = $2)`,
		pq.Array(ids), shapingType)
	switch {
	case err != nil:
		return err
	case mistyped > 0:
		with.void = append(with.void, fmt.Sprintf("%d requests typed otherwise than their server says", mistyped))
	}
	if refused[1] > 0 {
		with.void = append(with.void, fmt.Sprintf("%d bodies that follow the schema answered 422", refused[1]))
	}
	if err := p.checkLedger(accepted); err != nil {
		without.void = append(without.void, err.Error())
		with.void = append(with.void, err.Error())
	}
	if both := 0.98 * rate; without.rate() >= both && with.rate() >= both {
		b.logf("shaping intake: both sides sustained the offered rate (%.0f/s): the rate's ratio says nothing, the CPU's does (offer more with -shaping-rate)", rate)
	}
	ratio, cpu, target := shapingJudge(with, without, "request", "requests/s")
	settings := fmt.Sprintf("%d tenants × 1 server × 1 recipient (paused: pure intake) per side, both sides on one process; "+
		"%d B JSON bodies; open model at %.0f/s for %v per run, ≤ 512 client connections; runs plain, ENFORCE, ENFORCE, plain%s",
		shapingTenants, len(body), rate, b.cfg.Duration, b.committersSetting())
	b.add(without.row("shaping intake plain",
		fmt.Sprintf("%.0f accepted req/s", without.rate()),
		fmt.Sprintf("runs %s req/s; non-202 %d, unanswered %d; servers with no event type source", strings.Join(without.runs, ", "),
			others[0], failed[0]),
		"none: the reference of ENFORCE's ratios", settings))
	b.add(with.row("shaping intake ENFORCE",
		fmt.Sprintf("%.0f accepted req/s %s", with.rate(), ratio),
		fmt.Sprintf("%s; runs %s req/s; non-202 %d (422 %d), unanswered %d; every request of these servers typed %s, "+
			"none of the plain ones; a body outside the schema answered %s", cpu, strings.Join(with.runs, ", "), others[1],
			refused[1], failed[1], shapingType, probe),
		target, settings+fmt.Sprintf("; servers reading the type at \"type\", schemaValidation ENFORCE, a schema of %d B "+
			"(12 properties, a required list, nested objects, enums, patterns) that the bodies follow", len(shapingSchema))))
	return nil
}

// probe422 sends body to url and says how it was refused; the error says it was not refused with a 422.
func (p *Process) probe422(url string, body []byte) (string, error) {
	resp, err := p.client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return "no answer", fmt.Errorf("the body outside the schema: %w", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var answer struct {
		Pointer string `json:"pointer"`
	}
	_ = json.Unmarshal(raw, &answer)
	got := fmt.Sprintf("%d at %q", resp.StatusCode, answer.Pointer)
	if resp.StatusCode != http.StatusUnprocessableEntity || answer.Pointer != "/currency" {
		return got, fmt.Errorf("the body outside the schema answered %s: %s", got, bytes.TrimSpace(raw))
	}
	return got, nil
}

// shapingDispatch runs the burn-downs, with each transformation and without.
func (b *Runner) shapingDispatch(ctx context.Context) error {
	n := b.cfg.ShapingDeliveries
	var sides [3]shapingSide
	var settings [3]string
	var shaped [3]int64
	for _, side := range shapingDispatchOrder {
		scenario, l := "shaping_dispatch", layout{tenants: 10, recipients: 10}
		switch side {
		case 1:
			scenario, l.transform = "shaping_dispatch_transform", shapingTransform
		case 2:
			scenario, l.transform = "shaping_dispatch_script", shapingScript
		}
		s := &sides[side]
		err := b.burnDownOf(ctx, scenario, n, l, nil, func(bd *burnDown) bool {
			s.add(bd.row.Cost, bd.elapsed, b.cpuAtStart, b.readCPU(), b.loadSpan(), bd.row.PeakRSS)
			settings[side] = bd.row.Settings
			if bd.row.Void != "" {
				s.void = append(s.void, bd.row.Void)
			}
			// Every attempt of a transformed side arrives shaped, none of the other's.
			got, err := b.traffic.Shaped(ctx)
			want := int64(0)
			if side > 0 && err == nil {
				want, err = b.traffic.Received(ctx)
			}
			if err != nil {
				s.void = append(s.void, err.Error())
			} else if got != want {
				s.void = append(s.void, fmt.Sprintf("%d of the attempts received arrived shaped, want %d", got, want))
			}
			shaped[side] += got
			return false // the side's row sums its runs
		})
		if err != nil {
			return err
		}
	}
	without := &sides[0]
	runs := "; runs plain, transform, script, script, transform, plain, each on a fresh process and database"
	b.add(without.row("shaping dispatch plain",
		fmt.Sprintf("%.0f attempts/s", without.rate()),
		fmt.Sprintf("%d attempts, runs %s attempts/s; %d arrived shaped", without.cost.Units, strings.Join(without.runs, ", "),
			shaped[0]),
		"none: the reference of the transformations' ratios", settings[0]+runs))
	for _, what := range []struct {
		side              int
		name, source, how string
	}{
		{1, "transform", shapingTransform, "a plain transformation, run without the JavaScript engine"},
		{2, "script", shapingScript, "a transformation that calls a function, run in the JavaScript engine"},
	} {
		side := what.side
		with := &sides[side]
		ratio, cpu, target := shapingJudge(with, without, "attempt", "attempts/s")
		b.add(with.row("shaping dispatch "+what.name,
			fmt.Sprintf("%.0f attempts/s %s", with.rate(), ratio),
			fmt.Sprintf("%s; %d attempts, runs %s attempts/s; %d arrived shaped (%s header, body wrapped in data)", cpu,
				with.cost.Units, strings.Join(with.runs, ", "), shaped[side], shapedHeader),
			target, settings[side]+runs+"; every recipient transforms, "+what.how+": "+what.source))
	}
	return nil
}
