package inbound

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
)

// BenchmarkStoreAccepted stores intake batches as a committer does, from its servers' read to its commit: 32
// requests of 1 KiB for the servers of 8 tenants, one recipient each. ns/op is per batch.
func BenchmarkStoreAccepted(b *testing.B) {
	const tenants, size = 8, 32
	db, ctx, keys := benchServers(b, tenants)
	svc := delivery.New(delivery.Config{Billing: billing.New(db.Dialect, time.Now), Dialect: db.Dialect,
		Now: time.Now, CLIConnected: func(*ent.Recipient, time.Time) bool { return false }})
	bt := &batcher{client: db.Client, delivery: svc, way: storeWays.For(db.DB)}
	body := bytes.Repeat([]byte("x"), 1024)
	header := http.Header{"Content-Type": {"application/json"}, "User-Agent": {"bench"}}
	live := make([]*pendingAccept, size)
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		for i := range live {
			n++
			live[i] = &pendingAccept{ctx: ctx, key: keys[i%tenants], item: delivery.Incoming{Key: fmt.Sprintf("r-%d", n),
				Request: delivery.NewRequest{Method: http.MethodPost, Header: header, Body: body, SourceAddr: "127.0.0.1"}}}
		}
		results, err := bt.store(live)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range results {
			if r.err != nil || r.req == nil {
				b.Fatalf("a request was not stored: %v", r.err)
			}
		}
	}
}
