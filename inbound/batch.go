package inbound

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/viewer"
)

// The batcher groups accepts that arrive together into one transaction. A request is still committed before
// its 202 — it just shares the commit (and its fsync) with its neighbours — and each tenant's credit row is
// locked once per batch instead of once per request. Nothing waits for a batch to fill: a committer takes
// whatever is queued when it is free, so a lone request goes out at once and a burst rides together.
type batcher struct {
	client   *ent.Client
	delivery *delivery.Service
	logger   *slog.Logger
	queue    chan *pendingAccept
	maxBatch int
	workers  int
	wg       sync.WaitGroup
	stop     chan struct{}
	once     sync.Once
}

type pendingAccept struct {
	ctx  context.Context
	item delivery.Incoming
	done chan acceptResult
}

type acceptResult struct {
	req *ent.Request
	err error
}

var errStopped = errors.New("intake is shutting down")

func newBatcher(client *ent.Client, d *delivery.Service, logger *slog.Logger, workers, maxBatch int) *batcher {
	b := &batcher{
		client: client, delivery: d, logger: logger,
		queue: make(chan *pendingAccept, 4*maxBatch*workers), maxBatch: maxBatch, workers: workers,
		stop: make(chan struct{}),
	}
	for range workers {
		b.wg.Add(1)
		go b.run()
	}
	return b
}

// submit queues one accept and waits for its batch to commit (or for ctx to end: the request may then still
// commit, and the sender — who got no answer — will retry, as it must for any lost response).
func (b *batcher) submit(ctx context.Context, item delivery.Incoming) (*ent.Request, error) {
	p := &pendingAccept{ctx: ctx, item: item, done: make(chan acceptResult, 1)}
	select {
	case b.queue <- p:
	case <-b.stop:
		return nil, errStopped
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r := <-p.done:
		return r.req, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (b *batcher) run() {
	defer b.wg.Done()
	batch := make([]*pendingAccept, 0, b.maxBatch)
	for {
		select {
		case <-b.stop:
			b.drain()
			return
		case p := <-b.queue:
			batch = append(batch[:0], p)
		}
	fill:
		for len(batch) < b.maxBatch {
			select {
			case p := <-b.queue:
				batch = append(batch, p)
			default:
				break fill
			}
		}
		b.commit(batch)
	}
}

// drain answers what is still queued at shutdown.
func (b *batcher) drain() {
	for {
		select {
		case p := <-b.queue:
			p.done <- acceptResult{err: errStopped}
		default:
			return
		}
	}
}

func (b *batcher) commit(batch []*pendingAccept) {
	live := batch[:0:0]
	items := make([]delivery.Incoming, 0, len(batch))
	for _, p := range batch {
		if p.ctx.Err() != nil {
			p.done <- acceptResult{err: p.ctx.Err()} // the sender is gone: store nothing it was not told of
			continue
		}
		live = append(live, p)
		items = append(items, p.item)
	}
	if len(live) == 0 {
		return
	}
	ctx := viewer.SystemContext(context.Background())
	var stored []delivery.Stored
	err := storage.InTx(ctx, b.client, func(ctx context.Context, tx *ent.Client) error {
		var err error
		stored, err = b.delivery.StoreBatch(ctx, tx, items, billing.ReasonRequestAccepted)
		return err
	})
	for i, p := range live {
		if err != nil {
			p.done <- acceptResult{err: fault.Wrap("inbound.Accept", fault.Internal, err)}
			continue
		}
		p.done <- acceptResult{req: stored[i].Request, err: stored[i].Err}
	}
	if err != nil {
		b.logger.Error("store accepted batch", "size", len(live), "err", err)
	}
}

// close stops the committers after the batches in progress.
func (b *batcher) close() {
	b.once.Do(func() { close(b.stop) })
	b.wg.Wait()
}
