package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/ent/attempt"
	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/internal/brokertest"
	"github.com/adal-relay/adal/internal/flakynet"
	"github.com/adal-relay/adal/relay/relaytest"
)

// While no CLI is connected for a CLI recipient, no attempt starts and none is spent — however long.
func TestNoCLIConnectedDeliveriesWaitWithoutSpendingAttempts(t *testing.T) {
	t.Parallel()
	const u = 20 * time.Millisecond
	env := relaytest.Start(t, unit(u))
	f := newFixture(t, env, map[string]any{"deliverPendingOnConnect": true}, map[string]any{"maxAttempts": 2})
	// A direct recipient on the same server is the clock: once its whole STEPPED schedule has run out
	// (1+1+2+5 units and five attempts), the scheduler has long had every chance to touch the CLI delivery.
	witness := newLocalService(t, answer(500))
	direct := env.NewRecipient(f.tenant, f.server.ID, map[string]any{"method": "DIRECT_HTTP", "url": witness.URL,
		"maxAttempts": 5, "retrySchedule": "STEPPED"})

	reqID := env.Send(f.server.Key, "/evt", `{"n":1}`)
	relaytest.Eventually(t, 20*time.Second, "the direct delivery to use up its schedule", func() bool {
		return deliveryOf(t, env, reqID, direct).Status == entdelivery.StatusFAILED
	})
	d := deliveryOf(t, env, reqID, f.recipient)
	require.Equal(t, entdelivery.StatusPENDING, d.Status)
	require.Zero(t, d.AttemptCount)
	require.Empty(t, d.Edges.Attempts)
	require.True(t, d.Backlog, "created while no CLI was attached")
	require.False(t, cliConnected(t, env, f.tenant.Member, f.server.ID, f.recipient))

	// Once a CLI connects (the server delivers pending requests on connect), the first attempt is attempt 1.
	local := newLocalService(t, answer(200))
	cli := listen(t, env, f.tenant.Member, f.recipient, local.URL+"/hook", t.TempDir())
	cli.waitConnected()
	require.True(t, cliConnected(t, env, f.tenant.Member, f.server.ID, f.recipient))
	relaytest.Eventually(t, 20*time.Second, "the CLI delivery to succeed", func() bool {
		return deliveryOf(t, env, reqID, f.recipient).Status == entdelivery.StatusSUCCEEDED
	})
	d = deliveryOf(t, env, reqID, f.recipient)
	require.Equal(t, 1, d.AttemptCount)
	require.Len(t, d.Edges.Attempts, 1)
	require.Equal(t, attempt.StatusSUCCEEDED, d.Edges.Attempts[0].Status)
	require.Equal(t, 1, local.count())
	cli.waitOutput("POST /evt → 200 OK")

	cli.interrupt()
	// Cleared when the connection ends, well before the heartbeat (15 s) would lapse.
	relaytest.Eventually(t, 5*time.Second, "cliConnected to turn false after a clean exit", func() bool {
		return !cliConnected(t, env, f.tenant.Member, f.server.ID, f.recipient)
	})
}

// A retry whose due time passed while no CLI was connected starts right after the CLI connects — even with
// deliverPendingOnConnect off, since a retry is not backlog.
func TestDueRetryStartsRightAfterConnect(t *testing.T) {
	t.Parallel()
	const u = 250 * time.Millisecond // attempt 2 is due 4 units (1 s) after attempt 1 ends
	env := relaytest.Start(t, unit(u))
	f := newFixture(t, env, nil, map[string]any{"maxAttempts": 3})
	local := newLocalService(t, func(n int) int {
		if n == 1 {
			return 500
		}
		return 200
	})
	journal := t.TempDir()
	cli := listen(t, env, f.tenant.Member, f.recipient, local.URL+"/hook", journal)
	cli.waitConnected()
	reqID := env.Send(f.server.Key, "/evt", `{}`)
	relaytest.Eventually(t, 20*time.Second, "attempt 1 to fail", func() bool {
		return deliveryOf(t, env, reqID, f.recipient).AttemptCount == 1 && deliveryOf(t, env, reqID, f.recipient).Status == entdelivery.StatusPENDING
	})
	cli.interrupt()
	d := deliveryOf(t, env, reqID, f.recipient)
	require.NotNil(t, d.NextAttemptAt)
	due := *d.NextAttemptAt

	// Let the due time pass by a few units with no CLI: nothing happens.
	relaytest.Eventually(t, 20*time.Second, "the retry's due time to pass", func() bool {
		return time.Now().After(due.Add(4 * u))
	})
	d = deliveryOf(t, env, reqID, f.recipient)
	require.Equal(t, entdelivery.StatusPENDING, d.Status)
	require.Equal(t, 1, d.AttemptCount)
	require.Equal(t, 1, local.count())

	restart := time.Now()
	cli = listen(t, env, f.tenant.Member, f.recipient, local.URL+"/hook", journal)
	relaytest.Eventually(t, 20*time.Second, "the retry to succeed", func() bool {
		return deliveryOf(t, env, reqID, f.recipient).Status == entdelivery.StatusSUCCEEDED
	})
	d = deliveryOf(t, env, reqID, f.recipient)
	require.Len(t, d.Edges.Attempts, 2)
	second := d.Edges.Attempts[1]
	require.False(t, second.StartedAt.Before(due), "never early")
	require.False(t, second.StartedAt.Before(restart), "not before the CLI came back")
	require.Less(t, second.StartedAt.Sub(restart), 5*time.Second, "right after connect")
	require.Equal(t, 2, local.count())
	require.Equal(t, "2", local.callsCopy()[1].header.Get("X-Adal-Attempt"))
	cli.waitOutput("attempt 2")
}

