package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// apiTimeout bounds one GraphQL round trip over HTTP.
const apiTimeout = 15 * time.Second

// maxAPIResponse bounds what the CLI reads of one answer: a page of requests with their deliveries fits.
const maxAPIResponse = 16 << 20

// apiClient runs GraphQL operations over HTTP against one Adal API with one token.
type apiClient struct {
	base     string // as the user gave it
	endpoint string
	token    string
	http     *http.Client
}

func newAPIClient(base, token string) (*apiClient, error) {
	endpoint, err := httpURL(base)
	if err != nil {
		return nil, err
	}
	return &apiClient{base: base, endpoint: endpoint, token: token, http: &http.Client{Timeout: apiTimeout}}, nil
}

// httpURL is the server's GraphQL HTTP endpoint.
func httpURL(server string) (string, error) {
	u, err := wsURL(server)
	if err != nil {
		return "", err
	}
	p, _ := url.Parse(u)
	p.Scheme = map[string]string{"ws": "http", "wss": "https"}[p.Scheme]
	return p.String(), nil
}

// do runs one operation and decodes its data into out (when not nil). GraphQL errors come back as gqlErrors;
// a server that cannot be reached, or answers with something other than GraphQL, as a *lostError.
func (a *apiClient) do(ctx context.Context, query string, vars map[string]any, out any) error {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.endpoint, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := a.http.Do(req)
	if err != nil {
		return &lostError{fmt.Errorf("cannot reach the server at %s: %s", a.base, localError(err))}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAPIResponse))
	if err != nil {
		return &lostError{fmt.Errorf("reading the answer of %s: %w", a.base, err)}
	}
	var res result
	if err := json.Unmarshal(raw, &res); err != nil {
		return &lostError{fmt.Errorf("%s answered HTTP %d, not GraphQL: does it run Adal?", a.base, resp.StatusCode)}
	}
	if len(res.Errors) > 0 {
		return res.Errors
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(res.Data, out); err != nil {
		return fmt.Errorf("undecodable answer from %s: %w", a.base, err)
	}
	return nil
}

// explainAuth adds what to do about a refused token.
func explainAuth(err error) error {
	var gql gqlErrors
	if errors.As(err, &gql) && gql.has("UNAUTHENTICATED") {
		return fmt.Errorf("the server refused the token: %w; get a fresh token and run adal login", err)
	}
	return err
}

// The minimal graphql-transport-ws client the CLI needs: connection_init with the token, the cliListen
// subscription, and ping/pong both ways so that a dead connection is noticed. Reports go over HTTP (see
// reportMutation).

const subprotocol = "graphql-transport-ws"

// maxMessage bounds one server message: a job carries the request body (up to 1 MiB by default, more if the
// server allows it) in base64.
const maxMessage = 64 << 20

// wsMessage is one graphql-transport-ws frame.
type wsMessage struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// gqlError is one GraphQL error as the server sends it.
type gqlError struct {
	Message    string         `json:"message"`
	Extensions map[string]any `json:"extensions"`
}

func (e gqlError) code() string {
	s, _ := e.Extensions["code"].(string)
	return s
}

// gqlErrors is the error of an operation that the server answered with GraphQL errors.
type gqlErrors []gqlError

func (es gqlErrors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Message
		if c := e.code(); c != "" {
			msgs[i] += " (" + c + ")"
		}
	}
	return strings.Join(msgs, "; ")
}

// permanent reports whether retrying the same operation can never succeed: the token, the recipient or
// the input is wrong.
func (es gqlErrors) permanent() bool {
	for _, e := range es {
		switch e.code() {
		case "UNAUTHENTICATED", "FORBIDDEN", "NOT_FOUND", "INVALID_INPUT":
			return true
		}
	}
	return false
}

// has reports whether one of the errors has code.
func (es gqlErrors) has(code string) bool {
	for _, e := range es {
		if e.code() == code {
			return true
		}
	}
	return false
}

// rejects reports whether the server will never take this report (its delivery is gone, or the report is
// malformed), so keeping it is pointless. A refused token is not such a case: the result is kept until the
// user logs in again.
func (es gqlErrors) rejects() bool {
	for _, e := range es {
		switch e.code() {
		case "NOT_FOUND", "INVALID_INPUT":
			return true
		}
	}
	return false
}

// authError is a token the server refused at the handshake.
type authError struct{ msg string }

func (e *authError) Error() string { return e.msg }

