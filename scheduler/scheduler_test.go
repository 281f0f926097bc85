package scheduler_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/attempt"
	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/request"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/viewer"
)

// newReceiver is a recipient endpoint that fails its first failures calls with 500, then answers 200.
func newReceiver(t *testing.T, failures int) *target { return newTarget(t, failThenOK(failures)) }

type call struct {
	at     time.Time
	method string
	path   string
	header http.Header
	body   string
}

func compressed(unit time.Duration) func(*relay.Config) {
	return func(c *relay.Config) { c.RetryUnit = unit }
}

// waitDelivered waits until the request's first delivery has SUCCEEDED, and returns it with its attempts.
func waitDelivered(t *testing.T, env *relaytest.Env, requestID string, timeout time.Duration, what string) *ent.Delivery {
	t.Helper()
	return waitDelivery(t, env, requestID, entdelivery.StatusSUCCEEDED, timeout, what)
}

// waitFailed waits until the request's first delivery has FAILED, and returns it with its attempts.
func waitFailed(t *testing.T, env *relaytest.Env, requestID string, timeout time.Duration, what string) *ent.Delivery {
	t.Helper()
	return waitDelivery(t, env, requestID, entdelivery.StatusFAILED, timeout, what)
}

func waitDelivery(t *testing.T, env *relaytest.Env, requestID string, status entdelivery.Status, timeout time.Duration, what string) *ent.Delivery {
	t.Helper()
	relaytest.Eventually(t, timeout, what, func() bool { return deliveriesOf(t, env, requestID)[0].Status == status })
	return deliveriesOf(t, env, requestID)[0]
}

// deliveriesOf reads a request's deliveries with their attempts, as the system.
func deliveriesOf(t *testing.T, env *relaytest.Env, requestID string) []*ent.Delivery {
	t.Helper()
	id, err := strconv.Atoi(requestID)
	require.NoError(t, err)
	return env.Deliveries(entdelivery.RequestID(id))
}

func requestStatus(t *testing.T, env *relaytest.Env, requestID string) request.Status {
	t.Helper()
	id, _ := strconv.Atoi(requestID)
	r, err := env.DB.Client.Request.Get(viewer.SystemContext(t.Context()), id)
	require.NoError(t, err)
	return r.Status
}

func TestFailsThenSucceedsOnQuadraticSchedule(t *testing.T) {
	t.Parallel()
	const unit = 20 * time.Millisecond
	env, tn, srv := relaytest.StartWithServer(t, 10, compressed(unit))
	rcv := newReceiver(t, 3)
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv.URL + "/hook", "sendIdempotencyKey": true})

	reqID := env.Send(srv.Key, "/evt?x=1", `{"n":1}`)
	relaytest.Eventually(t, 20*time.Second, "delivery to succeed", func() bool {
		ds := deliveriesOf(t, env, reqID)
		return len(ds) == 1 && ds[0].Status == entdelivery.StatusSUCCEEDED
	})
	d := deliveriesOf(t, env, reqID)[0]
	require.Equal(t, 4, d.AttemptCount)
	require.Len(t, d.Edges.Attempts, 4)
	require.Equal(t, 4, rcv.count())
	for i, a := range d.Edges.Attempts {
		require.Equal(t, i+1, a.Number)
		if i < 3 {
			require.Equal(t, attempt.StatusFAILED, a.Status)
			require.Equal(t, 500, *a.HTTPStatus)
			require.Equal(t, attempt.ErrorKindHTTP_STATUS, *a.ErrorKind)
		} else {
			require.Equal(t, attempt.StatusSUCCEEDED, a.Status)
		}
		if i > 0 {
			// Never early: attempt n starts at least n² units after attempt n-1 ended.
			prev := d.Edges.Attempts[i-1]
			wait := time.Duration((i+1)*(i+1)) * unit
			require.GreaterOrEqual(t, a.StartedAt.Sub(prev.FinishedAt), wait, "attempt %d started early", a.Number)
		}
	}
	require.Equal(t, request.StatusDELIVERED, requestStatus(t, env, reqID))

	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	keys := map[string]bool{}
	for i, c := range rcv.calls {
		require.Equal(t, http.MethodPost, c.method)
		require.Equal(t, "/hook/evt?x=1", c.path)
		require.Equal(t, `{"n":1}`, c.body)
		require.Equal(t, reqID, c.header.Get("X-Adal-Request-Id"))
		require.Equal(t, strconv.Itoa(i+1), c.header.Get("X-Adal-Attempt"))
		keys[c.header.Get("X-Adal-Idempotency")] = true
	}
	require.Len(t, keys, 1, "the same idempotency key on every attempt")
	require.NotContains(t, keys, "")
}

func TestAlwaysFailingExhaustsAttempts(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartWithServer(t, 10, compressed(5*time.Millisecond))
	rcv := newReceiver(t, 1000)
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv.URL, "maxAttempts": 3, "retrySchedule": "STEPPED"})

	reqID := env.Send(srv.Key, "", `{}`)
	d := waitFailed(t, env, reqID, 20*time.Second, "delivery to fail")
	require.Equal(t, 3, d.AttemptCount)
	require.Len(t, d.Edges.Attempts, 3)
	require.Nil(t, d.NextAttemptAt)
	require.NotNil(t, d.FinishedAt)
	require.Equal(t, 3, rcv.count())
	require.Equal(t, request.StatusFAILED, requestStatus(t, env, reqID))
}

func TestRecipientsAreIndependent(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartWithServer(t, 10, compressed(5*time.Millisecond))
	good := newReceiver(t, 0)
	bad := newReceiver(t, 1000)
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": good.URL, "maxAttempts": 2})
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": bad.URL, "maxAttempts": 2})

	reqID := env.Send(srv.Key, "", `{}`)
	relaytest.Eventually(t, 20*time.Second, "both deliveries final", func() bool {
		ds := deliveriesOf(t, env, reqID)
		return ds[0].FinishedAt != nil && ds[1].FinishedAt != nil
	})
	ds := deliveriesOf(t, env, reqID)
	require.Equal(t, entdelivery.StatusSUCCEEDED, ds[0].Status)
	require.Equal(t, 1, ds[0].AttemptCount)
	require.Equal(t, entdelivery.StatusFAILED, ds[1].Status)
	require.Equal(t, 2, ds[1].AttemptCount)
	require.Equal(t, request.StatusPARTIAL, requestStatus(t, env, reqID))
}
