package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/viewer"
)

// Limits on what one GraphQL operation may make the server hold in memory. The complexity limit bounds how
// many objects an operation may ask for; these bound how large they may be, so that a tenant's worst query
// costs the server a bounded amount of memory whatever is stored.
const (
	// DefaultMaxResponseBytes caps the text of one response (or of one subscription event): enough for the
	// largest body however it is escaped.
	DefaultMaxResponseBytes = 8 << 20
	// parserTokenLimit refuses, before parsing it whole, a query document no client of the API needs.
	parserTokenLimit = 10_000
	// maxSubscriptionsPerConn caps the live subscriptions of one websocket.
	maxSubscriptionsPerConn = 32
	// bytesPerPoint prices fields whose value may be large: one complexity point per 2 KiB of the largest
	// value the field can return.
	bytesPerPoint = 2 << 10
	// maxStoredResponseBody is the largest stored response body of an outbound attempt.
	maxStoredResponseBody = 64 << 10
)

// The extensions.code of refusals made by these limits.
const (
	CodeResponseTooLarge     = "RESPONSE_TOO_LARGE"
	CodeTooManySubscriptions = "TOO_MANY_SUBSCRIPTIONS"
)

// fieldCosts gives the large fields their price in complexity points. A body costs at most a quarter of the
// operation's limit, so one operation can always read a few bodies whatever ADAL_MAX_BODY_BYTES is.
func fieldCosts(maxBody int64, complexityLimit int) map[string]int {
	body := int(min(maxBody/bytesPerPoint, int64(complexityLimit/4)))
	response := min(maxStoredResponseBody/bytesPerPoint, complexityLimit/4)
	return map[string]int{
		"body":               max(body, 1),
		"bodyBase64":         max(body, 1),
		"responseBody":       response,
		"responseBodyBase64": response,
	}
}

// responseBudget caps the text one response (or one subscription event) carries, as it is resolved: each
// string field spends its JSON size from the response's budget, and a field that would overspend it fails with
// RESPONSE_TOO_LARGE instead of being marshalled. Checking the marshalled response instead would come too late:
// the memory would be spent by then.
type responseBudget struct{ max int64 }

type budgetKey struct{}

func (responseBudget) ExtensionName() string                   { return "ResponseBudget" }
func (responseBudget) Validate(graphql.ExecutableSchema) error { return nil }

func (r responseBudget) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	left := new(atomic.Int64)
	left.Store(r.max)
	return next(context.WithValue(ctx, budgetKey{}, left))
}

func (r responseBudget) InterceptField(ctx context.Context, next graphql.Resolver) (any, error) {
	res, err := next(ctx)
	left, _ := ctx.Value(budgetKey{}).(*atomic.Int64)
	if err != nil || left == nil {
		return res, err
	}
	var n int64
	switch v := res.(type) {
	case string:
		n = jsonSize(v)
	case *string:
		if v != nil {
			n = jsonSize(*v)
		}
	default:
		return res, nil
	}
	if left.Add(-n) < 0 {
		return nil, &gqlerror.Error{
			Message: fmt.Sprintf("the response would carry more than %d bytes of text: ask for fewer items or fields "+
				"(a body of control characters is smaller as bodyBase64)", r.max),
			Extensions: map[string]any{"code": CodeResponseTooLarge},
		}
	}
	return res, nil
}

// jsonSize is the size of s as a JSON string: control characters become six bytes (\u00XX), quotes and
// backslashes two.
func jsonSize(s string) int64 {
	n := int64(len(s)) + 2
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20:
			n += 5
		case c == '"' || c == '\\':
			n++
		}
	}
	return n
}

// subscriptionLimit caps the subscriptions live at once on one websocket. The connection's counter is put in
// its context when it opens (withSubscriptionCounter); operations over plain HTTP have none.
type subscriptionLimit struct{ max int32 }

type subscriptionCounterKey struct{}

func withSubscriptionCounter(ctx context.Context) context.Context {
	return context.WithValue(ctx, subscriptionCounterKey{}, new(atomic.Int32))
}

func (subscriptionLimit) ExtensionName() string                   { return "SubscriptionLimit" }
func (subscriptionLimit) Validate(graphql.ExecutableSchema) error { return nil }

