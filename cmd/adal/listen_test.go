package main_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/internal/flakynet"
	"github.com/adal-relay/adal/relay/relaytest"
)

// event is one JSON line of `adal listen --format json`.
type event map[string]any

func (e event) str(k string) string { s, _ := e[k].(string); return s }

func (e event) num(k string) float64 { n, _ := e[k].(float64); return n }

// events parses everything printed on stdout so far: every line must be one JSON object with a type.
func (p *cliProcess) events() []event {
	p.t.Helper()
	p.mu.Lock()
	lines := append([]string(nil), p.lines...)
	p.mu.Unlock()
	out := make([]event, 0, len(lines))
	for _, line := range lines {
		var e event
		require.NoError(p.t, json.Unmarshal([]byte(line), &e), "stdout line is not JSON: %q", line)
		require.NotEmpty(p.t, e.str("type"), "event without a type: %q", line)
		out = append(out, e)
	}
	return out
}

// waitEvent waits for the n-th (from 1) event of the given type that matches, and returns it.
func (p *cliProcess) waitEvent(kind string, n int, match func(event) bool) event {
	p.t.Helper()
	var found event
	relaytest.Eventually(p.t, 20*time.Second, fmt.Sprintf("event %q #%d; stdout so far:\n%s\nstderr:\n%s", kind, n, p.output(), p.stderr()), func() bool {
		seen := 0
		for _, e := range p.events() {
			if e.str("type") == kind && (match == nil || match(e)) {
				if seen++; seen == n {
					found = e
					return true
				}
			}
		}
		return false
	})
	return found
}

func (p *cliProcess) stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.errLines, "\n")
}

// One process, one websocket, several recipients of different servers each forwarding to its own service;
// each line names its recipient and each recipient has its own journal.
func TestListenForwardsSeveralRecipientsOverOneConnection(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t, unit(20*time.Millisecond))
	tn := env.NewTenant("acme", relaytest.PlanLimits{Credits: 1000})
	stripe := env.NewServer(tn, "stripe", nil)
	github := env.NewServer(tn, "github", nil)
	billing := env.NewRecipient(tn, stripe.ID, map[string]any{"method": "CLI", "name": "billing"})
	ci := env.NewRecipient(tn, github.ID, map[string]any{"method": "CLI", "name": "ci"})
	localA, localB := newLocalService(t, answer(200)), newLocalService(t, answer(202))
	flaky := flakynet.New(t, env.Server.URL)
	journal := t.TempDir()

	cli := startAdal(t, "", "listen", "--api", flaky.URL(), "--token", tn.Member, "--journal-dir", journal,
		"--recipient", billing, "--forward", localA.URL+"/a", "--recipient", ci, "--forward", localB.URL+"/b")
	cli.waitOutput("ready — listening for 2 recipients")
	require.True(t, cliConnected(t, env, tn.Member, stripe.ID, billing))
	require.True(t, cliConnected(t, env, tn.Member, github.ID, ci))

	charge := env.Send(stripe.Key, "/charge", `{"amount":1}`)
	push := env.Send(github.Key, "/push", `{"ref":"main"}`)
	relaytest.Eventually(t, 20*time.Second, "both deliveries to succeed", func() bool {
		return deliveryOf(t, env, charge, billing).Status == entdelivery.StatusSUCCEEDED &&
			deliveryOf(t, env, push, ci).Status == entdelivery.StatusSUCCEEDED
	})
	require.Len(t, localA.callsCopy(), 1)
	require.Equal(t, "/a/charge", localA.callsCopy()[0].uri)
	require.Len(t, localB.callsCopy(), 1)
	require.Equal(t, "/b/push", localB.callsCopy()[0].uri)
	cli.waitOutput("[billing] POST /charge → 200 OK")
	cli.waitOutput("[ci] POST /push → 202 Accepted")
	require.Equal(t, 1, flaky.Websockets(), "one connection carries both subscriptions")

	dirs, err := filepath.Glob(filepath.Join(journal, "*-recipient-*"))
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"recipient-" + billing, "recipient-" + ci},
		[]string{dirs[0][strings.LastIndex(dirs[0], "recipient-"):], dirs[1][strings.LastIndex(dirs[1], "recipient-"):]})

	// One recipient deleted: the listen says so and goes on for the other.
	env.MustGraphQL(tn.Owner, `mutation($id: ID!){ deleteRecipient(id: $id){ id } }`, map[string]any{"id": ci}, nil)
	cli.waitOutput(`recipient "ci" is gone (recipient not found (NOT_FOUND)): no longer listening for it; still listening for 1 other(s)`)
	again := env.Send(stripe.Key, "/again", `{}`)
	relaytest.Eventually(t, 20*time.Second, "the other recipient to go on", func() bool {
		return deliveryOf(t, env, again, billing).Status == entdelivery.StatusSUCCEEDED
	})
	cli.interrupt()
	require.NotContains(t, cli.output(), "\x1b[", "no colour when stdout is not a terminal")
}

