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

// alertType is the event an AlertEvent value names: RECIPIENT_DISABLED is recipient.disabled.
func alertType(e model.AlertEvent) alert.Type {
	return alert.Type(strings.ToLower(strings.Replace(string(e), "_", ".", 1)))
}

// alertEventEnum is the AlertEvent value of an event.
func alertEventEnum(t alert.Type) model.AlertEvent {
	return model.AlertEvent(strings.ToUpper(strings.Replace(string(t), ".", "_", 1)))
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