func (l subscriptionLimit) InterceptOperation(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	live, _ := ctx.Value(subscriptionCounterKey{}).(*atomic.Int32)
	oc := graphql.GetOperationContext(ctx)
	if live == nil || oc.Operation == nil || oc.Operation.Operation != ast.Subscription {
		return next(ctx)
	}
	if live.Add(1) > l.max {
		live.Add(-1)
		return graphql.OneShot(&graphql.Response{Errors: gqlerror.List{{
			Message:    fmt.Sprintf("this connection already has %d subscriptions, the most it may have: end one first", l.max),
			Extensions: map[string]any{"code": CodeTooManySubscriptions},
		}}})
	}
	// The transport cancels a subscription's context however it ends (completed, failed, connection closed).
	context.AfterFunc(ctx, func() { live.Add(-1) })
	return next(ctx)
}

// bodyGate bounds the operations reading body fields that run at once: each may hold a few bodies and their
// JSON, which is what a server's memory budget cannot multiply without end. A tenant runs one such operation at a
// time and the process a few; the others wait their turn (until their request's deadline), so one tenant's
// heavy queries can take no more than one place from the others. Subscriptions are not gated: they stream one
// event at a time.
type bodyGate struct {
	fields map[string]int // the priced fields; reading any of them passes the gate
	all    chan struct{}

	mu      sync.Mutex
	tenants map[int]chan struct{}
}

// maxBodyOperations is how many operations reading bodies run at once in a process.
const maxBodyOperations = 2

func newBodyGate(fields map[string]int) *bodyGate {
	return &bodyGate{fields: fields, all: make(chan struct{}, maxBodyOperations), tenants: map[int]chan struct{}{}}
}

func (*bodyGate) ExtensionName() string                   { return "BodyGate" }
func (*bodyGate) Validate(graphql.ExecutableSchema) error { return nil }

func (g *bodyGate) InterceptOperation(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	oc := graphql.GetOperationContext(ctx)
	if oc.Operation == nil || oc.Operation.Operation == ast.Subscription || !g.reads(oc.Doc, oc.Operation.SelectionSet, 0) {
		return next(ctx)
	}
	v, _ := viewer.FromContext(ctx)
	release, err := g.enter(ctx, v.TenantID)
	if err != nil {
		return graphql.OneShot(&graphql.Response{Errors: gqlerror.List{{
			Message:    "the server is busy reading other bodies and the request ended before its turn: try again",
			Extensions: map[string]any{"code": string(fault.Unavailable)},
		}}})
	}
	if hold, ok := ctx.Value(gateHoldKey{}).(*gateHold); ok {
		// Over HTTP the place is kept until the response is written (Handler): its JSON is the larger part.
		hold.release = release
		return next(ctx)
	}
	h := next(ctx)
	return func(ctx context.Context) *graphql.Response {
		defer release() // a query or mutation has one response
		return h(ctx)
	}
}

type gateHoldKey struct{}

// gateHold carries an HTTP request's place in the gate from the operation that took it to Handler, which
// gives it back once the response is written.
type gateHold struct{ release func() }

// Handler wraps the GraphQL HTTP handler so that an operation's place in the gate is given back only after
// its response has been written.
func (*bodyGate) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			next.ServeHTTP(w, r) // a websocket's operations give their places back themselves
			return
		}
		hold := &gateHold{}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), gateHoldKey{}, hold)))
		if hold.release != nil {
			hold.release()
		}
	})
}

func (g *bodyGate) enter(ctx context.Context, tenant int) (release func(), err error) {
	g.mu.Lock()
	own, ok := g.tenants[tenant]
	if !ok {
		own = make(chan struct{}, 1)
		g.tenants[tenant] = own
	}
	g.mu.Unlock()
	select {
	case own <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case g.all <- struct{}{}:
	case <-ctx.Done():
		<-own
		return nil, ctx.Err()
	}
	return func() { <-g.all; <-own }, nil
}

// reads reports whether a selection set asks, at any depth, for one of the priced fields.
func (g *bodyGate) reads(doc *ast.QueryDocument, set ast.SelectionSet, depth int) bool {
	if depth > 64 { // deeper than any valid query of this schema: treat as reading
		return true
	}
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			if _, ok := g.fields[s.Name]; ok || g.reads(doc, s.SelectionSet, depth+1) {
				return true
			}
		case *ast.InlineFragment:
			if g.reads(doc, s.SelectionSet, depth+1) {
				return true
			}
		case *ast.FragmentSpread:
			if f := doc.Fragments.ForName(s.Name); f != nil && g.reads(doc, f.SelectionSet, depth+1) {
				return true
			}
		}
	}
	return false
}
