package inbound_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"

	"github.com/adal-relay/adal/ent/ledgerentry"
	"github.com/adal-relay/adal/ent/request"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/viewer"
)

// fuzzMaxBody is small so fuzzed bodies reach the 413 branch.
const fuzzMaxBody = 512

// FuzzInbound throws arbitrary methods, path suffixes, queries, headers and bodies at the inbound handler, for
// a server with credit, one without, a deleted one and keys that name nothing. Whatever comes in, the handler
// answers one of 202/400/402/404/413/503 without panicking, and never leaves a half-written accept behind:
// every stored request has exactly one REQUEST_ACCEPTED debit and one delivery (its server has one recipient),
// and every 202 names a stored request.
//
//	go test ./inbound -run '^$' -fuzz FuzzInbound -fuzztime 60s
func FuzzInbound(f *testing.F) {
	env := relaytest.Start(f, func(c *relay.Config) { c.MaxBodyBytes = fuzzMaxBody })
	rich := env.NewTenant("rich", relaytest.PlanLimits{Credits: 1_000_000_000})
	poor := env.NewTenant("poor", relaytest.PlanLimits{Credits: 0})
	paid := env.NewServer(rich, "paid", nil)
	broke := env.NewServer(poor, "broke", nil)
	gone := env.NewServer(rich, "gone", nil)
	for _, s := range []struct {
		t relaytest.Tenant
		s relaytest.Server
	}{{rich, paid}, {poor, broke}, {rich, gone}} {
		id := env.NewRecipient(s.t, s.s.ID, map[string]any{"method": "DIRECT_HTTP", "url": "http://127.0.0.1:1/hook"})
		// Paused: nothing is attempted, the fuzz exercises intake alone.
		env.MustGraphQL(s.t.Owner, `mutation($id: ID!){ pauseRecipient(id: $id){ id } }`, map[string]any{"id": id}, nil)
	}
	env.MustGraphQL(rich.Owner, `mutation($id: ID!){ deleteServer(id: $id){ id } }`, map[string]any{"id": gone.ID}, nil)
	keys := []string{paid.Key, broke.Key, gone.Key}
	ctx := viewer.SystemContext(f.Context())
	client := env.DB.Client
	handler := env.Relay.Inbound

	f.Add(uint8(0), "POST", "/events", "a=1", "Content-Type", "application/json", []byte(`{"id":"evt_1"}`))
	f.Fuzz(func(t *testing.T, target uint8, method, suffix, query, headerName, headerValue string, body []byte) {
		key := suffix // a key that names nothing (or, by chance, garbage that looks like one)
		if int(target) < len(keys) {
			key = keys[target] + suffix
		}
		req := &http.Request{
			Method:     method,
			URL:        &url.URL{Path: "/in/" + key, RawQuery: query},
			Proto:      "HTTP/1.1",
			ProtoMajor: 1, ProtoMinor: 1,
			Header:        http.Header{headerName: {headerValue}},
			Body:          http.NoBody,
			Host:          "adal.test",
			RemoteAddr:    "192.0.2.7:4242",
			ContentLength: int64(len(body)),
		}
		if len(body) > 0 {
			req.Body = httpBody(body)
		}
		req = req.WithContext(t.Context())
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)

		switch rec.Code {
		case http.StatusAccepted, http.StatusBadRequest, http.StatusPaymentRequired, http.StatusNotFound,
			http.StatusRequestEntityTooLarge, http.StatusServiceUnavailable:
		default:
			t.Fatalf("status %d for %s %q: %s", rec.Code, method, key, rec.Body.String())
		}
		if rec.Code == http.StatusAccepted {
			var out struct{ RequestID string }
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
				t.Fatalf("202 body %q: %v", rec.Body.String(), err)
			}
			id, err := strconv.Atoi(out.RequestID)
			if err != nil {
				t.Fatalf("202 requestId %q", out.RequestID)
			}
			got, err := client.Request.Get(ctx, id)
			if err != nil {
				t.Fatalf("202 for request %d, which is not stored: %v", id, err)
			}
			if len(body) > fuzzMaxBody || !bytes.Equal(got.Body, body) || got.Method != method {
				t.Fatalf("stored request %d differs from what was sent", id)
			}
			if target != 0 {
				t.Fatalf("202 from server %d, which has no credit or is deleted", target)
			}
		}
		count := func(n int, err error) int {
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		requests := count(client.Request.Query().Count(ctx))
		debits := count(client.LedgerEntry.Query().Where(ledgerentry.ReasonEQ(ledgerentry.ReasonREQUEST_ACCEPTED)).Count(ctx))
		deliveries := count(client.Delivery.Query().Count(ctx))
		pending := count(client.Request.Query().Where(request.StatusEQ(request.StatusPENDING)).Count(ctx))
		if requests != debits || deliveries != requests || pending != requests {
			t.Fatalf("half-written accept: %d requests (%d pending), %d debits, %d deliveries", requests, pending, debits, deliveries)
		}
	})
}

func httpBody(b []byte) *readCloser { return &readCloser{bytes.NewReader(b)} }

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }
