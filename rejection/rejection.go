// Package rejection keeps the record of requests intake refused for failing their server's sender
// verification: a count per server, and the newest Keep of them (time, method, path, source, reason — never a
// body). Intake hands each refusal to a Recorder, which holds it in memory and writes what it holds once per
// interval, in one transaction: a refused request costs intake no database write of its own, a flood of
// forgeries costs a bounded write per interval, and the table never holds more than Keep rows per server.
package rejection

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"entgo.io/contrib/entgql"

	"github.com/adal-relay/adal/ent"
	entrejection "github.com/adal-relay/adal/ent/rejection"
	"github.com/adal-relay/adal/ent/rejectiontally"
	"github.com/adal-relay/adal/startstop"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/verify"
	"github.com/adal-relay/adal/viewer"
)

// Keep is how many rejections of each server are kept: the newest.
const Keep = 1000

// DefaultInterval is how often a Recorder writes what it holds, unless configured otherwise.
const DefaultInterval = time.Second

// maxHeld bounds the rejections a Recorder holds between writes, all servers together. Past it a rejection
// is still counted but not listed: under a flood from everywhere at once the log shows the first of each
// interval, and memory stays bounded.
const maxHeld = 10 * Keep

// maxPath bounds the path kept with a rejection; the rest of a long path is cut.
const maxPath = 1024

// Entry is one refused request.
type Entry struct {
	ServerID, TenantID int
	At                 time.Time
	Method, Path       string
	SourceAddr         string
	Reason             verify.Reason
	Message            string
}

// Config configures a Recorder.
type Config struct {
	Client *ent.Client
	// Interval is how often held rejections are written; default DefaultInterval.
	Interval time.Duration
	Logger   *slog.Logger
}

// Recorder holds refusals in memory and writes them once per interval (Start), and once more when it stops.
type Recorder struct {
	startstop.BaseStartStop
	cfg Config

	mu      sync.Mutex
	servers map[int]*held // by server id, since the last write
	held    int           // entries in servers
}

// held is what one server's refusals since the last write come to.
type held struct {
	tenantID int
	count    int64
	last     time.Time
	entries  []Entry // at most Keep; once full, a ring whose oldest is at next
	next     int
}

// New returns a recorder; it writes nothing until Start.
func New(cfg Config) *Recorder {
	cfg.Interval = cmp.Or(cfg.Interval, DefaultInterval)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Recorder{cfg: cfg, servers: map[int]*held{}}
}

// Record counts one refusal and holds it for the next write. It never blocks on the database.
func (r *Recorder) Record(e Entry) {
	e.Method = bounded(e.Method, 64)
	e.Path = bounded(e.Path, maxPath)
	e.SourceAddr = bounded(e.SourceAddr, 128)
	e.Message = bounded(e.Message, 512)
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.servers[e.ServerID]
	if h == nil {
		h = &held{tenantID: e.TenantID}
		r.servers[e.ServerID] = h
	}
	h.count++
	h.last = e.At
	switch {
	case len(h.entries) == Keep: // only the newest Keep would survive the write anyway
		h.entries[h.next] = e
		h.next = (h.next + 1) % Keep
	case r.held < maxHeld:
		h.entries = append(h.entries, e)
		r.held++
	}
}

// bounded cuts s to at most n bytes of valid UTF-8.
func bounded(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "")
}

// Start writes held rejections every interval until Stop, and once more then.
func (r *Recorder) Start(ctx context.Context) error {
	return r.Run(ctx, nil, func(ctx context.Context) {
		startstop.Every(ctx, r.cfg.Logger, "store rejections", r.cfg.Interval, r.write)
		r.write(context.WithoutCancel(ctx))
	})
}

