// Package bulk acts on many deliveries at once: a dry run counts what a filter matches and what acting on it
// would cost; a job retries (or cancels) them all in the background, in batches, at the recipients' pace, and
// survives the death of the process running it.
//
// A job fixes the deliveries it acts on when it starts (its items, in delivery id order) and records how far it
// got in the transaction of each batch, with the batch's retries and debits: the job's row, claimed under a
// lease with SKIP LOCKED as the engine claims its work, is taken over by any process once the lease of a
// process that died lapses, and goes on after the last batch that committed. A delivery is never retried twice:
// the batch that retries it also moves the job past it, and a retry supersedes it, which no retry can then do
// again.
package bulk

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/bulkjob"
	"github.com/adal-relay/adal/ent/bulkjobitem"
	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/events"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/storage"
)

// Defaults of Config.
const (
	// DefaultMaxDeliveries is the most deliveries one job takes. A job's items are written when it starts,
	// in the transaction that starts it; more than this is better split by received time.
	DefaultMaxDeliveries = 100_000
	// DefaultMatchTimeout bounds the statement that finds what a filter matches. A search over a long time
	// range reads every body in it: past this the filter is refused as too wide rather than left running.
	DefaultMatchTimeout = 10 * time.Second
	// itemChunk is how many items one insert writes (five parameters each, well under PostgreSQL's 65,535).
	itemChunk = 5000
)

// Config configures the bulk service.
type Config struct {
	// Dialect is the database's (storage.DB.Dialect).
	Dialect string
	// Events carries job progress to bulkJobUpdated subscribers; may be nil.
	Events events.Bus
	// Wake tells the runner that a job was started (after its commit); may be nil.
	Wake          func()
	MaxDeliveries int
	MatchTimeout  time.Duration
	Logger        *slog.Logger
	Now           func() time.Time
}

// Service answers dry runs and starts and cancels jobs; the Runner runs them.
type Service struct {
	cfg Config
}

