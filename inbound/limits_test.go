package inbound_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
)

// limitsBundle is a process whose clock stands still unless a test moves it, so that a rate's bucket refills
// only when the test says.
type limitsBundle struct {
	env   *relaytest.Env
	clock *relaytest.Clock
}

func setupLimits(t *testing.T, configure ...func(*relay.Config)) limitsBundle {
	t.Helper()
	env, clock := relaytest.StartAt(t, time.Now().UTC(), configure...)
	return limitsBundle{env: env, clock: clock}
}

// post sends a small webhook and returns the status and the Retry-After header.
func post(t *testing.T, env *relaytest.Env, key string) (int, string) {
	t.Helper()
	resp := env.Post(key, "", []byte(`{"n":1}`))
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// requireRetryAfter checks a Retry-After of whole seconds, at least one.
func requireRetryAfter(t *testing.T, v string) {
	t.Helper()
	n, err := strconv.Atoi(v)
	require.NoError(t, err, "Retry-After %q", v)
	require.GreaterOrEqual(t, n, 1)
}

func TestServerRateLimit(t *testing.T) {
	t.Parallel()
	b := setupLimits(t)
	tn := b.env.NewTenant("limited", relaytest.PlanLimits{Credits: 100})
	srv := b.env.NewServer(tn, "limited", map[string]any{"maxRequestsPerSecond": 2})
	b.env.NewRecipient(tn, srv.ID, map[string]any{"method": "CLI"})

	for i := range 2 {
		status, _ := post(t, b.env, srv.Key)
		require.Equal(t, http.StatusAccepted, status, "request %d is within the rate", i)
	}
	before := stateOf(t, b.env, tn)
	status, retry := post(t, b.env, srv.Key)
	require.Equal(t, http.StatusTooManyRequests, status)
	requireRetryAfter(t, retry)
	require.Equal(t, before, stateOf(t, b.env, tn), "a 429 stores nothing and costs nothing")

	b.clock.Advance(time.Second)
	status, _ = post(t, b.env, srv.Key)
	require.Equal(t, http.StatusAccepted, status, "the bucket refills at the rate")
}

// The plan's rate holds across all servers of a tenant, and one tenant over it leaves another's intake alone.
func TestTenantRateLimit(t *testing.T) {
	t.Parallel()
	b := setupLimits(t)
	noisy := b.env.NewTenant("noisy", relaytest.PlanLimits{Credits: 100})
	b.env.MustGraphQL(b.env.AdminToken(), `mutation($id: ID!){ updatePlan(id: $id, input: {maxRequestsPerSecond: 2}){ id } }`,
		map[string]any{"id": noisy.PlanID}, nil)
	one := b.env.NewServer(noisy, "one", nil)
	two := b.env.NewServer(noisy, "two", nil)
	quiet := b.env.NewTenant("quiet", relaytest.PlanLimits{Credits: 100})
	other := b.env.NewServer(quiet, "other", nil)

	for _, key := range []string{one.Key, two.Key} {
		status, _ := post(t, b.env, key)
		require.Equal(t, http.StatusAccepted, status)
	}
	before := stateOf(t, b.env, noisy)
	for _, key := range []string{one.Key, two.Key} {
		status, retry := post(t, b.env, key)
		require.Equal(t, http.StatusTooManyRequests, status, "the tenant's rate is spent by both servers")
		requireRetryAfter(t, retry)
	}
	require.Equal(t, before, stateOf(t, b.env, noisy))
	for i := range 5 {
		status, _ := post(t, b.env, other.Key)
		require.Equal(t, http.StatusAccepted, status, "another tenant's request %d", i)
	}
}

// Each process counts its own: with two processes on one database, each takes up to the server's rate.
func TestRateLimitIsPerProcess(t *testing.T) {
	t.Parallel()
	b := setupLimits(t)
	peer := b.env.Peer(t, func(c *relay.Config) { c.Now = b.clock.Now })
	tn := b.env.NewTenant("spread", relaytest.PlanLimits{Credits: 100})
	srv := b.env.NewServer(tn, "spread", map[string]any{"maxRequestsPerSecond": 1})

	for _, env := range []*relaytest.Env{b.env, peer} {
		status, _ := post(t, env, srv.Key)
		require.Equal(t, http.StatusAccepted, status)
		status, _ = post(t, env, srv.Key)
		require.Equal(t, http.StatusTooManyRequests, status)
	}
	require.Equal(t, 2, stateOf(t, b.env, tn).requests)
}

// What intake knows of a key is refreshed in the background once it is keyTTL old, every key that is due in
// one refresh: a changed rate then applies; a deleted server's key answers 404.
func TestLimitsRefreshInTheBackground(t *testing.T) {
	t.Parallel()
	b := setupLimits(t)
	tn := b.env.NewTenant("changing", relaytest.PlanLimits{Credits: 1000})
	limited := b.env.NewServer(tn, "limited", nil)
	deleted := b.env.NewServer(tn, "deleted", nil)
	for _, key := range []string{limited.Key, limited.Key, deleted.Key} {
		status, _ := post(t, b.env, key)
		require.Equal(t, http.StatusAccepted, status, "no rate yet")
	}
	b.env.MustGraphQL(tn.Owner, `mutation($id: ID!){ updateServer(id: $id, input: {maxRequestsPerSecond: 1}){ id } }`,
		map[string]any{"id": limited.ID}, nil)
	b.env.MustGraphQL(tn.Owner, `mutation($id: ID!){ deleteServer(id: $id){ id } }`, map[string]any{"id": deleted.ID}, nil)

	b.clock.Advance(6 * time.Second) // past keyTTL: the next request starts the refresh
	relaytest.Eventually(t, 10*time.Second, "the new rate to apply", func() bool {
		// The clock stands still: once the rate applies, the request after the bucket's one token is over it.
		status, _ := post(t, b.env, limited.Key)
		return status == http.StatusTooManyRequests
	})
	status, _ := post(t, b.env, deleted.Key)
	require.Equal(t, http.StatusNotFound, status, "the deleted server's key")
}

// rawRequest writes a request's head declaring a body of length bytes, and only the first sent of them.
func rawRequest(t *testing.T, env *relaytest.Env, key string, length int, sent []byte) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", env.Server.Listener.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	_, err = fmt.Fprintf(conn, "POST /in/%s HTTP/1.1\r\nHost: relay\r\nContent-Length: %d\r\n\r\n%s", key, length, sent)
	require.NoError(t, err)
	return conn
}