// --server listens for every CLI recipient of a server (and only those), forwarding all to one URL.
func TestListenForEveryCLIRecipientOfAServer(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t, unit(20*time.Millisecond))
	tn := env.NewTenant("acme", relaytest.PlanLimits{Credits: 1000})
	shop := env.NewServer(tn, "shop", nil)
	laptop := env.NewRecipient(tn, shop.ID, map[string]any{"method": "CLI", "name": "laptop"})
	tests := env.NewRecipient(tn, shop.ID, map[string]any{"method": "CLI", "name": "tests"})
	witness := newLocalService(t, answer(200))
	direct := env.NewRecipient(tn, shop.ID, map[string]any{"method": "DIRECT_HTTP", "url": witness.URL, "name": "prod"})
	empty := env.NewServer(tn, "empty", nil)
	local := newLocalService(t, answer(200))

	cli := startAdal(t, "", "listen", "--api", env.Server.URL, "--token", tn.Member, "--journal-dir", t.TempDir(),
		"--server", "shop", "--forward", local.URL)
	cli.waitOutput("ready — listening for 2 recipients")
	reqID := env.Send(shop.Key, "/order", `{}`)
	awaitSucceeded(t, env, reqID, laptop, tests, direct)
	require.Equal(t, 2, local.count(), "one call per CLI recipient")
	require.Equal(t, 1, witness.count(), "the direct recipient is not the CLI's")
	cli.waitOutput("[laptop] POST /order → 200 OK")
	cli.waitOutput("[tests] POST /order → 200 OK")
	cli.interrupt()

	// A server without CLI recipients is a configuration error.
	code, _, stderr := runAdal(t, run{}, "listen", "--api", env.Server.URL, "--token", tn.Member, "--journal-dir", t.TempDir(),
		"--server", empty.ID, "--forward", local.URL)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `server "empty" has no CLI recipient`)
}

// --server also listens for the CLI recipients created on the server while it runs (and only for those), even
// once the server is renamed.
func TestListenPicksUpRecipientsAddedToTheServer(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t, unit(20*time.Millisecond))
	tn := env.NewTenant("acme", relaytest.PlanLimits{Credits: 1000})
	shop := env.NewServer(tn, "shop", nil)
	laptop := env.NewRecipient(tn, shop.ID, map[string]any{"method": "CLI", "name": "laptop"})
	local := newLocalService(t, answer(200))

	cli := startAdal(t, "", "listen", "--api", env.Server.URL, "--token", tn.Member, "--journal-dir", t.TempDir(),
		"--server", "shop", "--forward", local.URL, "--refresh", "100ms")
	cli.waitOutput("ready — waiting for deliveries")
	// Renamed meanwhile: the listen named it by its old name, and finds it all the same.
	env.MustGraphQL(tn.Owner, `mutation($id: ID!){ updateServer(id: $id, input: {name: "store"}){ id } }`, map[string]any{"id": shop.ID}, nil)

	witness := newLocalService(t, answer(200))
	direct := env.NewRecipient(tn, shop.ID, map[string]any{"method": "DIRECT_HTTP", "url": witness.URL, "name": "prod"})
	tests := env.NewRecipient(tn, shop.ID, map[string]any{"method": "CLI", "name": "tests"})
	cli.waitOutput(`recipient "tests" ready — waiting for its deliveries`)
	require.True(t, cliConnected(t, env, tn.Member, shop.ID, tests))

	reqID := env.Send(shop.Key, "/order", `{}`)
	awaitSucceeded(t, env, reqID, laptop, tests, direct)
	cli.waitOutput("[tests] POST /order → 200 OK")
	cli.waitOutput("[laptop] POST /order → 200 OK")
	require.Equal(t, 2, local.count(), "one call per CLI recipient")
	require.Equal(t, 1, witness.count(), "the direct recipient is not the CLI's")
	require.NotContains(t, cli.output(), `"prod"`, "a direct recipient is not listened for")
	cli.interrupt()
}