// Backlog — deliveries with no attempt, created while disconnected — goes out on connect only when the
// server's deliverPendingOnConnect is on; otherwise it stays PENDING (and can be cancelled) while new
// requests flow.
func TestBacklogOnConnectFollowsServerSetting(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t, unit(20*time.Millisecond))
	tn := env.NewTenant("acme", relaytest.PlanLimits{Credits: 1000})
	on := env.NewServer(tn, "pending-on", map[string]any{"deliverPendingOnConnect": true})
	off := env.NewServer(tn, "pending-off", map[string]any{"deliverPendingOnConnect": false})
	recOn := env.NewRecipient(tn, on.ID, map[string]any{"method": "CLI"})
	recOff := env.NewRecipient(tn, off.ID, map[string]any{"method": "CLI"})

	backlogOn := []string{env.Send(on.Key, "/a", `1`), env.Send(on.Key, "/b", `2`)}
	backlogOff := []string{env.Send(off.Key, "/a", `1`), env.Send(off.Key, "/b", `2`)}

	localOn := newLocalService(t, answer(204))
	cliOn := listen(t, env, tn.Member, recOn, localOn.URL, t.TempDir())
	cliOn.waitConnected()
	for _, id := range backlogOn {
		relaytest.Eventually(t, 20*time.Second, "backlog to be delivered", func() bool {
			return deliveryOf(t, env, id, recOn).Status == entdelivery.StatusSUCCEEDED
		})
	}
	require.Equal(t, 2, localOn.count())

	localOff := newLocalService(t, answer(200))
	cliOff := listen(t, env, tn.Member, recOff, localOff.URL, t.TempDir())
	cliOff.waitOutput("2 pending delivery(ies) received while disconnected are kept back")
	fresh := env.Send(off.Key, "/c", `3`)
	relaytest.Eventually(t, 20*time.Second, "a new request to be delivered", func() bool {
		return deliveryOf(t, env, fresh, recOff).Status == entdelivery.StatusSUCCEEDED
	})
	// The backlog is older, so it was due first: had it been claimable, it would have gone before.
	for _, id := range backlogOff {
		d := deliveryOf(t, env, id, recOff)
		require.Equal(t, entdelivery.StatusPENDING, d.Status)
		require.Zero(t, d.AttemptCount)
	}
	require.Equal(t, 1, localOff.count())
	require.True(t, strings.HasPrefix(localOff.callsCopy()[0].uri, "/c"))

	// The backlog can be cancelled while the CLI stays attached.
	for _, id := range backlogOff {
		d := deliveryOf(t, env, id, recOff)
		var out struct{ CancelDelivery struct{ Status string } }
		env.MustGraphQL(tn.Member, `mutation($id: ID!){ cancelDelivery(id: $id){ status } }`,
			map[string]any{"id": strconv.Itoa(d.ID)}, &out)
		require.Equal(t, "CANCELED", out.CancelDelivery.Status)
	}
	cliOff.interrupt()
	cliOn.interrupt()
	require.Equal(t, 1, localOff.count())
}

// CLI connected, local service down: a spent, failed attempt with error kind CLI_LOCAL, retried per schedule.
func TestLocalServiceDownFailsAttemptsWithCLILocal(t *testing.T) {
	t.Parallel()
	const u = 50 * time.Millisecond
	env := relaytest.Start(t, unit(u))
	f := newFixture(t, env, nil, map[string]any{"maxAttempts": 3, "retrySchedule": "STEPPED"})
	cli := listen(t, env, f.tenant.Member, f.recipient, closedURL(t), t.TempDir())
	cli.waitConnected()

	reqID := env.Send(f.server.Key, "/evt", `{}`)
	relaytest.Eventually(t, 20*time.Second, "the delivery to fail", func() bool {
		return deliveryOf(t, env, reqID, f.recipient).Status == entdelivery.StatusFAILED
	})
	d := deliveryOf(t, env, reqID, f.recipient)
	require.Equal(t, 3, d.AttemptCount)
	require.Len(t, d.Edges.Attempts, 3)
	for i, a := range d.Edges.Attempts {
		require.Equal(t, attempt.StatusFAILED, a.Status)
		require.Equal(t, attempt.ErrorKindCLI_LOCAL, *a.ErrorKind)
		require.Contains(t, a.ErrorMessage, "local service unreachable")
		require.Nil(t, a.HTTPStatus)
		if i > 0 {
			// STEPPED: 1 unit after each of the first two failures, counted from the end of the previous one.
			require.GreaterOrEqual(t, a.StartedAt.Sub(d.Edges.Attempts[i-1].FinishedAt), u, "attempt %d early", a.Number)
		}
	}
	cli.waitOutput("attempt 3")
	require.Contains(t, cli.output(), "→ local service unreachable")
	cli.interrupt()
}