// readStatus reads the answer on conn, through r if given.
func readStatus(t *testing.T, conn net.Conn, r ...*bufio.Reader) (int, string) {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(30*time.Second)))
	if len(r) == 0 {
		r = append(r, bufio.NewReader(conn))
	}
	resp, err := http.ReadResponse(r[0], nil)
	require.NoError(t, err, "an answer must come without the body being sent")
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// An unknown key and a request over its rate are answered from the headers alone: the body is never read,
// so the sender gets its answer without sending it, and an oversized body to an unknown key is a 404.
func TestRefusedBeforeTheBodyIsRead(t *testing.T) {
	t.Parallel()
	const limit = 64
	b := setupLimits(t, func(c *relay.Config) { c.MaxBodyBytes = limit })
	tn := b.env.NewTenant("early", relaytest.PlanLimits{Credits: 10})
	srv := b.env.NewServer(tn, "early", map[string]any{"maxRequestsPerSecond": 1})

	status, _ := readStatus(t, rawRequest(t, b.env, "nosuchkey", limit, nil))
	require.Equal(t, http.StatusNotFound, status)
	status, _ = readStatus(t, rawRequest(t, b.env, "nosuchkey", 10*limit, nil))
	require.Equal(t, http.StatusNotFound, status, "an unknown key is a 404 whatever its body's size")
	resp := b.env.Post("nosuchkey", "", bytes.Repeat([]byte("x"), 2<<20))
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	status, _ = post(t, b.env, srv.Key)
	require.Equal(t, http.StatusAccepted, status)
	status, retry := readStatus(t, rawRequest(t, b.env, srv.Key, limit, nil))
	require.Equal(t, http.StatusTooManyRequests, status)
	requireRetryAfter(t, retry)
}

