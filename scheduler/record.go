package scheduler

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/storage"
)

// recorder is where the outcomes of the worker lanes are written, for the completer and the rescuer alike:
// deliveries through delivery.RecordBatch, outbound jobs through recordOutboundAttempt (whose rule is next).
type recorder struct {
	db       *storage.DB
	delivery *delivery.Service
	logger   *slog.Logger
	// wakeOutbound, when set, is called once an outbound job was rescheduled; wakeCapped once attempts of capped
	// recipients were recorded, which frees their slots for deliveries that wait for one.
	wakeOutbound, wakeCapped func()
	// Scratch of record, reused from batch to batch.
	deliveries []delivery.Completion
	outbound   []completion
	at         []int // index in the batch of each of deliveries, then of outbound
	recorded   []bool
}

func newRecorder(db *storage.DB, d *delivery.Service, logger *slog.Logger, wakeOutbound, wakeCapped func()) *recorder {
	return &recorder{db: db, delivery: d, logger: logger, wakeOutbound: wakeOutbound, wakeCapped: wakeCapped}
}

// record stores a batch of finished attempts and reports which were recorded (false: the claim was no longer
// current, or recording failed). If a lane's part cannot be stored as one, each outcome is tried on its own, so
// one bad outcome does not cost the others their record; what still fails is left to the rescuer, which records
// the attempt as interrupted once its lease lapses. The result is valid until the next call; not safe for
// concurrent use.
func (r *recorder) record(ctx context.Context, batch []completion) []bool {
	recorded := slices.Grow(r.recorded[:0], len(batch))[:len(batch)]
	clear(recorded)
	r.recorded = recorded
	r.deliveries, r.outbound, r.at = r.deliveries[:0], r.outbound[:0], r.at[:0]
	for i, c := range batch {
		if c.outbound == nil {
			r.deliveries = append(r.deliveries, c.Completion)
			r.at = append(r.at, i)
		}
	}
	for i, c := range batch {
		if c.outbound != nil {
			r.outbound = append(r.outbound, c)
			r.at = append(r.at, i)
		}
	}
	if len(r.deliveries) > 0 {
		freed := false
		for i, ok := range r.recordDeliveries(ctx, r.deliveries) {
			recorded[r.at[i]] = ok
			freed = freed || (ok && r.deliveries[i].Claim.Capped)
		}
		if freed && r.wakeCapped != nil {
			r.wakeCapped()
		}
	}
	if len(r.outbound) > 0 {
		for i, ok := range r.recordOutbound(ctx, r.outbound) {
			recorded[r.at[len(r.deliveries)+i]] = ok
		}
	}
	return recorded
}

func (r *recorder) recordDeliveries(ctx context.Context, batch []delivery.Completion) []bool {
	recorded, err := r.delivery.RecordBatch(ctx, r.db, batch)
	if err == nil {
		return recorded
	}
	if len(batch) > 1 {
		r.logger.Warn("record attempts as a batch; recording one by one", "size", len(batch), "err", err)
	}
	recorded = make([]bool, len(batch))
	for i, c := range batch {
		if recorded[i], err = r.delivery.Record(ctx, r.db.Client, c.Claim, c.Outcome); err != nil {
			r.logger.Error("record attempt", "delivery", c.Claim.DeliveryID, "attempt", c.Claim.Attempt, "err", err)
		}
	}
	return recorded
}

func (r *recorder) recordOutbound(ctx context.Context, batch []completion) []bool {
	unit := r.delivery.Unit()
	recorded, due, err := recordOutboundTx(ctx, r.db.Client, unit, batch)
	if err != nil {
		if len(batch) > 1 {
			r.logger.Warn("record outbound attempts as a batch; recording one by one", "size", len(batch), "err", err)
		}
		recorded, due = make([]bool, len(batch)), false
		for i, c := range batch {
			ok, d, err := recordOutboundTx(ctx, r.db.Client, unit, batch[i:i+1])
			if err != nil {
				r.logger.Error("record outbound attempt", "job", c.outbound.JobID, "attempt", c.outbound.Attempt, "err", err)
			}
			recorded[i], due = ok[0], due || d
		}
	}
	if due && r.wakeOutbound != nil {
		r.wakeOutbound()
	}
	return recorded
}

// recordOutboundTx records a batch of outbound outcomes in one transaction; due reports whether one of the jobs
// was rescheduled.
func recordOutboundTx(ctx context.Context, client *ent.Client, unit time.Duration, batch []completion) (recorded []bool, due bool, err error) {
	recorded = make([]bool, len(batch))
	err = storage.InTx(ctx, client, func(ctx context.Context, tx *ent.Client) error {
		for i, c := range batch {
			ok, d, err := recordOutboundAttempt(ctx, tx, unit, *c.outbound, c.Outcome)
			if err != nil {
				return err
			}
			recorded[i], due = ok, due || d
		}
		return nil
	})
	if err != nil {
		return make([]bool, len(batch)), false, err
	}
	return recorded, due, nil
}