// awaitSucceeded waits until the request's delivery to each recipient has succeeded.
func awaitSucceeded(t *testing.T, env *relaytest.Env, reqID string, recipients ...string) {
	t.Helper()
	relaytest.Eventually(t, 20*time.Second, "every delivery to succeed", func() bool {
		for _, r := range recipients {
			if deliveryOf(t, env, reqID, r).Status != entdelivery.StatusSUCCEEDED {
				return false
			}
		}
		return true
	})
}

// --format json: one JSON object per line on stdout — ready, delivery, disconnected, reconnected, stopped —
// and the messages for people on stderr.
func TestListenPrintsJSONLines(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t, unit(20*time.Millisecond))
	f := newFixture(t, env, nil, map[string]any{"name": "laptop", "maxAttempts": 1})
	local := newLocalService(t, func(n int) int {
		if n == 1 {
			return 200
		}
		return 500
	})
	flaky := flakynet.New(t, env.Server.URL)
	cli := start(t, run{split: true}, "listen", "--api", flaky.URL(), "--token", f.tenant.Member, "--journal-dir", t.TempDir(),
		"--recipient", f.recipient, "--forward", local.URL+"/hook", "--format", "json")

	ready := cli.waitEvent("ready", 1, nil)
	rs, _ := ready["recipients"].([]any)
	require.Len(t, rs, 1)
	r0 := event(rs[0].(map[string]any))
	require.Equal(t, f.recipient, r0.str("recipientId"))
	require.Equal(t, "laptop", r0.str("recipient"))
	require.Equal(t, local.URL+"/hook", r0.str("forward"))
	require.Contains(t, r0.str("connected"), `recipient "laptop" of server "laptop"`)

	ok := env.Send(f.server.Key, "/evt?x=1", `{}`)
	d := cli.waitEvent("delivery", 1, nil)
	require.Equal(t, ok, d.str("requestId"))
	require.Equal(t, f.recipient, d.str("recipientId"))
	require.Equal(t, "laptop", d.str("recipient"))
	require.Equal(t, "POST", d.str("method"))
	require.Equal(t, "/evt?x=1", d.str("path"))
	require.EqualValues(t, 200, d.num("status"))
	require.EqualValues(t, 1, d.num("attempt"))
	require.Equal(t, true, d["ok"])
	require.Contains(t, d, "durationMs")
	require.NotEmpty(t, d.str("deliveryId"))
	_, err := time.Parse(time.RFC3339Nano, d.str("time"))
	require.NoError(t, err)

	failed := env.Send(f.server.Key, "/evt", `{}`)
	d = cli.waitEvent("delivery", 2, nil)
	require.Equal(t, failed, d.str("requestId"))
	require.EqualValues(t, 500, d.num("status"))
	require.Equal(t, false, d["ok"])
	require.Equal(t, "HTTP_STATUS", d.str("errorKind"))

	flaky.Cut()
	dis := cli.waitEvent("disconnected", 1, nil)
	require.NotEmpty(t, dis.str("error"))
	require.EqualValues(t, 1000, dis.num("retryInMs"))
	cli.waitEvent("reconnected", 1, nil)

	require.NoError(t, cli.cmd.Process.Signal(syscall.SIGINT))
	require.Equal(t, 0, cli.exit(40*time.Second))
	evs := cli.events()
	require.Equal(t, "stopped", evs[len(evs)-1].str("type"))
	require.Contains(t, cli.stderr(), "connecting to "+flaky.URL())
}