// CLI killed while the local service is processing: after a restart on the same journal the CLI reports the
// attempt from its journal instead of running it again — the local service sees the job once.
func TestKilledCLIReportsFromJournalInsteadOfRerunning(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t, unit(20*time.Millisecond))
	f := newFixture(t, env, nil, map[string]any{"maxAttempts": 1})
	local := newLocalService(t, answer(200))
	local.hold()
	journal := t.TempDir()

	cli := listen(t, env, f.tenant.Member, f.recipient, local.URL+"/hook", journal)
	cli.waitConnected()
	reqID := env.Send(f.server.Key, "/evt", `{"charge":1}`)
	relaytest.Eventually(t, 20*time.Second, "the local service to get the job", func() bool { return local.count() == 1 })
	cli.kill()

	entries, err := filepath.Glob(filepath.Join(journal, "*", "delivery-*.json"))
	require.NoError(t, err)
	require.Len(t, entries, 1, "the job is journaled")
	raw, err := os.ReadFile(entries[0])
	require.NoError(t, err)
	require.NotContains(t, string(raw), `"result"`, "killed before the local call finished")
	require.Equal(t, entdelivery.StatusIN_PROGRESS, deliveryOf(t, env, reqID, f.recipient).Status)

	cli = listen(t, env, f.tenant.Member, f.recipient, local.URL+"/hook", journal)
	cli.waitOutput("from the journal")
	relaytest.Eventually(t, 20*time.Second, "the journaled attempt to be recorded", func() bool {
		return deliveryOf(t, env, reqID, f.recipient).Status == entdelivery.StatusFAILED
	})
	d := deliveryOf(t, env, reqID, f.recipient)
	require.Len(t, d.Edges.Attempts, 1)
	a := d.Edges.Attempts[0]
	require.Equal(t, attempt.ErrorKindCLI_LOCAL, *a.ErrorKind)
	require.Equal(t, "interrupted: the CLI stopped while the local service was processing; not re-run", a.ErrorMessage)
	require.Equal(t, 1, local.count(), "never re-run")
	relaytest.Eventually(t, 10*time.Second, "the journal entry to be removed", func() bool {
		entries, _ := filepath.Glob(filepath.Join(journal, "*", "delivery-*.json"))
		return len(entries) == 0
	})
	cli.interrupt()
}

// Two server processes on one Postgres: a request accepted by A is delivered through a CLI attached to B,
// and A sees cliConnected while the CLI is attached to B and stops seeing it soon after the CLI dies.
func TestTwoProcessesDeliverThroughCLIOnEither(t *testing.T) {
	t.Parallel()
	a := relaytest.Start(t, unit(20*time.Millisecond))
	b := a.Peer(t, unit(20*time.Millisecond))
	f := newFixture(t, a, nil, nil)
	local := newLocalService(t, answer(200))

	require.False(t, cliConnected(t, a, f.tenant.Member, f.server.ID, f.recipient))
	cli := listen(t, b, f.tenant.Member, f.recipient, local.URL+"/hook", t.TempDir())
	cli.waitConnected()
	require.True(t, cliConnected(t, a, f.tenant.Member, f.server.ID, f.recipient), "seen by the other process")

	reqID := a.Send(f.server.Key, "/from-a", `{}`)
	relaytest.Eventually(t, 20*time.Second, "the request accepted by A to be delivered through B", func() bool {
		return deliveryOf(t, a, reqID, f.recipient).Status == entdelivery.StatusSUCCEEDED
	})
	require.Equal(t, 1, local.count())
	require.True(t, strings.HasPrefix(local.callsCopy()[0].uri, "/hook/from-a"))

	cli.kill()
	relaytest.Eventually(t, 5*time.Second, "cliConnected to turn false on A", func() bool {
		return !cliConnected(t, a, f.tenant.Member, f.server.ID, f.recipient)
	})
}

