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

	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/relay/relaytest"
)

// balance reads the tenant's credit balance from the API.
func balance(t *testing.T, env *relaytest.Env, token string) int {
	t.Helper()
	var out struct {
		Viewer struct{ Tenant struct{ CreditBalance int } }
	}
	env.MustGraphQL(token, `{ viewer { tenant { creditBalance } } }`, nil, &out)
	return out.Viewer.Tenant.CreditBalance
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