// wsURL turns the server's base URL (http[s]://host[:port][/prefix]) into its GraphQL websocket URL.
func wsURL(server string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(server))
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("server URL %q is not an absolute URL such as http://localhost:8080", server)
	}
	switch u.Scheme {
	case "http", "ws":
		u.Scheme = "ws"
	case "https", "wss":
		u.Scheme = "wss"
	default:
		return "", fmt.Errorf("server URL %q must start with http:// or https://", server)
	}
	if !strings.HasSuffix(u.Path, "/graphql") {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/graphql"
	}
	u.RawQuery, u.Fragment = "", ""
	return u.String(), nil
}

// wsClient is one open graphql-transport-ws connection.
type wsClient struct {
	conn *websocket.Conn

	writeMu sync.Mutex

	mu     sync.Mutex
	nextID int
	ops    map[string]*operation
	err    error // why the connection ended, once it has

	done     chan struct{} // closed when the reader stops
	lastRead time.Time     // with its monotonic reading: compared with the time a ping was sent
	heard    chan struct{} // signalled on every message read
	dead     error         // why keepAlive gave up on the connection
}

// operation is one started operation: its messages, and a signal that its caller stopped reading.
type operation struct {
	ch       chan wsMessage
	gone     chan struct{}
	goneOnce sync.Once
}

func (op *operation) abandon() { op.goneOnce.Do(func() { close(op.gone) }) }

// dialWS opens a connection to server and authenticates with token (in the handshake and in
// connection_init, as browsers cannot set headers). A refused token is an *authError.
func dialWS(ctx context.Context, server, token string, ka keepAlive) (*wsClient, error) {
	u, err := wsURL(server)
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	conn, resp, err := websocket.Dial(dctx, u, &websocket.DialOptions{
		Subprotocols: []string{subprotocol},
		HTTPHeader:   http.Header{"Authorization": {"Bearer " + token}},
	})
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusUnauthorized {
			return nil, &authError{msg: "the server refused the token (expired or not issued by it); get a new one and run `adal login`"}
		}
		if resp != nil {
			return nil, fmt.Errorf("websocket handshake with %s: HTTP %d", u, resp.StatusCode)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, errors.New(localError(err))
	}
	if conn.Subprotocol() != subprotocol {
		conn.CloseNow()
		return nil, fmt.Errorf("%s does not speak %s", u, subprotocol)
	}
	conn.SetReadLimit(maxMessage)
	c := &wsClient{conn: conn, ops: map[string]*operation{}, done: make(chan struct{}), lastRead: time.Now(), heard: make(chan struct{}, 1)}
	payload, _ := json.Marshal(map[string]string{"Authorization": "Bearer " + token})
	if err := c.write(dctx, wsMessage{Type: "connection_init", Payload: payload}); err != nil {
		conn.CloseNow()
		return nil, fmt.Errorf("connection_init: %w", err)
	}
	for {
		m, err := c.read(dctx)
		if err != nil {
			conn.CloseNow()
			if reason := closeReason(err); reason != "" {
				return nil, fmt.Errorf("the server closed the connection during init: %s", reason)
			}
			return nil, fmt.Errorf("waiting for connection_ack: %w", err)
		}
		switch m.Type {
		case "connection_ack":
			go c.readLoop()
			// The sleep detector starts now: a sleep after the dial is one the connection lived through.
			go c.keepAlive(ka, newWakeDetector(ka.wall, ka.mono))
			return c, nil
		case "ping":
			_ = c.write(dctx, wsMessage{Type: "pong"})
		}
	}
}

func closeReason(err error) string {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		return fmt.Sprintf("%s (%d)", ce.Reason, ce.Code)
	}
	return ""
}

func (c *wsClient) read(ctx context.Context) (wsMessage, error) {
	_, data, err := c.conn.Read(ctx)
	if err != nil {
		return wsMessage{}, err
	}
	var m wsMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return wsMessage{}, fmt.Errorf("undecodable message from server: %w", err)
	}
	c.mu.Lock()
	c.lastRead = time.Now()
	c.mu.Unlock()
	select {
	case c.heard <- struct{}{}:
	default:
	}
	return m, nil
}

func (c *wsClient) write(ctx context.Context, m wsMessage) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.conn.Write(wctx, websocket.MessageText, data)
}