// write stores what is held, in one transaction. If that fails the rejections are dropped, counts included:
// the log is a diagnosis aid, and holding on would let a database outage grow memory.
func (r *Recorder) write(ctx context.Context) {
	r.mu.Lock()
	servers := r.servers
	r.servers, r.held = map[int]*held{}, 0
	r.mu.Unlock()
	if len(servers) == 0 {
		return
	}
	if err := store(viewer.SystemContext(ctx), r.cfg.Client, servers); err != nil {
		n := int64(0)
		for _, h := range servers {
			n += h.count
		}
		r.cfg.Logger.Error("store rejections", "rejections", n, "err", err)
	}
}

// store writes the rejections held for each server, adds their count to the server's tally and drops the
// server's rejections beyond the newest Keep.
func store(ctx context.Context, client *ent.Client, servers map[int]*held) error {
	const op = "rejection.store"
	ids := make([]int, 0, len(servers))
	for id := range servers {
		ids = append(ids, id)
	}
	slices.Sort(ids) // tallies are locked in one order by every process
	return storage.InTx(ctx, client, func(ctx context.Context, tx *ent.Client) error {
		var creates []*ent.RejectionCreate
		for _, id := range ids {
			h := servers[id]
			for i := range h.entries {
				e := h.entries[(h.next+i)%len(h.entries)] // oldest first, so ids grow with time
				creates = append(creates, tx.Rejection.Create().SetTenantID(e.TenantID).SetServerID(e.ServerID).
					SetAt(e.At.UTC()).SetMethod(e.Method).SetPath(e.Path).SetSourceAddr(e.SourceAddr).
					SetReason(entrejection.Reason(e.Reason)).SetMessage(e.Message))
			}
		}
		for start := 0; start < len(creates); start += Keep {
			if err := tx.Rejection.CreateBulk(creates[start:min(start+Keep, len(creates))]...).Exec(ctx); err != nil {
				return storage.Err(op, "rejection", err)
			}
		}
		for _, id := range ids {
			h := servers[id]
			err := tx.RejectionTally.Create().SetServerID(id).SetTenantID(h.tenantID).SetCount(h.count).
				SetLastAt(h.last.UTC()).
				OnConflictColumns(rejectiontally.FieldServerID, rejectiontally.FieldTenantID).
				Update(func(u *ent.RejectionTallyUpsert) { u.AddCount(h.count).UpdateLastAt() }).
				Exec(ctx)
			if err != nil {
				return storage.Err(op, "rejection tally", err)
			}
			if err := trim(ctx, tx, id); err != nil {
				return err
			}
		}
		return nil
	})
}

// Newest is the order rejections are listed and kept in: newest first.
var Newest = &ent.RejectionOrder{Direction: entgql.OrderDirectionDesc, Field: ent.RejectionOrderFieldAt}

// trim deletes the server's rejections beyond its newest Keep, in the order they are listed (Newest: by time,
// then id).
func trim(ctx context.Context, tx *ent.Client, serverID int) error {
	const op = "rejection.trim"
	cut, err := tx.Rejection.Query().Where(entrejection.ServerID(serverID)).
		Order(ent.Desc(entrejection.FieldAt), ent.Desc(entrejection.FieldID)).Offset(Keep).Limit(1).
		Select(entrejection.FieldID, entrejection.FieldAt).All(ctx)
	if err != nil {
		return storage.Err(op, "rejection", err)
	}
	if len(cut) == 0 {
		return nil
	}
	_, err = tx.Rejection.Delete().Where(entrejection.ServerID(serverID), entrejection.Or(
		entrejection.AtLT(cut[0].At),
		entrejection.And(entrejection.At(cut[0].At), entrejection.IDLTE(cut[0].ID)),
	)).Exec(ctx)
	return storage.Err(op, "rejection", err)
}

// Count is how many requests to the server were refused since it was created.
func Count(ctx context.Context, client *ent.Client, serverID int) (int64, error) {
	t, err := client.RejectionTally.Query().Where(rejectiontally.ServerID(serverID)).Only(ctx)
	if ent.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, storage.Err("rejection.Count", "rejection tally", err)
	}
	return t.Count, nil
}
