package relaytest

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
)

// Subscription is one GraphQL subscription over the graphql-transport-ws protocol, as the panel runs it.
type Subscription struct {
	env    *Env
	conn   *websocket.Conn
	cancel context.CancelFunc
	ctx    context.Context
	// Messages receives each "next" payload, and "error"/"complete" frames as Response values with Errors.
	Messages chan Response
}

type wsFrame struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// Subscribe opens a websocket to /graphql with token in connection_init and starts one subscription. A
// refused connection_init fails the test; errors of the subscription itself arrive on Messages.
func (e *Env) Subscribe(token, query string, vars map[string]any) *Subscription {
	e.T.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	url := "ws" + strings.TrimPrefix(e.Server.URL, "http") + "/graphql"
	conn, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{
		Subprotocols: []string{"graphql-transport-ws"},
		HTTPHeader:   http.Header{},
	})
	if err != nil {
		cancel()
		e.T.Fatalf("dial websocket: %v", err)
	}
	conn.SetReadLimit(16 << 20)
	s := &Subscription{env: e, conn: conn, cancel: cancel, ctx: ctx, Messages: make(chan Response, 256)}
	e.T.Cleanup(s.Close)
	auth := map[string]any{}
	if token != "" {
		auth["Authorization"] = "Bearer " + token
	}
	init, _ := json.Marshal(auth)
	if err := wsjson.Write(ctx, conn, wsFrame{Type: "connection_init", Payload: init}); err != nil {
		e.T.Fatalf("connection_init: %v", err)
	}
	var ack wsFrame
	if err := wsjson.Read(ctx, conn, &ack); err != nil || ack.Type != "connection_ack" {
		e.T.Fatalf("connection_ack: %v (got %q)", err, ack.Type)
	}
	payload, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err := wsjson.Write(ctx, conn, wsFrame{ID: "1", Type: "subscribe", Payload: payload}); err != nil {
		e.T.Fatalf("subscribe: %v", err)
	}
	go s.read()
	return s
}

func (s *Subscription) read() {
	defer close(s.Messages)
	for {
		var f wsFrame
		if err := wsjson.Read(s.ctx, s.conn, &f); err != nil {
			return
		}
		switch f.Type {
		case "ping":
			_ = wsjson.Write(s.ctx, s.conn, wsFrame{Type: "pong"})
		case "next":
			var r Response
			_ = json.Unmarshal(f.Payload, &r)
			s.Messages <- r
		case "error":
			var errs []GQLError
			_ = json.Unmarshal(f.Payload, &errs)
			s.Messages <- Response{Errors: errs}
		case "complete":
			return
		}
	}
}

// Next returns the next message, failing the test if none comes within timeout.
func (s *Subscription) Next(timeout time.Duration) Response {
	s.env.T.Helper()
	select {
	case r, ok := <-s.Messages:
		if !ok {
			s.env.T.Fatalf("subscription closed")
		}
		return r
	case <-time.After(timeout):
		s.env.T.Fatalf("no subscription message within %v", timeout)
	}
	return Response{}
}

// Close ends the subscription and the connection, as a browser tab closing would.
func (s *Subscription) Close() {
	_ = s.conn.Close(websocket.StatusNormalClosure, "bye")
	s.cancel()
}

// NextAfter triggers (e.g. posts a webhook) until a message arrives: the server registers a subscription
// asynchronously after "subscribe", so a single trigger right away could come before it listens.
func (s *Subscription) NextAfter(timeout time.Duration, trigger func()) Response {
	s.env.T.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		trigger()
		select {
		case r, ok := <-s.Messages:
			if !ok {
				s.env.T.Fatalf("subscription closed")
			}
			return r
		case <-time.After(250 * time.Millisecond):
		}
	}
	s.env.T.Fatalf("no subscription message within %v", timeout)
	return Response{}
}