// readLoop routes messages to their operations until the connection ends; then every operation's channel
// is closed and Err tells why.
func (c *wsClient) readLoop() {
	var err error
loop:
	for {
		var m wsMessage
		m, err = c.read(context.Background())
		if err != nil {
			break
		}
		switch m.Type {
		case "ping":
			if err = c.write(context.Background(), wsMessage{Type: "pong"}); err != nil {
				break loop
			}
		case "next", "error", "complete":
			c.mu.Lock()
			op := c.ops[m.ID]
			if m.Type != "next" {
				delete(c.ops, m.ID)
			}
			c.mu.Unlock()
			if op == nil {
				continue
			}
			// The caller reads promptly; a job waits here rather than being dropped, unless the caller
			// gave up on the operation.
			select {
			case op.ch <- m:
			case <-op.gone:
			}
			if m.Type != "next" {
				close(op.ch)
			}
		}
	}
	c.mu.Lock()
	dead := c.dead
	c.mu.Unlock()
	switch reason := closeReason(err); {
	case dead != nil:
		err = dead
	case reason != "":
		err = fmt.Errorf("the server closed the connection: %s", reason)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		err = errors.New("connection lost")
	default:
		err = fmt.Errorf("connection lost: %w", err)
	}
	c.mu.Lock()
	c.err = err
	ops := c.ops
	c.ops = map[string]*operation{}
	c.mu.Unlock()
	for _, op := range ops {
		close(op.ch)
	}
	close(c.done)
}

// keepAlive pings the server every ka.every and closes a connection that does not answer within
// ka.pongWait, so that a dead network is noticed in seconds instead of when the OS gives up on the socket. It
// also notices that the computer slept (see wakeDetector) and then checks the connection at once: after a
// sleep the connection is usually dead, and the regular ping would come too late.
func (c *wsClient) keepAlive(ka keepAlive, sleep *wakeDetector) {
	t := time.NewTicker(ka.every)
	defer t.Stop()
	w := time.NewTicker(ka.wakeTick)
	defer w.Stop()
	for {
		var why string
		select {
		case <-c.done:
			return
		case <-t.C:
			why = "no answer to a ping within " + ka.pongWait.String()
		case <-w.C:
			slept := sleep.check()
			if slept == 0 {
				continue
			}
			if ka.onWake != nil {
				ka.onWake(slept)
			}
			why = fmt.Sprintf("no answer from the server after the computer slept for about %s", slept.Round(time.Second))
		}
		if !c.ping(ka.pongWait) {
			c.mu.Lock()
			c.dead = errors.New(why)
			c.mu.Unlock()
			// No close handshake: the peer is not answering.
			c.conn.CloseNow()
			return
		}
	}
}

// ping sends a ping and reports whether anything arrived from the server within wait.
func (c *wsClient) ping(wait time.Duration) bool {
	sent := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := c.write(ctx, wsMessage{Type: "ping"}); err != nil {
		return c.isDone() // the reader has seen the end already and says why
	}
	for {
		c.mu.Lock()
		answered := c.lastRead.After(sent)
		c.mu.Unlock()
		if answered {
			return true
		}
		select {
		case <-c.done:
			return true
		case <-ctx.Done():
			return false
		case <-c.heard:
		}
	}
}

// Err is why the connection ended, or nil while it is open.
func (c *wsClient) Err() error {
	select {
	case <-c.done:
	default:
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		return errors.New("connection closed")
	}
	return c.err
}

// Done is closed when the connection ends.
func (c *wsClient) Done() <-chan struct{} { return c.done }

// Close ends the connection normally.
func (c *wsClient) Close() {
	_ = c.conn.Close(websocket.StatusNormalClosure, "bye")
	<-c.done
}

// start sends a subscribe frame and returns the operation's id and message channel.
func (c *wsClient) start(ctx context.Context, query string, vars map[string]any) (string, <-chan wsMessage, error) {
	c.mu.Lock()
	if c.isDone() {
		c.mu.Unlock()
		return "", nil, c.Err()
	}
	c.nextID++
	id := strconv.Itoa(c.nextID)
	op := &operation{ch: make(chan wsMessage, 4), gone: make(chan struct{})}
	c.ops[id] = op
	c.mu.Unlock()
	payload, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err := c.write(ctx, wsMessage{ID: id, Type: "subscribe", Payload: payload}); err != nil {
		c.stop(id)
		return "", nil, err
	}
	return id, op.ch, nil
}

func (c *wsClient) isDone() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop ends an operation from our side: its further messages are dropped.
func (c *wsClient) stop(id string) {
	c.mu.Lock()
	op := c.ops[id]
	delete(c.ops, id)
	c.mu.Unlock()
	if op != nil {
		op.abandon()
		_ = c.write(context.Background(), wsMessage{ID: id, Type: "complete"})
	}
}

// result is the payload of a "next" frame.
type result struct {
	Data   json.RawMessage `json:"data"`
	Errors gqlErrors       `json:"errors"`
}
