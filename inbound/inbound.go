// Package inbound accepts webhooks: ANY /in/{key}[/…]. A request is acknowledged only after it is stored, its
// credit debited and its deliveries created, all in one transaction.
package inbound

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/ent/request"
	"github.com/adal-relay/adal/ent/server"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/routing"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/viewer"
)

// DefaultMaxBody is the largest body accepted unless configured otherwise.
const DefaultMaxBody = 1 << 20

// Prefix is the path under which inbound requests arrive.
const Prefix = "/in/"

// Config configures intake.
type Config struct {
	Client  *ent.Client
	Billing *billing.Service
	// MaxBody caps request bodies; larger ones get 413. Default DefaultMaxBody.
	MaxBody int64
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Accepted, if set, is told of every committed request (to wake the scheduler and publish events).
	Accepted func(req *ent.Request, deliveries []*ent.Delivery)
	// CLIConnected tells whether a CLI is attached for a recipient, to mark backlog deliveries; nil: never.
	CLIConnected func(r *ent.Recipient, now time.Time) bool
	Logger       *slog.Logger
}

// Handler serves inbound requests.
type Handler struct {
	cfg Config
}

// New returns an inbound handler.
func New(cfg Config) *Handler {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.CLIConnected == nil {
		cfg.CLIConnected = func(*ent.Recipient, time.Time) bool { return false }
	}
	return &Handler{cfg: cfg}
}

// Incoming is a request as received, before it is stored.
type Incoming struct {
	Method     string
	Path       string
	Query      string
	Header     http.Header
	Body       []byte
	SourceAddr string
}

// ServeHTTP accepts one request: 202 {"requestId"} after commit, 402 without credit, 404 for an unknown or
// deleted server, 413 for an oversized body, 503 when the database cannot take it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.EscapedPath(), Prefix)
	key, suffix, _ := strings.Cut(rest, "/")
	if suffix != "" || strings.HasSuffix(rest, "/") {
		suffix = "/" + suffix
	}
	if key == "" {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "unknown server"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{
				"error": fmt.Sprintf("body larger than %d bytes", h.cfg.MaxBody),
			})
			return
		}
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "could not read body"})
		return
	}
	host, _, splitErr := net.SplitHostPort(r.RemoteAddr)
	if splitErr != nil {
		host = r.RemoteAddr
	}
	req, err := h.Accept(r.Context(), key, Incoming{
		Method:     r.Method,
		Path:       suffix,
		Query:      r.URL.RawQuery,
		Header:     r.Header.Clone(),
		Body:       body,
		SourceAddr: host,
	})
	if err != nil {
		switch fault.KindOf(err) {
		case fault.NotFound:
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "unknown server"})
		case fault.InsufficientCredits:
			writeJSON(w, http.StatusPaymentRequired, map[string]string{"error": "no credits left"})
		default:
			h.cfg.Logger.Error("accept request", "err", err)
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "could not store the request; retry"})
		}
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"requestId": fmt.Sprint(req.ID)})
}

// Accept stores the request for the server with the given inbound key, debits one credit and creates one
// pending delivery per recipient, in one transaction.
func (h *Handler) Accept(ctx context.Context, key string, in Incoming) (*ent.Request, error) {
	const op = "inbound.Accept"
	// Intake has no user: the server key is the credential. The system viewer is limited to this call.
	ctx = viewer.SystemContext(ctx)
	client := h.cfg.Client
	srv, err := client.Server.Query().
		Where(server.InboundKey(key), server.DeletedAtIsNil()).
		WithRecipients(func(q *ent.RecipientQuery) { q.Where(recipient.DeletedAtIsNil()) }).
		Only(ctx)
	if err != nil {
		return nil, storage.Err(op, "server", err)
	}
	now := h.cfg.Now()
	var req *ent.Request
	var deliveries []*ent.Delivery
	err = storage.InTx(ctx, client, func(ctx context.Context, tx *ent.Client) error {
		plan, err := billing.PlanOf(ctx, tx, srv.TenantID)
		if err != nil {
			return err
		}
		days := plan.RetentionDays
		if srv.RetentionDays != nil && *srv.RetentionDays < days {
			days = *srv.RetentionDays
		}
		status := request.StatusPENDING
		if len(srv.Edges.Recipients) == 0 {
			status = request.StatusFAILED // nobody to deliver to: nothing will ever succeed
		}
		req, err = tx.Request.Create().
			SetTenantID(srv.TenantID).
			SetServerID(srv.ID).
			SetKey(routing.NewKey()).
			SetMethod(in.Method).
			SetPath(in.Path).
			SetQuery(in.Query).
			SetHeaders(in.Header).
			SetBody(in.Body).
			SetSourceAddr(in.SourceAddr).
			SetReceivedAt(now).
			SetExpiresAt(now.Add(time.Duration(days) * 24 * time.Hour)).
			SetStatus(status).
			Save(ctx)
		if err != nil {
			return storage.Err(op, "request", err)
		}
		if _, err := h.cfg.Billing.Debit(ctx, tx, srv.TenantID, 1, billing.ReasonRequestAccepted, fmt.Sprintf("request:%d", req.ID)); err != nil {
			return err
		}
		deliveries, err = CreateDeliveries(ctx, tx, req, srv.Edges.Recipients, delivery.TriggerAUTOMATIC, now, h.cfg.CLIConnected)
		return err
	})
	if err != nil {
		return nil, err
	}
	if h.cfg.Accepted != nil {
		h.cfg.Accepted(req, deliveries)
	}
	return req, nil
}

// CreateDeliveries creates one pending delivery of req per recipient, due now, with the recipient's attempts
// and schedule copied in. A CLI delivery created while no CLI is attached is marked as backlog.
func CreateDeliveries(ctx context.Context, client *ent.Client, req *ent.Request, recipients []*ent.Recipient, trigger delivery.Trigger, now time.Time, cliConnected func(*ent.Recipient, time.Time) bool) ([]*ent.Delivery, error) {
	if len(recipients) == 0 {
		return nil, nil
	}
	builders := make([]*ent.DeliveryCreate, len(recipients))
	for i, r := range recipients {
		builders[i] = client.Delivery.Create().
			SetTenantID(req.TenantID).
			SetRequestID(req.ID).
			SetRecipientID(r.ID).
			SetTrigger(trigger).
			SetMaxAttempts(r.MaxAttempts).
			SetRetrySchedule(delivery.RetrySchedule(r.RetrySchedule)).
			SetNextAttemptAt(now).
			SetBacklog(r.Method == recipient.MethodCLI && !cliConnected(r, now)).
			SetCreatedAt(now)
	}
	ds, err := client.Delivery.CreateBulk(builders...).Save(ctx)
	if err != nil {
		return nil, storage.Err("inbound.CreateDeliveries", "delivery", err)
	}
	return ds, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