// The local call carries the original method, headers (minus hop-by-hop and Host), body, path suffix and
// query, plus X-Adal-Request-Id, X-Adal-Attempt and X-Adal-Idempotency; login saves the server and token
// so that listen needs neither.
func TestLoginThenListenForwardsTheRequest(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t, unit(20*time.Millisecond))
	f := newFixture(t, env, nil, map[string]any{"sendIdempotencyKey": true})
	home := t.TempDir()

	login := startAdal(t, home, "login", "--api", env.Server.URL, "--token", f.tenant.Member)
	require.Equal(t, 0, login.exit(20*time.Second), login.output())
	require.Contains(t, login.output(), "Logged in to "+env.Server.URL)
	cfg := filepath.Join(home, ".config", "adal", "config.json")
	st, err := os.Stat(cfg)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	local := newLocalService(t, answer(201))
	cli := startAdal(t, home, "listen", "--recipient", f.recipient, "--forward", local.URL+"/base?token=x")
	cli.waitConnected()

	req, _ := newWebhook(env.Server.URL+"/in/"+f.server.Key+"/stripe/evt?a=1&b=2", `{"id":"evt_1"}`)
	req.Header.Set("X-Custom", "yes")
	req.Header.Set("Connection", "keep-alive, X-Hop")
	req.Header.Set("X-Hop", "drop me")
	req.Header.Set("X-Adal-Attempt", "99") // spoofed: dropped
	resp, err := env.Server.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 202, resp.StatusCode)

	relaytest.Eventually(t, 20*time.Second, "the local service to get the request", func() bool { return local.count() == 1 })
	c := local.callsCopy()[0]
	require.Equal(t, "PUT", c.method)
	require.Equal(t, "/base/stripe/evt?token=x&a=1&b=2", c.uri)
	require.Equal(t, `{"id":"evt_1"}`, c.body)
	require.Equal(t, "yes", c.header.Get("X-Custom"))
	require.Empty(t, c.header.Get("X-Hop"))
	require.Equal(t, "1", c.header.Get("X-Adal-Attempt"))
	require.NotEmpty(t, c.header.Get("X-Adal-Request-Id"))
	require.NotEmpty(t, c.header.Get("X-Adal-Idempotency"))
	cli.waitOutput("PUT /stripe/evt?a=1&b=2 → 201 Created")
	cli.waitOutput("attempt 1")
	cli.interrupt()
}

// A CLI only attaches to a live CLI recipient of its own tenant, with a valid token.
func TestListenRefusesWhatItMayNotAttachTo(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	f := newFixture(t, env, nil, nil)
	other := env.NewTenant("other", relaytest.PlanLimits{Credits: 10})
	direct := env.NewRecipient(f.tenant, f.server.ID, map[string]any{"method": "DIRECT_HTTP", "url": "http://127.0.0.1:9/x"})

	cases := []struct {
		name, token, recipient, want string
	}{
		{"another tenant's recipient", other.Member, f.recipient, "NOT_FOUND"},
		{"a direct recipient", f.tenant.Member, direct, "INVALID_INPUT"},
		{"an unknown recipient", f.tenant.Member, "999999", "NOT_FOUND"},
		{"a forged token", "eyJhbGciOiJIUzI1NiJ9.e30.c2lnbmF0dXJl", f.recipient, "refused the token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cli := listen(t, env, tc.token, tc.recipient, "http://127.0.0.1:9/hook", t.TempDir())
			require.Equal(t, 1, cli.exit(20*time.Second), cli.output())
			require.Contains(t, cli.output(), tc.want)
		})
	}
	require.False(t, cliConnected(t, env, f.tenant.Member, f.server.ID, f.recipient))
}

func TestHelpDocumentsEveryCommandAndFlag(t *testing.T) {
	t.Parallel()
	p := startAdal(t, "", "--help")
	require.Equal(t, 0, p.exit(10*time.Second))
	out := p.output()
	for _, s := range []string{"adal login", "adal listen", "adal requests", "adal retry", "adal replay", "adal trigger",
		"-api", "-server", "-token", "-recipient", "-forward", "-journal-dir", "-format", "-check-local", "-give-up-after",
		"-status", "-event-type", "-limit", "-data", "-header", "-method", "-path",
		"ADAL_API", "ADAL_TOKEN", "ADAL_KEEPALIVE", "NO_COLOR", "config.json", "Exit status"} {
		require.Contains(t, out, s)
	}
	// A wrong command line is a configuration error.
	p = startAdal(t, "", "bogus")
	require.Equal(t, 1, p.exit(10*time.Second))
}

// A dropped connection is retried with backoff; a job whose local call was in flight when it dropped is
// finished, journaled and reported after the reconnect — not run again.
func TestReconnectsAndReportsTheJobInFlightAcrossADrop(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t, unit(20*time.Millisecond))
	f := newFixture(t, env, nil, nil)
	local := newLocalService(t, answer(200))
	local.hold()
	flaky := flakynet.New(t, env.Server.URL)

	cli := startAdal(t, "", "listen", "--api", flaky.URL(), "--token", f.tenant.Member,
		"--recipient", f.recipient, "--forward", local.URL, "--journal-dir", t.TempDir())
	cli.waitConnected()
	reqID := env.Send(f.server.Key, "/evt", `{}`)
	relaytest.Eventually(t, 20*time.Second, "the local call to start", func() bool { return local.count() == 1 })

	flaky.Cut()
	cli.waitOutput("disconnected: ")
	cli.waitOutput("retrying in 1s")
	local.release()
	relaytest.Eventually(t, 20*time.Second, "the attempt to be recorded", func() bool {
		return deliveryOf(t, env, reqID, f.recipient).Status == entdelivery.StatusSUCCEEDED
	})
	require.Equal(t, 1, local.count())
	relaytest.Eventually(t, 20*time.Second, "the CLI to reconnect", func() bool {
		return strings.Count(cli.output(), "  connected: ") == 2
	})
	require.Equal(t, 1, deliveryOf(t, env, reqID, f.recipient).AttemptCount)
	cli.interrupt()
}

