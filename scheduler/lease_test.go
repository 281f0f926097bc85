package scheduler_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/ent/attempt"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/scheduler"
)

// An attempt never outlives its lease in a live process: with a lease shorter than the recipient's timeout,
// the attempt is cut at the lease's budget and recorded as a TIMEOUT by the process itself — the rescuer,
// sweeping all along, never takes it for interrupted (which would send it again while it still runs).
func TestAttemptEndsWithinItsLease(t *testing.T) {
	t.Parallel()
	const lease = 2 * time.Second
	env := relaytest.Start(t, compressed(5*time.Millisecond), func(c *relay.Config) {
		c.Lease = lease
		c.RescueInterval = 50 * time.Millisecond
	})
	tn, srv := env.NewTenantServer(10)
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // once the body is read, the server notices the caller hanging up
		<-r.Context().Done()
	}))
	t.Cleanup(stuck.Close)
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": stuck.URL, "maxAttempts": 1, "timeoutSeconds": 30})

	reqID := env.Send(srv.Key, "", `{}`)
	d := waitFailed(t, env, reqID, 20*time.Second, "the attempt to end")
	require.Len(t, d.Edges.Attempts, 1)
	a := d.Edges.Attempts[0]
	require.Equal(t, attempt.ErrorKindTIMEOUT, *a.ErrorKind, a.ErrorMessage)
	// Cut at what was left of the lease's budget when the attempt started: the budget less the moments
	// between the claim and the send.
	m := regexp.MustCompile(`no response within (\S+):`).FindStringSubmatch(a.ErrorMessage)
	require.NotNil(t, m, a.ErrorMessage)
	cut, err := time.ParseDuration(m[1])
	require.NoError(t, err)
	require.LessOrEqual(t, cut, scheduler.AttemptBudget(lease))
	require.Greater(t, cut, scheduler.AttemptBudget(lease)-time.Second/2)
	require.Less(t, a.FinishedAt.Sub(a.StartedAt), lease)
}
