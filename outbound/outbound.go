// Package outbound accepts standalone HTTP jobs a tenant submits through the API (validation, idempotency key,
// one credit) and purges them when their retention ends. The jobs are a lane of the engine (package scheduler),
// which claims, executes, records and rescues their attempts on the STEPPED schedule, with the same sender and
// workers as deliveries.
package outbound

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	entsql "entgo.io/ent/dialect/sql"

	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/ledgerentry"
	"github.com/adal-relay/adal/ent/outboundattempt"
	"github.com/adal-relay/adal/ent/outboundjob"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/retention"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/viewer"
	"github.com/adal-relay/adal/webhook"
)

// Limits of a job: the attempts and the schedule are the product's, not the tenant's.
const (
	// MaxAttempts is the number of attempts of a job, the first included.
	MaxAttempts = 10
	// Schedule is the retry schedule of every job.
	Schedule = delivery.Stepped
	// DefaultTimeout bounds one attempt, reading the whole response included.
	DefaultTimeout = delivery.DefaultTimeout
	// DefaultMaxBody caps a job's request body.
	DefaultMaxBody = 1 << 20
	// MaxStoredResponse caps each stored response body (64 KiB); the rest is read and discarded.
	MaxStoredResponse = delivery.MaxStoredResponse

	maxURL            = 8 << 10
	maxMethod         = 32
	maxHeaders        = 100
	maxHeaderBytes    = 64 << 10
	maxIdempotencyKey = 255
	// maxClaimTries bounds the rounds of Send against concurrent submissions and purges of one key; each
	// round that does not finish saw another transaction change the key's holder.
	maxClaimTries = 5
)

// Config configures the service.
type Config struct {
	Billing *billing.Service
	// Dialect is the database's (storage.DB.Dialect), for the purge's row locks.
	Dialect string
	// Timeout bounds an attempt including reading the response; default DefaultTimeout. Tests shorten it.
	Timeout time.Duration
	// MaxBody caps request bodies; default DefaultMaxBody.
	MaxBody int
	Now     func() time.Time
	// Wake is called once a job became due (submitted, or rescheduled) and that change committed; may be nil.
	Wake func()
}

// purgeLocks lock the purge's jobs on each dialect: on PostgreSQL the rows, skipping those another
// transaction holds; on SQLite the transaction already holds the database's one write lock.
var purgeLocks = storage.PerDialect[func(*ent.OutboundJobQuery)]{
	Postgres: func(q *ent.OutboundJobQuery) { q.ForUpdate(entsql.WithLockAction(entsql.SkipLocked)) },
	SQLite:   func(*ent.OutboundJobQuery) {},
}

// Service accepts and purges outbound jobs.
type Service struct {
	cfg Config
}

// New returns an outbound service.
func New(cfg Config) *Service {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{cfg: cfg}
}

// Timeout is the limit of one attempt, reading the response included.
func (s *Service) Timeout() time.Duration { return s.cfg.Timeout }

// MaxBody is the largest request body a job may carry, in bytes.
func (s *Service) MaxBody() int { return s.cfg.MaxBody }

// SendInput is a job as submitted.
type SendInput struct {
	// TenantID owns the job; zero means the viewer's tenant.
	TenantID int
	URL      string
	// Method defaults to POST.
	Method  string
	Headers http.Header
	Body    []byte
	// IdempotencyKey, when set, makes a second submission with the same key a DUPLICATE while the first job
	// is retained. It is not sent to the target.
	IdempotencyKey    *string
	StoreResponseBody bool
}

// Send accepts a job and returns it at once. A new job is PENDING, due now, and costs one credit
// (INSUFFICIENT_CREDITS stores nothing). With an idempotency key held by a retained job of the tenant, the
// result is a DUPLICATE pointing at that job, never executed and free. Concurrent submissions of one key
// produce exactly one original: the unique (tenant_id, idempotency_claim) index decides, through an
// INSERT … ON CONFLICT DO NOTHING that waits for the competing transaction instead of failing, so a Postgres
// transaction around Send is never aborted by the race.
func (s *Service) Send(ctx context.Context, client *ent.Client, in SendInput) (*ent.OutboundJob, error) {
	const op = "outbound.Send"
	v, _ := viewer.FromContext(ctx)
	if v.Role == viewer.Member {
		// An outbound job is an HTTP call anywhere, paid from the tenant's credits: the owner's decision.
		return nil, fault.E(op, fault.Forbidden, "a member cannot send outbound requests: use an owner's token")
	}
	if in.TenantID == 0 {
		in.TenantID = v.TenantID
	}
	if in.TenantID == 0 {
		return nil, fault.E(op, fault.InvalidInput, "an outbound job belongs to a tenant: send it with a tenant's token")
	}
	if err := s.normalize(op, &in); err != nil {
		return nil, err
	}
	var job *ent.OutboundJob
	err := storage.InTx(ctx, client, func(ctx context.Context, tx *ent.Client) error {
		var err error
		job, err = s.send(ctx, tx, in)
		return err
	})
	if err != nil {
		return nil, err
	}
	return job, nil
}

