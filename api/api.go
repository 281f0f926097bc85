// Package api assembles Adal's HTTP surface: GraphQL (HTTP and websocket), webhook intake, health and metrics.
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"entgo.io/contrib/entgql"
	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/99designs/gqlgen/graphql/playground"
	coderws "github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/adal-relay/adal/auth"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/privacy"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/graph/generated"
	"github.com/adal-relay/adal/resolvers"
	"github.com/adal-relay/adal/viewer"
)

// DefaultComplexityLimit bounds what one GraphQL operation may ask for (each field costs 1, lists multiply by
// their page size), so a single query cannot walk the whole database.
const DefaultComplexityLimit = 2000

// maxGraphQLBody caps a GraphQL request body.
const maxGraphQLBody = 1 << 20

// Config is what the HTTP surface is built from.
type Config struct {
	Resolver *resolvers.Resolver
	Client   *ent.Client
	Auth     *auth.Authenticator
	Inbound  http.Handler
	// Ready reports whether the process can serve (the database answers).
	Ready func(ctx context.Context) error
	// CORSOrigins are the extra origins allowed to call /graphql and open its websocket.
	CORSOrigins []string
	// Dev enables introspection and the GraphQL playground at /playground.
	Dev             bool
	ComplexityLimit int
	// MaxBodyBytes is the largest body a request may have (ADAL_MAX_BODY_BYTES): body fields are priced by it.
	MaxBodyBytes int64
	// MaxResponseBytes caps the text of one response; 0 means DefaultMaxResponseBytes, or more where the
	// largest body needs it.
	MaxResponseBytes int
	Registry         *prometheus.Registry
	Logger           *slog.Logger
	// Panel serves the web panel at /; nil serves nothing there.
	Panel http.Handler
}

// New returns the root handler.
func New(cfg Config) http.Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ComplexityLimit <= 0 {
		cfg.ComplexityLimit = DefaultComplexityLimit
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = max(DefaultMaxResponseBytes, int(6*cfg.MaxBodyBytes)+1<<20)
	}
	mux := http.NewServeMux()
	gql := newGraphQL(cfg)
	mux.Handle("/graphql", cors(cfg.CORSOrigins, limitBody(maxGraphQLBody, cfg.Auth.Middleware(gql))))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if cfg.Ready != nil {
			if err := cfg.Ready(ctx); err != nil {
				http.Error(w, "not ready: database unavailable", http.StatusServiceUnavailable)
				return
			}
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	if cfg.Registry != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{Registry: cfg.Registry}))
	}
	if cfg.Dev {
		mux.Handle("GET /playground", playground.Handler("Adal", "/graphql"))
	}
	if cfg.Panel != nil {
		mux.Handle("/", cfg.Panel)
	}
	// Webhooks bypass the mux: it would answer a path with "//", "." or ".." segments with a redirect to the
	// cleaned path, and senders do not follow redirects. Anything after /in/{key} is the sender's, as sent.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, inboundPrefix) {
			cfg.Inbound.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// inboundPrefix is where webhooks arrive: /in/{key}[/…].
const inboundPrefix = "/in/"