// New returns a bulk service.
func New(cfg Config) *Service {
	cfg.MaxDeliveries = cmp.Or(cfg.MaxDeliveries, DefaultMaxDeliveries)
	cfg.MatchTimeout = cmp.Or(cfg.MatchTimeout, DefaultMatchTimeout)
	if cfg.Now == nil {
		cfg.Now = storage.Now
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	return &Service{cfg: cfg}
}

// Plan is a dry run: what a job of its kind would act on now.
type Plan struct {
	// Count is how many deliveries match.
	Count int
	// Credits is what acting on all of them costs: 1 per retry, nothing to cancel.
	Credits int64
	// Balance is the tenant's balance now: a retry job stops when it runs out.
	Balance int64
	// MaxCount is the most one job takes.
	MaxCount int
}

// Plan counts the deliveries f matches for a job of kind k and what the job would cost, under client's
// viewer (another tenant's server is NOT_FOUND).
func (s *Service) Plan(ctx context.Context, client *ent.Client, k Kind, f Filter) (Plan, error) {
	op := "planBulk" + kindName(k)
	srv, q, err := s.matching(ctx, client, op, k, f)
	if err != nil {
		return Plan{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.MatchTimeout)
	defer cancel()
	n, err := q.Count(ctx)
	if err != nil {
		return Plan{}, s.matchErr(ctx, op, err)
	}
	t, err := client.Tenant.Get(ctx, srv.TenantID)
	if err != nil {
		return Plan{}, storage.Err(op, "tenant", err)
	}
	p := Plan{Count: n, Balance: t.CreditBalance, MaxCount: s.cfg.MaxDeliveries}
	if k == Retry {
		p.Credits = int64(n)
	}
	return p, nil
}

// Start starts a job of kind k on what f matches now, in client's transaction, and returns it RUNNING (or
// SUCCEEDED at once when nothing matched). Nothing is debited yet: each retry is, as the job makes it.
func (s *Service) Start(ctx context.Context, client *ent.Client, k Kind, f Filter, createdBy string) (*ent.BulkJob, error) {
	op := "bulk" + kindName(k)
	srv, q, err := s.matching(ctx, client, op, k, f)
	if err != nil {
		return nil, err
	}
	var items []item
	mctx, cancel := context.WithTimeout(ctx, s.cfg.MatchTimeout)
	err = q.Limit(s.cfg.MaxDeliveries+1).Order(entdelivery.ByID()).
		Select(entdelivery.FieldID, entdelivery.FieldRequestID, entdelivery.FieldRecipientID).Scan(mctx, &items)
	if err != nil {
		err = s.matchErr(mctx, op, err)
	}
	cancel()
	if err != nil {
		return nil, err
	}
	if len(items) > s.cfg.MaxDeliveries {
		return nil, fault.E(op, fault.InvalidInput, "the filter matches more than %d deliveries, the most one job takes: narrow it (a shorter received time range)", s.cfg.MaxDeliveries)
	}
	criteria, err := json.Marshal(f)
	if err != nil {
		return nil, fault.Wrap(op, fault.Internal, err)
	}
	now := s.cfg.Now()
	create := client.BulkJob.Create().
		SetTenantID(srv.TenantID).SetServerID(srv.ID).SetKind(k).SetCriteria(criteria).
		SetTotal(len(items)).SetCreatedBy(createdBy).SetCreatedAt(now).SetUpdatedAt(now)
	if len(items) == 0 {
		create.SetStatus(bulkjob.StatusSUCCEEDED).SetFinishedAt(now)
	}
	job, err := create.Save(ctx)
	if err != nil {
		return nil, storage.Err(op, "bulk job", err)
	}
	for from := 0; from < len(items); from += itemChunk {
		chunk := items[from:min(from+itemChunk, len(items))]
		builders := make([]*ent.BulkJobItemCreate, len(chunk))
		for i, it := range chunk {
			builders[i] = client.BulkJobItem.Create().SetTenantID(srv.TenantID).SetJobID(job.ID).
				SetDeliveryID(it.DeliveryID).SetRequestID(it.RequestID).SetRecipientID(it.RecipientID)
		}
		if err := client.BulkJobItem.CreateBulk(builders...).Exec(ctx); err != nil {
			return nil, storage.Err(op, "bulk job item", err)
		}
	}
	storage.AfterCommit(ctx, func() {
		if s.cfg.Wake != nil && len(items) > 0 {
			s.cfg.Wake()
		}
		publish(s.cfg.Events, s.cfg.Logger, job)
	})
	return job, nil
}

// item is a delivery a job acts on.
type item struct {
	DeliveryID  int `sql:"id"`
	RequestID   int `sql:"request_id"`
	RecipientID int `sql:"recipient_id"`
}

// matching validates f and returns its server and the query of what it matches.
func (s *Service) matching(ctx context.Context, client *ent.Client, op string, k Kind, f Filter) (*ent.Server, *ent.DeliveryQuery, error) {
	term, err := f.validate(op, k)
	if err != nil {
		return nil, nil, err
	}
	// Read under the caller's viewer: another tenant's server or recipient is NOT_FOUND.
	srv, err := client.Server.Get(ctx, f.ServerID)
	if err != nil {
		return nil, nil, storage.Err(op, "server", err)
	}
	if f.RecipientID != nil {
		if _, err := client.Recipient.Query().
			Where(recipient.ID(*f.RecipientID), recipient.ServerID(f.ServerID)).Only(ctx); err != nil {
			return nil, nil, storage.Err(op, "recipient", err)
		}
	}
	return srv, f.deliveries(client, s.cfg.Dialect, k, term, s.cfg.Now()), nil
}

// matchErr is the error of a statement that found what a filter matches.
func (s *Service) matchErr(ctx context.Context, op string, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fault.E(op, fault.InvalidInput, "the filter took longer than %v to evaluate: narrow it (a shorter received time range)", s.cfg.MatchTimeout)
	}
	return storage.Err(op, "delivery", err)
}

// CancelJob stops a running job: what it did stays done, nothing more is. CONFLICT when it already ended.
func (s *Service) CancelJob(ctx context.Context, client *ent.Client, id int) (*ent.BulkJob, error) {
	const op = "cancelBulkJob"
	job, err := client.BulkJob.Get(ctx, id)
	if err != nil {
		return nil, storage.Err(op, "bulk job", err)
	}
	now := s.cfg.Now()
	n, err := client.BulkJob.Update().Where(bulkjob.ID(id), bulkjob.StatusEQ(bulkjob.StatusRUNNING)).
		SetStatus(bulkjob.StatusCANCELED).SetFinishedAt(now).SetUpdatedAt(now).
		SetLeaseOwner("").ClearLeaseExpiresAt().
		Save(ctx)
	if err != nil {
		return nil, storage.Err(op, "bulk job", err)
	}
	if n == 0 {
		return nil, fault.E(op, fault.Conflict, "the job already ended: %s", job.Status)
	}
	if _, err := client.BulkJobItem.Delete().Where(bulkjobitem.JobID(id)).Exec(ctx); err != nil {
		return nil, storage.Err(op, "bulk job item", err)
	}
	if job, err = client.BulkJob.Get(ctx, id); err != nil {
		return nil, storage.Err(op, "bulk job", err)
	}
	storage.AfterCommit(ctx, func() { publish(s.cfg.Events, s.cfg.Logger, job) })
	return job, nil
}

// FilterOf is the filter a job was started with.
func FilterOf(job *ent.BulkJob) (Filter, error) {
	var f Filter
	if err := json.Unmarshal(job.Criteria, &f); err != nil {
		return Filter{}, fmt.Errorf("bulk job %d filter: %w", job.ID, err)
	}
	return f, nil
}

// publish tells the job's subscribers, after the commit that changed it, that it changed. Events are hints:
// a failed publish is logged, and subscribers re-read the job on the next.
func publish(bus events.Bus, logger *slog.Logger, job *ent.BulkJob) {
	if bus == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := bus.Publish(ctx, events.Event{TenantID: job.TenantID, Kind: events.KindBulkJob, BulkJobID: job.ID,
		Status: string(job.Status)}); err != nil {
		logger.Warn("publish bulk job event", "job", job.ID, "err", err)
	}
}

func kindName(k Kind) string {
	if k == Cancel {
		return "Cancel"
	}
	return "Retry"
}