// Exit status: 1 for what the user must fix (command line, token, recipient), 2 when the listen is lost for
// good; with --format json a fatal error is also the last JSON line.
func TestListenExitCodes(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	f := newFixture(t, env, nil, nil)
	down := strings.TrimSuffix(closedURL(t), "/hook")

	code, _, stderr := runAdal(t, run{}, "listen", "--api", env.Server.URL, "--token", f.tenant.Member, "--recipient", f.recipient)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "--forward is required")

	code, _, stderr = runAdal(t, run{}, "listen", "--api", env.Server.URL, "--token", f.tenant.Member,
		"--recipient", f.recipient, "--recipient", f.recipient, "--forward", "http://127.0.0.1:9")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "given twice")

	code, stdout, stderr := runAdal(t, run{}, "listen", "--api", env.Server.URL, "--token", f.tenant.Member, "--journal-dir", t.TempDir(),
		"--recipient", "999999", "--forward", "http://127.0.0.1:9", "--format", "json")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "NOT_FOUND")
	var last event
	lines := strings.Split(stdout, "\n")
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &last))
	require.Equal(t, "error", last.str("type"))
	require.Equal(t, true, last["fatal"])
	require.EqualValues(t, 1, last.num("exitCode"))

	code, _, stderr = runAdal(t, run{}, "listen", "--api", down, "--token", f.tenant.Member, "--journal-dir", t.TempDir(),
		"--recipient", f.recipient, "--forward", "http://127.0.0.1:9", "--give-up-after", "1s")
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "gave up after 1s")
}

// The local service is checked while listening: its going down and coming back are told, from the checks
// and from deliveries that could not reach it.
func TestListenSaysWhenTheLocalServiceGoesDownAndComesBack(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t, unit(20*time.Millisecond))
	f := newFixture(t, env, nil, map[string]any{"maxAttempts": 1})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	serve := func(ln net.Listener) *httptest.Server {
		s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		s.Listener.Close()
		s.Listener = ln
		s.Start()
		t.Cleanup(s.Close)
		return s
	}
	local := serve(ln)

	cli := start(t, run{split: true}, "listen", "--api", env.Server.URL, "--token", f.tenant.Member, "--journal-dir", t.TempDir(),
		"--recipient", f.recipient, "--forward", "http://"+addr+"/hook", "--format", "json", "--check-local", "300ms")
	cli.waitEvent("ready", 1, nil)

	local.Close()
	downEv := cli.waitEvent("local_down", 1, nil)
	require.Equal(t, addr, downEv.str("address"))
	require.Contains(t, downEv.str("error"), "connection refused")
	require.Equal(t, []any{"http://" + addr + "/hook"}, downEv["urls"])

	relaytest.Eventually(t, 10*time.Second, "the port to be free again", func() bool {
		ln, err = net.Listen("tcp", addr)
		return err == nil
	})
	serve(ln)
	upEv := cli.waitEvent("local_up", 1, nil)
	require.Equal(t, addr, upEv.str("address"))
	cli.interrupt()
	require.Len(t, filterEvents(cli.events(), "local_down"), 1, "said once, not at every check")

	// With checks far apart, a delivery that cannot reach the service says it at once.
	closed := strings.TrimPrefix(strings.TrimSuffix(closedURL(t), "/hook"), "http://")
	cli = start(t, run{split: true}, "listen", "--api", env.Server.URL, "--token", f.tenant.Member, "--journal-dir", t.TempDir(),
		"--recipient", f.recipient, "--forward", "http://"+closed, "--check-local", "1h")
	cli.waitOutput("ready — waiting for deliveries")
	cli.waitOutput("local service " + closed + " is down")
	cli.interrupt()
}

func filterEvents(evs []event, kind string) []event {
	var out []event
	for _, e := range evs {
		if e.str("type") == kind {
			out = append(out, e)
		}
	}
	return out
}

// A connection that stops answering without closing (a network gone, a laptop that slept) is noticed by the
// unanswered ping within seconds, and replaced; deliveries then flow on the new connection.
func TestListenReplacesAConnectionThatStoppedAnswering(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t, unit(20*time.Millisecond))
	f := newFixture(t, env, nil, nil)
	local := newLocalService(t, answer(200))
	flaky := flakynet.New(t, env.Server.URL)
	cli := start(t, run{env: []string{"ADAL_KEEPALIVE=1s"}}, "listen", "--api", flaky.URL(), "--token", f.tenant.Member,
		"--journal-dir", t.TempDir(), "--recipient", f.recipient, "--forward", local.URL)
	cli.waitOutput("ready — waiting for deliveries")

	flaky.Freeze()
	cli.waitOutput("disconnected: no answer to a ping within 1s; retrying in 1s")
	cli.waitOutput("reconnected — waiting for deliveries")
	require.Equal(t, 2, flaky.Websockets())
	reqID := env.Send(f.server.Key, "/after", `{}`)
	relaytest.Eventually(t, 20*time.Second, "the delivery to go through the new connection", func() bool {
		return deliveryOf(t, env, reqID, f.recipient).Status == entdelivery.StatusSUCCEEDED
	})
	cli.interrupt()
}