// Deleting the recipient while a CLI listens ends the listen — lost for good, exit status 2 — rather than
// leaving it waiting.
func TestDeletingTheRecipientStopsListen(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	f := newFixture(t, env, nil, nil)
	cli := listen(t, env, f.tenant.Member, f.recipient, "http://127.0.0.1:9/hook", t.TempDir())
	cli.waitConnected()
	env.MustGraphQL(f.tenant.Owner, `mutation($id: ID!){ deleteRecipient(id: $id){ id } }`, map[string]any{"id": f.recipient}, nil)
	require.Equal(t, 2, cli.exit(30*time.Second), cli.output())
	require.Contains(t, cli.output(), "NOT_FOUND")
	require.Contains(t, cli.output(), "every recipient is gone")
}

// The CLI path carries the request's verification outcome as X-Adal-Verified, as a direct delivery does: a
// request a verifying server accepted in shadow mode arrives at localhost marked false, a signed one true.
func TestListenForwardsTheVerificationOutcome(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t, unit(20*time.Millisecond))
	f := newFixture(t, env, map[string]any{"verification": map[string]any{
		"kind": "API_KEY", "header": "X-Api-Key", "secrets": []string{"sender-key"}, "enforce": false,
	}}, nil)
	local := newLocalService(t, answer(200))
	cli := listen(t, env, f.tenant.Member, f.recipient, local.URL+"/hook", t.TempDir())
	cli.waitConnected()

	for _, key := range []string{"sender-key", "forged-key"} {
		req, _ := newWebhook(env.Server.URL+"/in/"+f.server.Key, `{"id":"evt_1"}`)
		req.Header.Set("X-Api-Key", key)
		resp, err := env.Server.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, 202, resp.StatusCode, "shadow mode accepts both")
		n := local.count() + 1
		relaytest.Eventually(t, 20*time.Second, "the local service to get the request", func() bool { return local.count() == n })
	}
	calls := local.callsCopy()
	require.Equal(t, "true", calls[0].header.Get("X-Adal-Verified"))
	require.Equal(t, "false", calls[1].header.Get("X-Adal-Verified"))
	cli.interrupt()
}