func newGraphQL(cfg Config) http.Handler {
	costs := fieldCosts(cfg.MaxBodyBytes, cfg.ComplexityLimit)
	srv := handler.New(pagedComplexity{
		ExecutableSchema: generated.NewExecutableSchema(generated.Config{Resolvers: cfg.Resolver}),
		fieldCosts:       costs,
	})
	// Websocket first: it must see the upgrade before the plain HTTP transports do.
	srv.AddTransport(transport.Websocket{
		KeepAlivePingInterval: 10 * time.Second,
		// Ping/pong notices a half-open connection (a CLI whose laptop slept), so its heartbeat stops.
		PingPongInterval: 20 * time.Second,
		InitTimeout:      10 * time.Second,
		Implementation: tokenLifetime{transport.CoderWebsocketImplementation{AcceptOptions: coderws.AcceptOptions{
			OriginPatterns: originHosts(cfg.CORSOrigins),
		}}},
		InitFunc: func(ctx context.Context, p transport.InitPayload) (context.Context, *transport.InitPayload, error) {
			v, tok, err := cfg.Auth.ViewerFromInitPayload(p)
			ctx = withSubscriptionCounter(ctx)
			if errors.Is(err, auth.ErrMissingToken) {
				return ctx, &p, nil // resolvers answer UNAUTHENTICATED per operation
			}
			if err != nil {
				return ctx, nil, err
			}
			// The connection (its subscriptions, a CLI's stream) ends when the token is revoked or expires.
			ctx = cfg.Auth.Watch(auth.NewContext(viewer.NewContext(ctx, v), tok), tok)
			watchToken(ctx)
			return ctx, &p, nil
		},
	})
	srv.AddTransport(transport.Options{})
	srv.AddTransport(transport.GET{})
	srv.AddTransport(transport.POST{})
	srv.SetQueryCache(lru.New[*ast.QueryDocument](1000))
	srv.SetParserTokenLimit(parserTokenLimit)
	if cfg.Dev {
		srv.Use(extension.Introspection{})
	}
	srv.Use(extension.AutomaticPersistedQuery{Cache: lru.New[string](100)})
	srv.Use(extension.FixedComplexityLimit(cfg.ComplexityLimit))
	srv.Use(responseBudget{max: int64(cfg.MaxResponseBytes)})
	srv.Use(subscriptionLimit{max: maxSubscriptionsPerConn})
	gate := newBodyGate(costs)
	srv.Use(gate)
	// Every mutation runs in one transaction: a failure anywhere leaves nothing half-written.
	srv.Use(streamSafeTx{entgql.Transactioner{TxOpener: cfg.Client}})
	srv.SetErrorPresenter(func(ctx context.Context, err error) *gqlerror.Error {
		return present(ctx, err, cfg.Logger)
	})
	srv.SetRecoverFunc(func(ctx context.Context, p any) error {
		cfg.Logger.Error("graphql panic", "panic", p)
		return fault.E("graphql", fault.Internal, "internal error")
	})
	return withTokenLifetime(gate.Handler(srv))
}

// present gives every error an extensions.code a client can act on, and hides internal detail.
func present(ctx context.Context, err error, logger *slog.Logger) *gqlerror.Error {
	gerr := graphql.DefaultErrorPresenter(ctx, err)
	var fe *fault.Error
	var badID *strconv.NumError
	var kind fault.Kind
	switch {
	case errors.As(err, &fe):
		kind = fault.KindOf(err)
		gerr.Message = fault.Message(err)
	case ent.IsNotFound(err):
		kind, gerr.Message = fault.NotFound, "not found"
	case errors.Is(err, privacy.Deny):
		kind, gerr.Message = fault.Forbidden, "not allowed"
	case ent.IsValidationError(err):
		kind = fault.InvalidInput
	case errors.As(err, &badID):
		// An ID argument that is no number (gqlgen's IntID scalar fails while reading the arguments).
		kind, gerr.Message = fault.InvalidInput, "invalid ID"
	default:
		var existing *gqlerror.Error
		if errors.As(err, &existing) && existing.Extensions["code"] != nil {
			return gerr // parse, validation and complexity errors already carry gqlgen's code
		}
		kind, gerr.Message = fault.Internal, "internal error"
	}
	if kind == fault.Internal {
		logger.Error("graphql internal error", "err", err, "path", gerr.Path.String())
	}
	if gerr.Extensions == nil {
		gerr.Extensions = map[string]any{}
	}
	gerr.Extensions["code"] = string(kind)
	return gerr
}

