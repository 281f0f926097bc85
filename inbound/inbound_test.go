package inbound_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/ent/ledgerentry"
	"github.com/adal-relay/adal/ent/request"
	"github.com/adal-relay/adal/inbound"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/viewer"
)

// startUnreachable starts a process with a tenant "acme" of credits and its server "stripe", whose one
// recipient's URL refuses connections: what is accepted stays to be retried.
func startUnreachable(t *testing.T, credits int) (*relaytest.Env, relaytest.Server) {
	t.Helper()
	env := relaytest.Start(t)
	tn := env.NewTenant("acme", relaytest.PlanLimits{Credits: credits})
	srv := env.NewServer(tn, "stripe", nil)
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": "http://127.0.0.1:1/hook"})
	return env, srv
}

func TestAcceptStoresRequestAndDebits(t *testing.T) {
	t.Parallel()
	env, srv := startUnreachable(t, 5)

	resp := env.Post(srv.Key, "/events/x?y=1", []byte(`{"id":"evt_1"}`))
	defer resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	var body struct{ RequestID string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	require.NotEmpty(t, body.RequestID)

	ctx := viewer.SystemContext(t.Context())
	reqs, err := env.DB.Client.Request.Query().WithDeliveries().All(ctx)
	require.NoError(t, err)
	require.Len(t, reqs, 1)
	require.Equal(t, "/events/x", reqs[0].Path)
	require.Equal(t, request.StatusPENDING, reqs[0].Status)
	require.Len(t, reqs[0].Edges.Deliveries, 1)
	_, _ = io.Copy(io.Discard, resp.Body)
}

// A request the database cannot store as sent — raw non-UTF-8 bytes in its query, which HTTP servers pass
// through but PostgreSQL text columns refuse — is stored with those bytes percent-encoded, and never costs the
// requests that share its batch their acceptance.
func TestRawBytesInQueryDoNotFailTheBatch(t *testing.T) {
	t.Parallel()
	env, srv := startUnreachable(t, 1000)
	addr := strings.TrimPrefix(env.Server.URL, "http://")

	var wg sync.WaitGroup
	statuses := make([]int, 40)
	for i := range statuses {
		wg.Go(func() {
			query := "n=" + strconv.Itoa(i)
			if i%10 == 0 {
				query += "&name=Caf\xe9&ok=\xc3\xa9" // Latin-1 é (invalid UTF-8), then a valid UTF-8 é
			}
			statuses[i] = rawPost(t, addr, "/in/"+srv.Key+"/hook?"+query, `{"i":1}`)
		})
	}
	wg.Wait()
	for i, s := range statuses {
		require.Equal(t, http.StatusAccepted, s, "request %d", i)
	}
	ctx := viewer.SystemContext(t.Context())
	reqs, err := env.DB.Client.Request.Query().All(ctx)
	require.NoError(t, err)
	require.Len(t, reqs, len(statuses))
	odd := 0
	for _, r := range reqs {
		if strings.Contains(r.Query, "name=") {
			odd++
			require.Contains(t, r.Query, "&name=Caf%E9&ok=\xc3\xa9")
		}
	}
	require.Equal(t, 4, odd)
}

// rawPost sends one HTTP/1.1 request with the target written as is (net/http's client would refuse raw
// non-ASCII bytes) and returns the response status.
func rawPost(t *testing.T, addr, target, body string) int {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return 0
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		target, addr, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Error(err)
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A request the database refuses outright (a NUL byte in a text column, which only an in-process caller can
// hand over: HTTP servers reject it) fails alone; the requests that shared its batch are still accepted.
func TestRefusedRequestFailsAlone(t *testing.T) {
	t.Parallel()
	env, srv := startUnreachable(t, 1000)

	var wg sync.WaitGroup
	errs := make([]error, 40)
	for i := range errs {
		wg.Go(func() {
			method := http.MethodPost
			if i == 7 {
				method = "PO\x00ST"
			}
			_, errs[i] = env.Relay.Inbound.Accept(t.Context(), srv.Key, inbound.Incoming{Method: method,
				Header: http.Header{}, Body: []byte("{}")})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if i != 7 {
			require.NoError(t, err, "request %d", i)
		}
	}
	ctx := viewer.SystemContext(t.Context())
	n, err := env.DB.Client.Request.Query().Count(ctx)
	require.NoError(t, err)
	debits, err := env.DB.Client.LedgerEntry.Query().Where(ledgerentry.ReasonEQ(ledgerentry.ReasonREQUEST_ACCEPTED)).Count(ctx)
	require.NoError(t, err)
	require.Equal(t, n, debits)
	if errs[7] == nil {
		require.Equal(t, len(errs), n) // SQLite stores the NUL
	} else {
		require.Equal(t, len(errs)-1, n)
	}
}
