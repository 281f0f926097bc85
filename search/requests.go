package search

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"entgo.io/contrib/entgql"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/predicate"
	"github.com/adal-relay/adal/ent/request"
	"github.com/adal-relay/adal/fault"
)

// Defaults of Bounds: together they keep one call within about a second on a server of a million requests
// with kilobyte bodies, on either database.
const (
	// DefaultMaxRows is how many requests one call examines at most.
	DefaultMaxRows = 100_000
	// DefaultBudget is how long one call keeps examining: it stops after the chunk that passes it.
	DefaultBudget = time.Second
	// firstChunk and maxChunk size the statements of a scan: small at first, so a common term that fills the
	// page in the newest rows costs little, growing while the page stays empty.
	firstChunk = 250
	maxChunk   = 8000
)

// Bounds limit the work of one search call. A search that reaches either stops there and says so
// (Result.StoppedEarly); the next page goes on from where it stopped.
type Bounds struct {
	// MaxRows is the most requests one call examines. Default DefaultMaxRows.
	MaxRows int
	// Budget is how long one call examines requests; a statement under way finishes. Default DefaultBudget.
	Budget time.Duration
}

// Searcher runs bounded searches on one database, one at a time per tenant: a search keeps the database
// busy for up to its budget, and a tenant's concurrent searches would take that many times more from the others.
// The others wait their turn.
type Searcher struct {
	dialect string
	bounds  Bounds
	now     func() time.Time

	mu      sync.Mutex
	tenants map[int]*turn
}

// turn is one tenant's place: held by its search under way, the waiting ones counted so the last to leave
// removes it.
type turn struct {
	held  chan struct{}
	users int
}

// New returns a searcher for a database of the given dialect (storage.DB.Dialect).
func New(dialect string, bounds Bounds) *Searcher {
	bounds.MaxRows = cmp.Or(bounds.MaxRows, DefaultMaxRows)
	bounds.Budget = cmp.Or(bounds.Budget, DefaultBudget)
	return &Searcher{dialect: dialect, bounds: bounds, now: time.Now, tenants: map[int]*turn{}}
}

