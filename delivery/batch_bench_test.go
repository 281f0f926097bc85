package delivery_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/storage/dbtest"
)

// intakeBatch is what the benchmarks of a delivery's life start from: 8 tenants with one server and one direct
// recipient each, and intake-sized batches of 32 requests of 1 KiB across them, stored in one transaction per
// batch with every delivery handed to the dispatcher claimed, as intake stores them. Its tables start with a
// history of delivered requests, analyzed, as a running server's are: plans made for empty tables (sequential
// scans) are not the ones production runs.
type intakeBatch struct {
	db      *dbtest.DB
	ctx     context.Context
	svc     *delivery.Service
	targets []*ent.Server
	rec     map[int][]*ent.Recipient
	items   []delivery.Incoming
}

const benchBatch = 32

func newIntakeBatch(b *testing.B) *intakeBatch {
	db, ctx := dbtest.OpenAsSystem(b)
	f := &intakeBatch{db: db, ctx: ctx, rec: map[int][]*ent.Recipient{}, items: make([]delivery.Incoming, benchBatch),
		svc: delivery.New(delivery.Config{Billing: billing.New(db.Dialect, time.Now), Dialect: db.Dialect,
			Now: time.Now, Unit: time.Second, CLIConnected: func(*ent.Recipient, time.Time) bool { return false }})}
	plan := newPlan(b, ctx, db, 0, 1, 1)
	for range 8 {
		tn := newTenant(b, ctx, db, plan.ID, 1<<40)
		srv := newServer(b, ctx, db, tn.ID)
		rec, err := db.Client.Recipient.Create().SetTenantID(tn.ID).SetServerID(srv.ID).SetName("r").
			SetMethod(recipient.MethodDIRECT_HTTP).SetURL("http://127.0.0.1:1/").Save(ctx)
		require.NoError(b, err)
		f.targets = append(f.targets, srv)
		f.rec[srv.ID] = []*ent.Recipient{rec}
	}
	for range 200 {
		f.deliver(b, f.store(b))
	}
	if _, err := db.SQL.ExecContext(ctx, `ANALYZE`); err != nil {
		b.Fatal(err)
	}
	return f
}

// store stores one batch and returns its deliveries' claims.
func (f *intakeBatch) store(b *testing.B) []delivery.Claimed {
	body := bytes.Repeat([]byte("x"), 1024)
	header := http.Header{"Content-Type": {"application/json"}, "User-Agent": {"bench"}}
	for i := range f.items {
		srv := f.targets[i%len(f.targets)]
		f.items[i] = delivery.Incoming{Server: srv, Recipients: f.rec[srv.ID], Key: hexID(), ServerLocked: true,
			Request: delivery.NewRequest{Method: http.MethodPost, Header: header, Body: body, SourceAddr: "127.0.0.1"}}
	}
	var claimed []delivery.Claimed
	err := storage.InTx(f.ctx, f.db.Client, func(ctx context.Context, tx *ent.Client) error {
		stored, err := f.svc.StoreBatch(ctx, tx, f.items, billing.ReasonRequestAccepted,
			delivery.Handoff{Owner: "bench", Lease: time.Minute, Slots: benchBatch})
		claimed = claimed[:0]
		for _, s := range stored {
			claimed = append(claimed, s.Claimed...)
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	if len(claimed) != benchBatch {
		b.Fatalf("%d of %d deliveries were handed off", len(claimed), benchBatch)
	}
	return claimed
}

// BenchmarkStoreBatch stores intake-sized batches, one transaction per batch, as intake does. ns/op is per batch.
func BenchmarkStoreBatch(b *testing.B) {
	f := newIntakeBatch(b)
	b.ReportAllocs()
	for b.Loop() {
		f.store(b)
	}
}

// deliver records every claim's attempt as answered 200, in one RecordBatch, as the dispatcher's completer does.
func (f *intakeBatch) deliver(b *testing.B, claimed []delivery.Claimed) {
	now := time.Now()
	cs := make([]delivery.Completion, len(claimed))
	for i, c := range claimed {
		cs[i] = delivery.Completion{Claim: c.Claim,
			Outcome: delivery.Outcome{StartedAt: now, FinishedAt: now.Add(time.Millisecond), HTTPStatus: http.StatusOK}}
	}
	recorded, err := f.svc.RecordBatch(f.ctx, f.db.DB, cs)
	if err != nil {
		b.Fatal(err)
	}
	for i, ok := range recorded {
		if !ok {
			b.Fatalf("outcome %d was not recorded", i)
		}
	}
}

// BenchmarkRecordBatch records the attempts of intake-sized batches as the dispatcher's completer does: 32
// deliveries handed off at intake, each answered 200, their outcomes recorded in one RecordBatch. ns/op is per
// batch of outcomes; storing the batch is outside the timer.
func BenchmarkRecordBatch(b *testing.B) {
	f := newIntakeBatch(b)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		claimed := f.store(b)
		b.StartTimer()
		f.deliver(b, claimed)
	}
}