// Human lines are coloured on a terminal, unless NO_COLOR is set.
func TestListenColoursOnlyOnATerminal(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t, unit(20*time.Millisecond))
	f := newFixture(t, env, nil, nil)
	local := newLocalService(t, answer(200))
	for _, noColor := range []bool{false, true} {
		t.Run(fmt.Sprintf("NO_COLOR=%v", noColor), func(t *testing.T) {
			var env2 []string
			if noColor {
				env2 = []string{"NO_COLOR=1"}
			}
			term := openTerminal(t)
			cmd := startOnTerminal(t, term, env2, "listen", "--api", env.Server.URL, "--token", f.tenant.Member,
				"--journal-dir", t.TempDir(), "--recipient", f.recipient, "--forward", local.URL)
			relaytest.Eventually(t, 20*time.Second, "ready on the terminal", func() bool {
				return strings.Contains(term.output(), "waiting for deliveries")
			})
			env.Send(f.server.Key, "/tty", `{}`)
			relaytest.Eventually(t, 20*time.Second, "the delivery line", func() bool {
				return strings.Contains(term.output(), "/tty")
			})
			out := term.output()
			if noColor {
				require.NotContains(t, out, "\x1b[")
			} else {
				require.Contains(t, out, "\x1b[32m200 OK\x1b[0m", "the status in green")
				require.Contains(t, out, "\x1b[32mready")
			}
			require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
			state, err := cmd.Process.Wait()
			require.NoError(t, err)
			require.Equal(t, 0, state.ExitCode())
		})
	}
}

// A local service that answers 503 with Retry-After is heeded as a deployed recipient would be: the CLI reports
// the wait, and the server puts the retry that far after the attempt (within the schedule's bounds) rather
// than where the schedule alone would.
func TestListenReportsTheLocalServicesRetryAfter(t *testing.T) {
	t.Parallel()
	// The first retry of the default schedule waits 4 units, 2 s: twice that bounds what Retry-After may ask.
	env := relaytest.Start(t, unit(500*time.Millisecond))
	f := newFixture(t, env, nil, nil)
	var calls []time.Time
	var mu sync.Mutex
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, time.Now())
		n := len(calls)
		mu.Unlock()
		if n == 1 {
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(local.Close)
	callCount := func() int { mu.Lock(); defer mu.Unlock(); return len(calls) }
	cli := listen(t, env, f.tenant.Member, f.recipient, local.URL+"/hook", t.TempDir())
	cli.waitConnected()

	id := env.Send(f.server.Key, "/evt", `{}`)
	relaytest.Eventually(t, 20*time.Second, "the refused attempt to be recorded", func() bool {
		return len(deliveryOf(t, env, id, f.recipient).Edges.Attempts) == 1
	})
	d := deliveryOf(t, env, id, f.recipient)
	first := d.Edges.Attempts[0]
	require.Equal(t, 503, *first.HTTPStatus)
	require.NotNil(t, d.NextAttemptAt)
	require.WithinDuration(t, first.FinishedAt.Add(3*time.Second), *d.NextAttemptAt, 10*time.Millisecond,
		"the retry is due when the local service asked, not 2 s after the attempt as scheduled")

	relaytest.Eventually(t, 20*time.Second, "the retry to succeed", func() bool {
		return deliveryOf(t, env, id, f.recipient).Status == entdelivery.StatusSUCCEEDED
	})
	require.Equal(t, 2, callCount())
	mu.Lock()
	gap := calls[1].Sub(calls[0])
	mu.Unlock()
	require.GreaterOrEqual(t, gap, 2900*time.Millisecond, "the retry came no sooner than asked")
	cli.interrupt()
}