// From the terminal: trigger a test webhook, list requests (text and JSON, filtered by status), retry a
// failed delivery and replay a request, each showing what it cost and the balance after.
func TestTriggerListRetryReplayFromTheTerminal(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t, unit(20*time.Millisecond))
	tn := env.NewTenant("acme", relaytest.PlanLimits{Credits: 100})
	shop := env.NewServer(tn, "shop", nil)
	status := 500
	api := newLocalService(t, func(int) int { return status })
	recipient := env.NewRecipient(tn, shop.ID, map[string]any{"method": "DIRECT_HTTP", "url": api.URL, "name": "api", "maxAttempts": 1})
	as := run{env: []string{"ADAL_API=" + env.Server.URL, "ADAL_TOKEN=" + tn.Member}}

	// trigger: a file body, a header, a method and a path with a query.
	body := filepath.Join(t.TempDir(), "order.json")
	require.NoError(t, os.WriteFile(body, []byte(`{"order":42}`), 0o600))
	code, stdout, stderr := runAdal(t, as, "trigger", "--server", "shop", "--data", "@"+body, "--header", "X-Test: yes",
		"--method", "put", "--path", "/orders?live=1")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `Sent PUT /orders?live=1 to server "shop": request `)
	reqID := strings.TrimSpace(stdout[strings.Index(stdout, "request ")+len("request ") : strings.Index(stdout, " (202")])
	var stored struct {
		Request struct {
			Method, Path, Query, Body string
			Headers                   []struct{ Name, Value string }
		}
	}
	env.MustGraphQL(tn.Member, `query($id: ID!){ request(id: $id){ method path query body headers { name value } } }`, map[string]any{"id": reqID}, &stored)
	require.Equal(t, "PUT", stored.Request.Method)
	require.Equal(t, "/orders", stored.Request.Path)
	require.Equal(t, "live=1", stored.Request.Query)
	require.JSONEq(t, `{"order":42}`, stored.Request.Body)
	headers := map[string]string{}
	for _, h := range stored.Request.Headers {
		headers[h.Name] = h.Value
	}
	require.Equal(t, "yes", headers["X-Test"])
	require.Equal(t, "application/json", headers["Content-Type"])
	relaytest.Eventually(t, 20*time.Second, "the delivery to fail", func() bool {
		return deliveryOf(t, env, reqID, recipient).Status == entdelivery.StatusFAILED
	})
	failed := deliveryOf(t, env, reqID, recipient)
	deliveryID := strconv.Itoa(failed.ID)

	// requests, for programs: one JSON object per request.
	code, stdout, stderr = runAdal(t, as, "requests", "--server", shop.ID, "--status", "failed", "--format", "json")
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(stdout, "\n")
	require.Len(t, lines, 1)
	var listed struct {
		Type, ID, Method, Path, Query, Status string
		Deliveries                            []struct {
			ID, RecipientID, Recipient, Status string
			AttemptCount                       int
			LastAttempt                        struct{ HTTPStatus int }
		}
	}
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &listed))
	require.Equal(t, "request", listed.Type)
	require.Equal(t, reqID, listed.ID)
	require.Equal(t, "FAILED", listed.Status)
	require.Len(t, listed.Deliveries, 1, stdout)
	require.Equal(t, deliveryID, listed.Deliveries[0].ID)
	require.Equal(t, "api", listed.Deliveries[0].Recipient)
	require.Equal(t, 500, listed.Deliveries[0].LastAttempt.HTTPStatus)

	// requests, for people: a table, each request with its deliveries.
	code, stdout, _ = runAdal(t, as, "requests", "--server", "shop")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "REQUEST")
	require.Contains(t, stdout, reqID)
	require.Contains(t, stdout, "/orders?live=1")
	require.Contains(t, stdout, "delivery "+deliveryID+` → "api": FAILED, 1/1 attempts, last: 500 Internal Server Error`)
	code, stdout, _ = runAdal(t, as, "requests", "--server", "shop", "--status", "DELIVERED")
	require.Equal(t, 0, code)
	require.Equal(t, `No DELIVERED requests on server "shop".`, stdout)

	// retry: a new delivery, 1 credit, and the balance right after.
	status = 200
	before := balance(t, env, tn.Member)
	code, stdout, stderr = runAdal(t, as, "retry", deliveryID)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "Retried delivery "+deliveryID+" of request "+reqID)
	require.Contains(t, stdout, "Cost: 1 credit. Balance: "+strconv.Itoa(before-1)+" credits.")
	require.Equal(t, before-1, balance(t, env, tn.Member))
	relaytest.Eventually(t, 20*time.Second, "the retry to succeed", func() bool {
		ds := env.Deliveries(entdelivery.TriggerEQ(entdelivery.TriggerMANUAL_RETRY))
		return len(ds) == 1 && ds[0].Status == entdelivery.StatusSUCCEEDED
	})
	// The retried delivery gave way: retrying it again is refused, and charges nothing.
	code, _, stderr = runAdal(t, as, "retry", deliveryID)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "CONFLICT")
	require.Equal(t, before-1, balance(t, env, tn.Member))

	// replay, for programs.
	code, stdout, stderr = runAdal(t, as, "replay", reqID, "--format", "json")
	require.Equal(t, 0, code, stderr)
	var replayed struct {
		Type, RequestID, NewRequestID string
		Cost                          int
		Balance                       int
		Deliveries                    []struct{ DeliveryID, Recipient string }
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &replayed))
	require.Equal(t, "replay", replayed.Type)
	require.Equal(t, reqID, replayed.RequestID)
	require.Equal(t, 1, replayed.Cost)
	require.Equal(t, before-2, replayed.Balance)
	require.Len(t, replayed.Deliveries, 1)
	require.Equal(t, "api", replayed.Deliveries[0].Recipient)
	var orig struct {
		Request struct{ ReplayOf struct{ ID string } }
	}
	env.MustGraphQL(tn.Member, `query($id: ID!){ request(id: $id){ replayOf { id } } }`, map[string]any{"id": replayed.NewRequestID}, &orig)
	require.Equal(t, reqID, orig.Request.ReplayOf.ID)
}

