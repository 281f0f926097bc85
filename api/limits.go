package api

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// Limits on what one GraphQL operation may make the server hold in memory. The complexity limit bounds how
// many objects an operation may ask for; these bound how large they may be, so that a tenant's worst query
// costs the server a bounded amount of memory whatever is stored.
const (
	// DefaultMaxResponseBytes caps the JSON of one response (or of one subscription event).
	DefaultMaxResponseBytes = 32 << 20
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

// responseCap refuses a response whose data is larger than max bytes: the client gets an error that says to
// ask for less instead of a response its connection or the server's memory may not survive.
type responseCap struct{ max int }

func (responseCap) ExtensionName() string                   { return "ResponseCap" }
func (responseCap) Validate(graphql.ExecutableSchema) error { return nil }

func (c responseCap) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	resp := next(ctx)
	if resp == nil || len(resp.Data) <= c.max {
		return resp
	}
	return &graphql.Response{Errors: gqlerror.List{{
		Message: fmt.Sprintf("the response is %d bytes, over the limit of %d: ask for fewer items or fewer body fields",
			len(resp.Data), c.max),
		Extensions: map[string]any{"code": CodeResponseTooLarge},
	}}}
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
