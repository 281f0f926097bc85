// Package resolvers answers Adal's GraphQL API. Resolvers stay thin: check who is asking, call the domain
// package that owns the behaviour, return what it returns.
package resolvers

import (
	"context"
	"time"

	"github.com/adal-relay/adal/auth"
	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/bulk"
	"github.com/adal-relay/adal/clihub"
	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/events"
	"github.com/adal-relay/adal/fault"
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
