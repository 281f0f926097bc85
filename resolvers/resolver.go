// Package resolvers answers Adal's GraphQL API. Resolvers stay thin: check who is asking, call the domain
// package that owns the behaviour, return what it returns.
package resolvers

import (
	"context"
	"encoding/json"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/adal-relay/adal/alert"
	"github.com/adal-relay/adal/alerting"
	"github.com/adal-relay/adal/auth"
	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/bulk"
	"github.com/adal-relay/adal/clihub"
	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/events"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/graph/model"
	"github.com/adal-relay/adal/outbound"
	"github.com/adal-relay/adal/routing"
	"github.com/adal-relay/adal/search"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/viewer"
)

// Resolver holds the services the API calls into.
type Resolver struct {
	Client   *ent.Client
	Billing  *billing.Service
	Delivery *delivery.Service
	Events   events.Bus
	Routing  *routing.Service
	Auth     *auth.Authenticator
	// Tokens mints, lists and revokes stored tokens.
	Tokens *auth.Store
	Now    func() time.Time
	// CLIHub serves cliListen and reportCliAttempt (the adal CLI).
	CLIHub *clihub.Hub
	// Outbound serves sendOutbound and its jobs: standalone HTTP calls a tenant submits through the API.
	Outbound *outbound.Service
	// Alerting manages alert subscriptions.
	Alerting *alerting.Service
	// MaxBodyBytes is the largest webhook body intake accepts (ADAL_MAX_BODY_BYTES), for the limits query.
	MaxBodyBytes int64
	// Logger hears of panics the subscriptions' goroutines recovered from; nil is slog's default.
	Logger *slog.Logger
	// Search runs requests(search: …).
	Search *search.Searcher
	// Bulk answers dry runs and starts and cancels bulk jobs.
	Bulk *bulk.Service
}

// client is the transaction's client inside a mutation (entgql.Transactioner puts it in ctx), the plain
// client otherwise.
func (r *Resolver) client(ctx context.Context) *ent.Client {
	if c := ent.FromContext(ctx); c != nil {
		return c
	}
	return r.Client
}

// require returns the viewer if it has one of roles (any role when none is given).
func require(ctx context.Context, op string, roles ...viewer.Role) (viewer.Viewer, error) {
	v, ok := viewer.FromContext(ctx)
	if !ok {
		return v, fault.E(op, fault.Unauthenticated, "a valid token is required")
	}
	if len(roles) == 0 {
		return v, nil
	}
	for _, role := range roles {
		if v.Role == role {
			return v, nil
		}
	}
	return v, fault.E(op, fault.Forbidden, "this operation needs role %v", roles)
}

// ruleJSON is a routing filter as the API received it (a JSON scalar), as JSON text; nil for none.
func ruleJSON(rule any) []byte {
	if rule == nil {
		return nil
	}
	b, err := json.Marshal(rule)
	if err != nil {
		return []byte("{") // refused by filter.Compile as the invalid JSON the value was
	}
	return b
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// pointers lists the addresses of s's elements, the form gqlgen's lists of objects take.
func pointers[T any](s []T) []*T {
	if s == nil {
		return nil
	}
	out := make([]*T, len(s))
	for i := range s {
		out[i] = &s[i]
	}
	return out
}

func int64p(p *int) *int64 {
	if p == nil {
		return nil
	}
	v := int64(*p)
	return &v
}

// Page sizes of list queries: a list asked for without first/last gets DefaultPage items, and no page may
// exceed MaxPage, so no single query reads a whole table.
const (
	DefaultPage = 50
	MaxPage     = 500
)

// pageSize bounds a connection's first/last, defaulting first when neither is given.
func pageSize(op string, first, last *int) (*int, error) {
	for _, n := range []*int{first, last} {
		if n != nil && (*n < 0 || *n > MaxPage) {
			return nil, fault.E(op, fault.InvalidInput, "first and last must be between 0 and %d", MaxPage)
		}
	}
	if first == nil && last == nil {
		n := DefaultPage
		return &n, nil
	}
	return first, nil
}

// page is the body of a connection resolver: the viewer must be signed in (with one of roles, if any), the
// page size is bounded (pageSize), and query reads the page of that size.
func page[C any](ctx context.Context, op string, first, last *int, query func(first *int) (C, error), roles ...viewer.Role) (C, error) {
	var none C
	if _, err := require(ctx, op, roles...); err != nil {
		return none, err
	}
	first, err := pageSize(op, first, last)
	if err != nil {
		return none, err
	}
	return query(first)
}

// node is the body of a resolver of one node by id: the viewer must be signed in, and get reads the node,
// what names it in a not-found error.
func node[T any](ctx context.Context, op, what string, get func() (T, error)) (T, error) {
	if _, err := require(ctx, op); err != nil {
		var none T
		return none, err
	}
	n, err := get()
	return n, storage.Err(op, what, err)
}

// alertType is the event an AlertEvent value names: RECIPIENT_DISABLED is recipient.disabled.
func alertType(e model.AlertEvent) alert.Type {
	return alert.Type(strings.ToLower(strings.Replace(string(e), "_", ".", 1)))
}

// alertEventEnum is the AlertEvent value of an event.
func alertEventEnum(t alert.Type) model.AlertEvent {
	return model.AlertEvent(strings.ToUpper(strings.Replace(string(t), ".", "_", 1)))
}

// bodyText is a stored body as text, bytes that are not UTF-8 replaced.
func bodyText(b []byte) string { return strings.ToValidUTF8(string(b), "\uFFFD") }

// responseBody is an outbound attempt's stored response body, encoded; nil when the job stores none or the
// attempt got no answer. A body is stored for every answer of a job that asked for it; an empty one reads back
// like none, so the job says which it is.
func responseBody(ctx context.Context, a *ent.OutboundAttempt, op string, encode func([]byte) string) (*string, error) {
	job, err := a.Job(ctx)
	if err != nil || !job.StoreResponseBody || a.HTTPStatus == nil {
		return nil, storage.Err(op, "outbound job", err)
	}
	var s string
	if a.ResponseBody != nil {
		s = encode(*a.ResponseBody)
	}
	return &s, nil
}

// headerList is h as header lines: by name, each name's values in their order.
func headerList(h map[string][]string) []*model.Header {
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	sort.Strings(names)
	out := []*model.Header{}
	for _, name := range names {
		for _, value := range h[name] {
			out = append(out, &model.Header{Name: name, Value: value})
		}
	}
	return out
}