// enter waits for the tenant's turn; release gives it back.
func (s *Searcher) enter(ctx context.Context, tenant int) (release func(), err error) {
	s.mu.Lock()
	t, ok := s.tenants[tenant]
	if !ok {
		t = &turn{held: make(chan struct{}, 1)}
		s.tenants[tenant] = t
	}
	t.users++
	s.mu.Unlock()
	leave := func() {
		s.mu.Lock()
		if t.users--; t.users == 0 {
			delete(s.tenants, tenant)
		}
		s.mu.Unlock()
	}
	select {
	case t.held <- struct{}{}:
		return func() { <-t.held; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}

// Query is one page of a search of a server's requests.
type Query struct {
	ServerID int
	Term     Term
	// Where are further conditions on the requests (status, received time…), as the requests list takes them.
	Where predicate.Request
	// After is where the page starts (a cursor of a previous page, ordered by received time), nil for the
	// newest (or oldest, with Ascending).
	After *entgql.Cursor[int]
	// First is the page size.
	First     int
	Ascending bool
}

// Result is one page of matches.
type Result struct {
	// Requests are the matches, in order, at most First.
	Requests []*ent.Request
	// HasNextPage is set when more requests may match after Next: the page filled up, or the search stopped
	// early.
	HasNextPage bool
	// Next is where the following page starts: the last match when the page filled up, the last request
	// examined when the search stopped early (nil when nothing was examined).
	Next *entgql.Cursor[int]
	// StoppedEarly is set when the search reached its bound before filling the page or running out of
	// requests: requests beyond Next were not examined.
	StoppedEarly bool
	// Scanned is how many requests were examined.
	Scanned int
	// ExaminedTo is the received time of the last request examined.
	ExaminedTo *time.Time
}

// scanned is a request the scan examined.
type scanned struct {
	ID         int       `sql:"id"`
	ReceivedAt time.Time `sql:"received_at"`
	Hit        bool      `sql:"hit"`
}

// Requests returns a page of q's matches, newest first unless q.Ascending. It walks the server's requests
// in received order, a chunk per statement, each statement returning only the ids and times of the requests
// it examined with whether each matches (the database does the matching: no body leaves it), until the page
// is full, the requests run out, or the bounds are reached. Conditions other than the received time are
// evaluated per row like the text, so a rare status costs no more than a common one. client's viewer
// decides what it may see; tenant is whose turn the search takes (0 for operators).
func (s *Searcher) Requests(ctx context.Context, client *ent.Client, tenant int, q Query) (Result, error) {
	if q.First <= 0 {
		return Result{}, nil
	}
	release, err := s.enter(ctx, tenant)
	if err != nil {
		return Result{}, fault.Wrap("search.Requests", fault.Unavailable, err)
	}
	defer release()
	direction := entgql.OrderDirectionDesc
	if q.Ascending {
		direction = entgql.OrderDirectionAsc
	}
	hit := s.hit(q)
	started := s.now()
	var (
		res   Result
		hits  []scanned
		after = q.After
		last  *scanned
	)
	chunk := firstChunk
	for {
		limit := min(chunk, s.bounds.MaxRows-res.Scanned)
		var rows []scanned
		query := client.Request.Query().Where(request.ServerID(q.ServerID))
		for _, p := range entgql.CursorsPredicate(after, nil, request.FieldID, request.FieldReceivedAt, direction) {
			query.Where(p)
		}
		if after != nil {
			// The cursor's time as a range of the (server_id, received_at) index, which the row comparison
			// above does not give the planner by itself.
			if t, ok := after.Value.(time.Time); ok {
				if q.Ascending {
					query.Where(request.ReceivedAtGTE(t))
				} else {
					query.Where(request.ReceivedAtLTE(t))
				}
			}
		}
		err := query.
			Order(request.ByReceivedAt(direction.OrderTermOption()), request.ByID(direction.OrderTermOption())).
			Limit(limit).
			Modify(func(sel *entsql.Selector) {
				sel.Select(sel.C(request.FieldID), sel.C(request.FieldReceivedAt))
				sel.AppendSelectExprAs(hit(sel), "hit")
			}).
			Scan(ctx, &rows)
		if err != nil {
			return Result{}, fmt.Errorf("search requests: %w", err)
		}
		full := false
		for i := range rows {
			res.Scanned++
			last = &rows[i]
			if rows[i].Hit {
				hits = append(hits, rows[i])
				if len(hits) > q.First {
					full = true
					break
				}
			}
		}
		if full || len(rows) < limit {
			res.HasNextPage = full
			break
		}
		if res.Scanned >= s.bounds.MaxRows || s.now().Sub(started) >= s.bounds.Budget {
			res.StoppedEarly, res.HasNextPage = true, true
			break
		}
		after = &entgql.Cursor[int]{ID: last.ID, Value: last.ReceivedAt}
		chunk = min(2*chunk, maxChunk)
	}
	if last != nil {
		t := last.ReceivedAt
		res.ExaminedTo = &t
	}
	if len(hits) > q.First {
		hits = hits[:q.First]
	}
	switch {
	case res.StoppedEarly && last != nil:
		res.Next = &entgql.Cursor[int]{ID: last.ID, Value: last.ReceivedAt}
	case len(hits) > 0:
		h := hits[len(hits)-1]
		res.Next = &entgql.Cursor[int]{ID: h.ID, Value: h.ReceivedAt}
	}
	if len(hits) == 0 {
		return res, nil
	}
	ids := make([]int, len(hits))
	for i, h := range hits {
		ids[i] = h.ID
	}
	found, err := client.Request.Query().Where(request.IDIn(ids...)).All(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("read matched requests: %w", err)
	}
	byID := make(map[int]*ent.Request, len(found))
	for _, r := range found {
		byID[r.ID] = r
	}
	for _, id := range ids {
		if r, ok := byID[id]; ok { // purged meanwhile otherwise
			res.Requests = append(res.Requests, r)
		}
	}
	return res, nil
}

// hit is the select expression that says whether a row matches: q's other conditions, then the text. Nested
// CASEs rather than AND, so the text is only searched in rows the conditions let through.
func (s *Searcher) hit(q Query) func(sel *entsql.Selector) entsql.Querier {
	match := q.Term.Match(s.dialect, Columns{
		Path:    request.FieldPath,
		Query:   request.FieldQuery,
		Headers: request.FieldHeaders,
		Body:    request.FieldBody,
	})
	return func(sel *entsql.Selector) entsql.Querier {
		return entsql.ExprFunc(func(b *entsql.Builder) {
			if q.Where != nil {
				// The conditions as the list applies them, taken from a selector over the same table.
				cond := entsql.Dialect(s.dialect).Select().From(entsql.Table(request.Table))
				q.Where(cond)
				if p := cond.P(); p != nil {
					b.WriteString("CASE WHEN ").Join(p).WriteString(" THEN ")
					defer b.WriteString(" ELSE 0 END")
				}
			}
			b.WriteString("CASE WHEN ").Join(match).WriteString(" THEN 1 ELSE 0 END")
		})
	}
}