func (s *Service) send(ctx context.Context, tx *ent.Client, in SendInput) (*ent.OutboundJob, error) {
	const op = "outbound.Send"
	plan, err := billing.PlanOf(ctx, tx, in.TenantID)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	expires := retention.ExpiresAt(now, plan.RetentionDays)
	create := func() *ent.OutboundJobCreate {
		return tx.OutboundJob.Create().
			SetTenantID(in.TenantID).
			SetURL(in.URL).
			SetMethod(in.Method).
			SetHeaders(in.Headers).
			SetBody(in.Body).
			SetNillableIdempotencyKey(in.IdempotencyKey).
			SetStoreResponseBody(in.StoreResponseBody).
			SetMaxAttempts(MaxAttempts).
			SetCreatedAt(now).
			SetExpiresAt(expires)
	}
	if in.IdempotencyKey == nil {
		job, err := create().SetNextAttemptAt(now).Save(ctx)
		if err != nil {
			return nil, storage.Err(op, "outbound job", err)
		}
		return s.charge(ctx, tx, job)
	}
	key := *in.IdempotencyKey
	for range maxClaimTries {
		id, err := create().SetIdempotencyClaim(key).SetNextAttemptAt(now).
			OnConflictColumns(outboundjob.FieldTenantID, outboundjob.FieldIdempotencyClaim).
			DoNothing().
			ID(ctx)
		if err == nil {
			job, err := tx.OutboundJob.Get(ctx, id)
			if err != nil {
				return nil, storage.Err(op, "outbound job", err)
			}
			return s.charge(ctx, tx, job)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, storage.Err(op, "outbound job", err)
		}
		// The key is held. Under Postgres' READ COMMITTED this query sees the holder the insert waited for.
		orig, err := tx.OutboundJob.Query().
			Where(outboundjob.TenantID(in.TenantID), outboundjob.IdempotencyClaim(key)).
			Only(ctx)
		if ent.IsNotFound(err) {
			continue // purged or released since the insert: try again
		}
		if err != nil {
			return nil, storage.Err(op, "outbound job", err)
		}
		if !retention.Expired(orig.ExpiresAt, now) {
			dup, err := create().
				SetStatus(outboundjob.StatusDUPLICATE).
				SetDuplicateOfID(orig.ID).
				SetFinishedAt(now).
				Save(ctx)
			if err != nil {
				return nil, storage.Err(op, "outbound job", err)
			}
			return dup, nil
		}
		// The holder's retention ended but the purge has not come by yet: the key is free again, so
		// the expired job gives up its claim. The condition makes one of several concurrent releases win.
		if err := tx.OutboundJob.Update().
			Where(outboundjob.ID(orig.ID), outboundjob.IdempotencyClaim(key)).
			ClearIdempotencyClaim().
			Exec(ctx); err != nil {
			return nil, storage.Err(op, "outbound job", err)
		}
	}
	return nil, fault.E(op, fault.Conflict, "the idempotency key is being used by concurrent submissions; send again")
}

// charge debits the new job's credit in its transaction and wakes the scheduler once it commits.
func (s *Service) charge(ctx context.Context, tx *ent.Client, job *ent.OutboundJob) (*ent.OutboundJob, error) {
	if _, err := s.cfg.Billing.Debit(ctx, tx, job.TenantID, billing.CreditsPerAction, ledgerentry.ReasonOUTBOUND, billing.OutboundReference(job.ID)); err != nil {
		return nil, err
	}
	s.wake(ctx)
	return job, nil
}

func (s *Service) wake(ctx context.Context) {
	if s.cfg.Wake != nil {
		storage.AfterCommit(ctx, s.cfg.Wake)
	}
}