// A broker recipient's delivery from the terminal, against the brokers running beside the tests: where it
// publishes, and what the broker answered — a Redis stream's entry ID — or why it refused the message — a
// RabbitMQ routing key no queue takes.
func TestRequestsShowWhatBrokersAnswered(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t, unit(20*time.Millisecond))
	tn := env.NewTenant("acme", relaytest.PlanLimits{Credits: 100})
	shop := env.NewServer(tn, "shop", nil)
	stream := brokertest.Redis(t)
	streamName := stream.Settings["stream"].(string)
	toStream := env.NewRecipient(tn, shop.ID, map[string]any{"name": "orders-stream", "method": "REDIS_STREAM",
		"url": brokertest.RedisURL, "destination": stream.Settings, "maxAttempts": 3})
	const noQueue = "adal-test-no-such-queue"
	toNowhere := env.NewRecipient(tn, shop.ID, map[string]any{"name": "nowhere", "method": "RABBITMQ",
		"url": brokertest.RabbitMQURL, "destination": map[string]any{"routingKey": noQueue}, "maxAttempts": 1})
	reqID := env.Send(shop.Key, "/orders", `{"order":42}`)
	stream.Next(15 * time.Second)
	relaytest.Eventually(t, 20*time.Second, "both deliveries to end", func() bool {
		return deliveryOf(t, env, reqID, toStream).Status == entdelivery.StatusSUCCEEDED &&
			deliveryOf(t, env, reqID, toNowhere).Status == entdelivery.StatusFAILED
	})
	as := run{env: []string{"ADAL_API=" + env.Server.URL, "ADAL_TOKEN=" + tn.Member}}

	// For people: the method and settings beside the recipient's name, the answer or the refusal last.
	code, stdout, stderr := runAdal(t, as, "requests", "--server", "shop")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `→ "orders-stream" (REDIS_STREAM stream "`+streamName+`"): SUCCEEDED, 1/3 attempts, last: entry `)
	require.Contains(t, stdout, `→ "nowhere" (RABBITMQ routing key "`+noQueue+`"): FAILED, 1/1 attempts, last: no queue is named "`+noQueue+`"`)
	require.NotContains(t, stdout, "guest:guest")

	// For programs: the same, as fields.
	code, stdout, stderr = runAdal(t, as, "requests", "--server", "shop", "--format", "json")
	require.Equal(t, 0, code, stderr)
	var listed struct {
		Deliveries []struct {
			Recipient, RecipientMethod string
			Destination                *struct{ Stream, RoutingKey string }
			LastAttempt                struct {
				Answer, ErrorMessage string
				ErrorKind            *string
			}
		}
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &listed))
	require.Len(t, listed.Deliveries, 2, stdout)
	for _, d := range listed.Deliveries {
		require.NotNil(t, d.Destination, d.Recipient)
		switch d.Recipient {
		case "orders-stream":
			require.Equal(t, "REDIS_STREAM", d.RecipientMethod)
			require.Equal(t, streamName, d.Destination.Stream)
			a := d.LastAttempt.Answer
			require.True(t, strings.HasPrefix(a, "entry ") && strings.HasSuffix(a, ` of stream "`+streamName+`"`), a)
			require.Nil(t, d.LastAttempt.ErrorKind)
		case "nowhere":
			require.Equal(t, "RABBITMQ", d.RecipientMethod)
			require.Equal(t, noQueue, d.Destination.RoutingKey)
			require.Empty(t, d.LastAttempt.Answer)
			require.NotNil(t, d.LastAttempt.ErrorKind)
			require.Equal(t, "BROKER_REFUSED", *d.LastAttempt.ErrorKind)
		default:
			t.Fatalf("a delivery to %q", d.Recipient)
		}
	}
}

// A server that reads each request's event type and checks bodies in shadow mode, and a recipient with a
// transformation: requests lists each request's type, why a body does not follow its schema, and the
// transformation version each delivery's last attempt ran; --event-type lists one type.
func TestRequestsShowEventTypesAndTransformations(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t, unit(20*time.Millisecond))
	tn := env.NewTenant("acme", relaytest.PlanLimits{Credits: 100})
	shop := env.NewServer(tn, "shop", nil)
	api := newLocalService(t, answer(200))
	env.MustGraphQL(tn.Owner, `mutation { createEventType(input: {name: "order.paid", schema: "{\"required\": [\"amount\"]}"}) { id } }`, nil, nil)
	env.MustGraphQL(tn.Owner, `mutation($id: ID!){ updateServer(id: $id, input: {eventTypePath: "type", schemaValidation: SHADOW}) { id } }`,
		map[string]any{"id": shop.ID}, nil)
	recipient := env.NewRecipient(tn, shop.ID, map[string]any{"method": "DIRECT_HTTP", "url": api.URL, "name": "api", "maxAttempts": 3})
	env.MustGraphQL(tn.Owner, `mutation($id: ID!, $s: String!){ setRecipientTransform(recipientId: $id, source: $s) { id } }`,
		map[string]any{"id": recipient, "s": "function transform(r) { r.headers[\"x-shaped\"] = \"1\"; return r; }"}, nil)

	// The server's settings reach intake within its cache's refresh: send until a request is typed and checked.
	var typed struct {
		Request struct{ EventType, SchemaError string }
	}
	var marked string
	relaytest.Eventually(t, 15*time.Second, "requests to be typed and checked", func() bool {
		marked = env.Send(shop.Key, "/orders", `{"type":"order.paid"}`)
		env.MustGraphQL(tn.Member, `query($id: ID!){ request(id: $id){ eventType schemaError } }`, map[string]any{"id": marked}, &typed)
		return typed.Request.SchemaError != ""
	})
	valid := env.Send(shop.Key, "/orders", `{"type":"order.paid","amount":12}`)
	other := env.Send(shop.Key, "/invoices", `{"type":"invoice.sent"}`)
	relaytest.Eventually(t, 20*time.Second, "the deliveries to succeed", func() bool {
		for _, id := range []string{marked, valid, other} {
			if deliveryOf(t, env, id, recipient).Status != entdelivery.StatusSUCCEEDED {
				return false
			}
		}
		return true
	})
	as := run{env: []string{"ADAL_API=" + env.Server.URL, "ADAL_TOKEN=" + tn.Member}}

	// For people: a TYPE column, the schema's complaint under the request, the version after the attempt.
	code, stdout, stderr := runAdal(t, as, "requests", "--server", "shop", "--event-type", "order.paid")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "TYPE")
	require.Contains(t, stdout, valid)
	require.Contains(t, stdout, marked)
	require.NotContains(t, stdout, other)
	require.NotContains(t, stdout, "invoice.sent")
	require.Contains(t, stdout, "does not follow the schema of order.paid: "+typed.Request.SchemaError)
	require.Contains(t, stdout, `→ "api": SUCCEEDED, 1/3 attempts, last: 200 OK (transformation v1)`)
	code, stdout, _ = runAdal(t, as, "requests", "--server", "shop")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "invoice.sent")
	code, stdout, _ = runAdal(t, as, "requests", "--server", "shop", "--event-type", "refund.issued", "--status", "delivered")
	require.Equal(t, 0, code)
	require.Equal(t, `No DELIVERED requests of type "refund.issued" on server "shop".`, stdout)

	// For programs: the same, as fields.
	code, stdout, stderr = runAdal(t, as, "requests", "--server", "shop", "--event-type", "invoice.sent", "--format", "json")
	require.Equal(t, 0, code, stderr)
	var listed struct {
		ID, EventType, SchemaError string
		Deliveries                 []struct {
			LastAttempt struct{ TransformVersion *int }
		}
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &listed), stdout)
	require.Equal(t, other, listed.ID)
	require.Equal(t, "invoice.sent", listed.EventType)
	require.Empty(t, listed.SchemaError, "a type without a schema is never checked")
	require.Len(t, listed.Deliveries, 1)
	require.NotNil(t, listed.Deliveries[0].LastAttempt.TransformVersion)
	require.Equal(t, 1, *listed.Deliveries[0].LastAttempt.TransformVersion)
}

