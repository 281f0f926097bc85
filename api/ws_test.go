package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/relay/relaytest"
)

// wsSub is one GraphQL subscription over the graphql-transport-ws protocol, as the panel and the CLI open it.
// A reader goroutine turns the socket into a channel (cancelling a websocket read would close the socket).
type wsSub struct {
	t    *testing.T
	conn *websocket.Conn
	msgs chan wsMessage
	// closeErr is why the connection ended; read it only after msgs is closed.
	closeErr error
}

// wsMessage is what the server sent for the subscription: data, or errors (from a "next" payload or an
// "error" message), or the end of the stream.
type wsMessage struct {
	ID       string
	Type     string
	Data     json.RawMessage
	Errors   []relaytest.GQLError
	TimedOut bool
}

// subscribe opens a websocket to /graphql, authenticates with token in connection_init ("" sends none) and
// starts query. The connection closes when the test ends.
func subscribe(t *testing.T, env *relaytest.Env, token, query string, vars map[string]any) *wsSub {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(env.Server.URL, "http")+"/graphql", &websocket.DialOptions{
		HTTPClient:   env.Server.Client(),
		Subprotocols: []string{"graphql-transport-ws"},
	})
	require.NoError(t, err)
	conn.SetReadLimit(8 << 20)
	s := &wsSub{t: t, conn: conn, msgs: make(chan wsMessage, 64)}
	done := make(chan struct{})
	t.Cleanup(func() {
		conn.CloseNow()
		<-done
	})
	payload := map[string]any{}
	if token != "" {
		payload["Authorization"] = "Bearer " + token
	}
	s.send(map[string]any{"type": "connection_init", "payload": payload})
	for {
		var m struct{ Type string }
		_, raw, err := conn.Read(ctx)
		require.NoError(t, err, "waiting for connection_ack")
		require.NoError(t, json.Unmarshal(raw, &m))
		if m.Type == "connection_ack" {
			break
		}
		require.Contains(t, []string{"ping", "pong", "ka"}, m.Type, "unexpected %s", raw)
	}
	go func() {
		defer close(done)
		defer close(s.msgs)
		for {
			_, raw, err := conn.Read(context.Background())
			if err != nil {
				s.closeErr = err
				return // closed
			}
			if m, ok := s.parse(raw); ok {
				s.msgs <- m
			}
		}
	}()
	s.send(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{"query": query, "variables": vars}})
	return s
}

func (s *wsSub) send(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.conn.Write(ctx, websocket.MessageText, b) // a failed write shows up as a closed stream
}

func (s *wsSub) parse(raw []byte) (wsMessage, bool) {
	var m struct {
		Type    string
		ID      string
		Payload json.RawMessage
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return wsMessage{Type: "undecodable: " + string(raw)}, true
	}
	switch m.Type {
	case "ping":
		s.send(map[string]any{"type": "pong"})
		return wsMessage{}, false
	case "pong", "ka":
		return wsMessage{}, false
	case "next":
		var p struct {
			Data   json.RawMessage
			Errors []relaytest.GQLError
		}
		if err := json.Unmarshal(m.Payload, &p); err != nil {
			return wsMessage{Type: "undecodable: " + string(raw)}, true
		}
		return wsMessage{ID: m.ID, Type: m.Type, Data: p.Data, Errors: p.Errors}, true
	case "error":
		var errs []relaytest.GQLError
		if err := json.Unmarshal(m.Payload, &errs); err != nil {
			return wsMessage{Type: "undecodable: " + string(raw)}, true
		}
		return wsMessage{ID: m.ID, Type: m.Type, Errors: errs}, true
	}
	return wsMessage{ID: m.ID, Type: m.Type}, true
}

// next returns the subscription's next message, or TimedOut when none came within timeout.
func (s *wsSub) next(timeout time.Duration) wsMessage {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case m, ok := <-s.msgs:
		if !ok {
			return wsMessage{Type: "closed"}
		}
		return m
	case <-timer.C:
		return wsMessage{TimedOut: true}
	}
}