// normalize validates in and fills its defaults.
func (s *Service) normalize(op string, in *SendInput) error {
	if len(in.URL) > maxURL {
		return fault.E(op, fault.InvalidInput, "url is longer than %d bytes", maxURL)
	}
	u, err := url.Parse(in.URL)
	switch {
	case err != nil:
		return fault.E(op, fault.InvalidInput, "url is not a valid URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return fault.E(op, fault.InvalidInput, "url must be an absolute http or https URL")
	case u.Host == "" || u.Hostname() == "":
		return fault.E(op, fault.InvalidInput, "url must name a host")
	}
	if in.Method == "" {
		in.Method = http.MethodPost
	}
	if len(in.Method) > maxMethod || !webhook.ValidHeaderName(in.Method) {
		return fault.E(op, fault.InvalidInput, "method must be an HTTP method name (letters, digits and !#$%%&'*+-.^_`|~, at most %d)", maxMethod)
	}
	header := make(http.Header, len(in.Headers))
	lines, size := 0, 0
	for name, values := range in.Headers {
		if !webhook.ValidHeaderName(name) {
			return fault.E(op, fault.InvalidInput, "header name %q is not a valid HTTP header name", name)
		}
		canon := http.CanonicalHeaderKey(name)
		if reservedHeader(canon) {
			return fault.E(op, fault.InvalidInput, "header %s is set by Adal or by the connection and cannot be given", canon)
		}
		for _, v := range values {
			if !webhook.ValidHeaderValue(v) {
				return fault.E(op, fault.InvalidInput, "header %s has a value with control characters", canon)
			}
			lines++
			size += len(canon) + len(v)
			header[canon] = append(header[canon], v)
		}
	}
	if lines > maxHeaders {
		return fault.E(op, fault.InvalidInput, "at most %d headers", maxHeaders)
	}
	if size > maxHeaderBytes {
		return fault.E(op, fault.InvalidInput, "headers are larger than %d bytes", maxHeaderBytes)
	}
	in.Headers = header
	if len(in.Body) > s.cfg.MaxBody {
		return fault.E(op, fault.InvalidInput, "body is larger than %d bytes", s.cfg.MaxBody)
	}
	if in.Body == nil {
		in.Body = []byte{}
	}
	if k := in.IdempotencyKey; k != nil {
		switch {
		case strings.TrimSpace(*k) == "":
			return fault.E(op, fault.InvalidInput, "idempotencyKey must not be empty")
		case len(*k) > maxIdempotencyKey:
			return fault.E(op, fault.InvalidInput, "idempotencyKey is longer than %d bytes", maxIdempotencyKey)
		}
	}
	return nil
}

// Body returns the body given as text or as base64 (at most one of them): the API's two ways to say it.
func Body(text, base64Text *string) ([]byte, error) {
	const op = "outbound.Body"
	switch {
	case text != nil && base64Text != nil:
		return nil, fault.E(op, fault.InvalidInput, "give body or bodyBase64, not both")
	case text != nil:
		return []byte(*text), nil
	case base64Text != nil:
		b, err := base64.StdEncoding.DecodeString(*base64Text)
		if err != nil {
			return nil, fault.E(op, fault.InvalidInput, "bodyBase64 is not valid base64")
		}
		return b, nil
	}
	return nil, nil
}

// reservedHeader reports the headers the sender would drop or overwrite (hop-by-hop, framing, X-Adal-*):
// refusing them says so instead of silently sending something else than asked.
func reservedHeader(canon string) bool {
	switch canon {
	case "Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Proxy-Connection", "Te",
		"Trailer", "Trailers", "Transfer-Encoding", "Upgrade", "Host", "Content-Length", "Expect":
		return true
	}
	return strings.HasPrefix(canon, "X-Adal-")
}

// Purged counts what PurgeExpired deleted.
type Purged struct {
	Jobs     int64
	Attempts int64
}

// PurgeExpired deletes the jobs whose retention ended by now, with their attempts, batch jobs per transaction
// until a batch comes back short. Deleting an original frees its idempotency key (its duplicates stay, their
// duplicateOf cleared by the foreign key). On Postgres, jobs locked by another transaction (an attempt being
// recorded) are skipped, not waited for, and left for the next run. It returns what it deleted even when a
// later batch fails.
func (s *Service) PurgeExpired(ctx context.Context, client *ent.Client, now time.Time, batch int) (Purged, error) {
	ctx = viewer.SystemContext(ctx)
	batch = max(batch, 1)
	var total Purged
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		var selected int
		var p Purged
		err := storage.InTx(ctx, client, func(ctx context.Context, tx *ent.Client) error {
			q := tx.OutboundJob.Query().
				Where(outboundjob.ExpiresAtLTE(now)).
				Order(ent.Asc(outboundjob.FieldExpiresAt)).
				Limit(batch)
			purgeLocks.Of(s.cfg.Dialect)(q)
			ids, err := q.IDs(ctx)
			if err != nil {
				return fmt.Errorf("select expired outbound jobs: %w", err)
			}
			selected = len(ids)
			if len(ids) == 0 {
				return nil
			}
			n, err := tx.OutboundAttempt.Delete().Where(outboundattempt.JobIDIn(ids...)).Exec(ctx)
			if err != nil {
				return fmt.Errorf("delete outbound attempts: %w", err)
			}
			p.Attempts = int64(n)
			if n, err = tx.OutboundJob.Delete().Where(outboundjob.IDIn(ids...)).Exec(ctx); err != nil {
				return fmt.Errorf("delete outbound jobs: %w", err)
			}
			p.Jobs = int64(n)
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("outbound: purge batch: %w", err)
		}
		total.Jobs += p.Jobs
		total.Attempts += p.Attempts
		if selected < batch || p.Jobs == 0 {
			return total, nil
		}
	}
}