// pagedComplexity makes the complexity of a list field that names its size (a connection's first/last, the
// ids of nodes) grow with that size: gqlgen only adds up fields, so without this servers(first: 100000)
// would cost as little as servers(first: 1). Fields in fieldCosts cost what it says.
type pagedComplexity struct {
	graphql.ExecutableSchema
	fieldCosts map[string]int
}

func (s pagedComplexity) Complexity(ctx context.Context, typeName, field string, childComplexity int, args map[string]any) (int, bool) {
	if c, ok := s.fieldCosts[field]; ok {
		return c, true
	}
	if c, ok := s.ExecutableSchema.Complexity(ctx, typeName, field, childComplexity, args); ok {
		return c, ok
	}
	n := 1
	for _, k := range []string{"first", "last"} {
		if v, ok := intArg(args[k]); ok && v > n {
			n = v
		}
	}
	if ids, ok := args["ids"].([]any); ok && len(ids) > n {
		n = len(ids)
	}
	if n == 1 {
		return 0, false // gqlgen's default: 1 + children
	}
	const max = math.MaxInt32
	if childComplexity+1 > max/n {
		return max, true
	}
	return n * (childComplexity + 1), true
}

// intArg reads an Int argument as it comes from a literal (int64) or a JSON variable.
func intArg(v any) (int, bool) {
	switch v := v.(type) {
	case int:
		return v, true
	case int32:
		return int(v), true
	case int64:
		if v > math.MaxInt32 {
			return math.MaxInt32, true
		}
		return int(v), true
	case float64:
		if v > math.MaxInt32 {
			return math.MaxInt32, true
		}
		return int(v), true
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return intArg(i)
		}
		if f, err := v.Float64(); err == nil {
			return intArg(f)
		}
	}
	return 0, false
}

// limitBody refuses a request whose body is larger than limit with 413, in GraphQL error shape, before any
// GraphQL transport reads it (they would report a generic read failure).
func limitBody(limit int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			tooLarge(w, limit)
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
			if err != nil {
				var mbe *http.MaxBytesError
				if errors.As(err, &mbe) {
					tooLarge(w, limit)
					return
				}
				http.Error(w, "could not read request body", http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		next.ServeHTTP(w, r)
	})
}

func tooLarge(w http.ResponseWriter, limit int64) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Connection", "close")
	w.WriteHeader(http.StatusRequestEntityTooLarge)
	_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]any{{
		"message":    fmt.Sprintf("request body larger than %d bytes", limit),
		"extensions": map[string]any{"code": string(fault.InvalidInput)},
	}}})
}

// originHosts turns "https://panel.example.com" origins into the host patterns the websocket checks.
func originHosts(origins []string) []string {
	var hosts []string
	for _, o := range origins {
		if u, err := url.Parse(o); err == nil && u.Host != "" {
			hosts = append(hosts, u.Host)
		}
	}
	return hosts
}

// cors lets the listed origins call /graphql from a browser; same-origin needs nothing.
func cors(origins []string, next http.Handler) http.Handler {
	allowed := map[string]bool{}
	for _, o := range origins {
		allowed[strings.TrimRight(o, "/")] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin != "" && allowed[origin] {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Add("Vary", "Origin")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
			h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
			h.Set("Access-Control-Max-Age", "600")
			if r.Method == http.MethodOptions {
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// streamSafeTx is entgql's Transactioner made safe for operations sent over the websocket: there the response
// handler is called once more after the result to learn that the stream ended, gets nil, and the plain
// Transactioner would dereference it.
type streamSafeTx struct{ entgql.Transactioner }

// InterceptResponse runs mutations in a transaction and passes the end of a stream through.
func (t streamSafeTx) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	ended := false
	rsp := t.Transactioner.InterceptResponse(ctx, func(ctx context.Context) *graphql.Response {
		r := next(ctx)
		if r == nil {
			ended = true
			return &graphql.Response{}
		}
		return r
	})
	if ended {
		return nil
	}
	return rsp
}