// Past the budget of bodies in flight, intake answers 503 with Retry-After, and takes requests again once the
// bodies in flight are done.
func TestBodiesInFlightBound(t *testing.T) {
	t.Parallel()
	const limit = 64
	b := setupLimits(t, func(c *relay.Config) { c.MaxBodyBytes, c.IntakeBodyBudget = limit, limit })
	tn := b.env.NewTenant("slow", relaytest.PlanLimits{Credits: 100})
	srv := b.env.NewServer(tn, "slow", nil)

	// A sender that declares the largest body and sends it slowly holds the whole budget while it sends.
	var slow net.Conn
	var answer *bufio.Reader
	start := func() {
		slow = rawRequest(t, b.env, srv.Key, limit, []byte("{"))
		answer = bufio.NewReader(slow)
	}
	start()
	var retry string
	relaytest.Eventually(t, 10*time.Second, "a 503 while the slow body holds the budget", func() bool {
		var status int
		status, retry = post(t, b.env, srv.Key)
		require.Contains(t, []int{http.StatusAccepted, http.StatusServiceUnavailable}, status)
		if status == http.StatusServiceUnavailable {
			return true
		}
		// A probe that reserved first leaves the slow request the 503: start that one again.
		require.NoError(t, slow.SetReadDeadline(time.Now().Add(time.Millisecond)))
		if _, err := answer.Peek(1); err == nil {
			slow.Close()
			start()
		}
		return false
	})
	requireRetryAfter(t, retry)

	_, err := slow.Write(append(bytes.Repeat([]byte(" "), limit-2), '}'))
	require.NoError(t, err)
	status, _ := readStatus(t, slow, answer)
	require.Equal(t, http.StatusAccepted, status)
	status, _ = post(t, b.env, srv.Key)
	require.Equal(t, http.StatusAccepted, status, "the budget is free again")
}

func TestInvalidRateLimits(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartTenantServer(t, "invalid", 10)
	admin := env.AdminToken()
	for _, n := range []int{0, -1} {
		for _, c := range []struct {
			token, query string
			vars         map[string]any
		}{
			{tn.Owner, `mutation($n: Int){ createServer(input: {name: "x", maxRequestsPerSecond: $n}){ id } }`, nil},
			{tn.Owner, `mutation($id: ID!, $n: Int){ updateServer(id: $id, input: {maxRequestsPerSecond: $n}){ id } }`, map[string]any{"id": srv.ID}},
			{admin, `mutation($n: Int){ createPlan(input: {name: "x", monthlyCredits: 1, retentionDays: 1, maxServers: 1, maxRecipientsPerServer: 1, maxRequestsPerSecond: $n}){ id } }`, nil},
			{admin, `mutation($id: ID!, $n: Int){ updatePlan(id: $id, input: {maxRequestsPerSecond: $n}){ id } }`, map[string]any{"id": tn.PlanID}},
		} {
			vars := map[string]any{"n": n}
			for k, v := range c.vars {
				vars[k] = v
			}
			require.Equal(t, "INVALID_INPUT", env.GraphQL(c.token, c.query, vars).Code(), "%s with %d", c.query, n)
		}
	}

	var out struct {
		UpdateServer struct{ MaxRequestsPerSecond *int }
	}
	env.MustGraphQL(tn.Owner, `mutation($id: ID!){ updateServer(id: $id, input: {maxRequestsPerSecond: 5}){ maxRequestsPerSecond } }`,
		map[string]any{"id": srv.ID}, &out)
	require.Equal(t, 5, *out.UpdateServer.MaxRequestsPerSecond)
	env.MustGraphQL(tn.Owner, `mutation($id: ID!){ updateServer(id: $id, input: {clearMaxRequestsPerSecond: true}){ maxRequestsPerSecond } }`,
		map[string]any{"id": srv.ID}, &out)
	require.Nil(t, out.UpdateServer.MaxRequestsPerSecond)
	require.Equal(t, "FORBIDDEN", env.GraphQL(tn.Member, `mutation($id: ID!){ updateServer(id: $id, input: {maxRequestsPerSecond: 1}){ id } }`,
		map[string]any{"id": srv.ID}).Code(), "members cannot change a server's rate")
}