// The terminal commands' exit status: 1 for what the user must fix, 2 when the server cannot be reached.
func TestTerminalCommandsExitCodes(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	tn := env.NewTenant("acme", relaytest.PlanLimits{Credits: 10})
	env.NewServer(tn, "shop", nil)
	down := strings.TrimSuffix(closedURL(t), "/hook")
	as := func(api, token string) run { return run{env: []string{"ADAL_API=" + api, "ADAL_TOKEN=" + token}} }
	ok := as(env.Server.URL, tn.Member)

	cases := []struct {
		name string
		r    run
		args []string
		code int
		want string
	}{
		{"no server", ok, []string{"requests"}, 1, "--server is required"},
		{"a wrong status", ok, []string{"requests", "--server", "shop", "--status", "LOST"}, 1, "--status must be one of"},
		{"an unknown server", ok, []string{"requests", "--server", "nope"}, 1, `no server "nope" (NOT_FOUND)`},
		{"a refused token", as(env.Server.URL, "eyJhbGciOiJIUzI1NiJ9.e30.c2lnbmF0dXJl"), []string{"requests", "--server", "shop"}, 1, "refused the token"},
		{"no ID", ok, []string{"retry"}, 1, "missing argument"},
		{"not an ID", ok, []string{"replay", "abc"}, 1, `"abc" is not an ID`},
		{"an unknown delivery", ok, []string{"retry", "999999"}, 1, "NOT_FOUND"},
		{"a bad header", ok, []string{"trigger", "--server", "shop", "--data", "{}", "--header", "nocolon"}, 1, "must be NAME:VALUE"},
		{"a missing file", ok, []string{"trigger", "--server", "shop", "--data", "@/does/not/exist"}, 1, "no such file"},
		{"an unreachable server", as(down, tn.Member), []string{"requests", "--server", "shop"}, 2, "cannot reach the server"},
		{"an unreachable server, retry", as(down, tn.Member), []string{"retry", "1"}, 2, "cannot reach the server"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runAdal(t, tc.r, tc.args...)
			require.Equal(t, tc.code, code, stderr)
			require.Contains(t, stderr, tc.want)
		})
	}

	// Without credits, trigger says what the inbound URL answered.
	poor := env.NewTenant("poor", relaytest.PlanLimits{Credits: 0})
	env.NewServer(poor, "broke", nil)
	code, _, stderr := runAdal(t, as(env.Server.URL, poor.Member), "trigger", "--server", "broke", "--data", "{}")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "402 Payment Required")
}

// Earlier spellings keep working: --server URL for the API and a config saved under "server".
func TestFormerAPISpellingsStillWork(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	tn := env.NewTenant("acme", relaytest.PlanLimits{Credits: 10})
	env.NewServer(tn, "shop", nil)
	home := t.TempDir()
	code, stdout, stderr := runAdal(t, run{home: home}, "login", "--server", env.Server.URL, "--token", tn.Member)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "Logged in to "+env.Server.URL)

	old := filepath.Join(t.TempDir(), "old")
	cfg := filepath.Join(old, ".config", "adal")
	require.NoError(t, os.MkdirAll(cfg, 0o700))
	raw, _ := json.Marshal(map[string]string{"server": env.Server.URL, "token": tn.Member})
	require.NoError(t, os.WriteFile(filepath.Join(cfg, "config.json"), raw, 0o600))
	code, stdout, stderr = runAdal(t, run{home: old}, "requests", "--server", "shop")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `No requests on server "shop".`)
}
