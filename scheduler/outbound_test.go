package scheduler_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/outboundattempt"
	"github.com/adal-relay/adal/ent/outboundjob"
	"github.com/adal-relay/adal/outbound"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/scheduler"
	"github.com/adal-relay/adal/viewer"
)

// target is an outbound job's target: answer(n, w) writes the answer to the n-th call (from 1).
type target struct {
	*httptest.Server
	mu     sync.Mutex
	calls  []call
	answer func(n int, w http.ResponseWriter, r *http.Request)
}

func newTarget(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) *target {
	tg := &target{answer: answer}
	tg.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		tg.mu.Lock()
		tg.calls = append(tg.calls, call{at: time.Now(), method: req.Method, path: req.URL.RequestURI(), header: req.Header.Clone(), body: string(body)})
		n := len(tg.calls)
		tg.mu.Unlock()
		tg.answer(n, w, req)
	}))
	t.Cleanup(tg.Close)
	return tg
}

func (tg *target) count() int {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return len(tg.calls)
}

// failThenOK answers 500 to the first k calls, then 200.
func failThenOK(k int) func(int, http.ResponseWriter, *http.Request) {
	return func(n int, w http.ResponseWriter, _ *http.Request) {
		if n <= k {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
}

const sendOutbound = `mutation($in: SendOutboundInput!){ sendOutbound(input: $in){ id status } }`

// send submits an outbound job as the tenant's member and returns its id.
func send(t *testing.T, env *relaytest.Env, tn relaytest.Tenant, in map[string]any) int {
	t.Helper()
	var out struct{ SendOutbound struct{ ID, Status string } }
	env.MustGraphQL(tn.Owner, sendOutbound, map[string]any{"in": in}, &out)
	require.Equal(t, "PENDING", out.SendOutbound.Status)
	id := relaytest.RowID(t, out.SendOutbound.ID)
	return id
}

// outboundJob reads a job with its attempts, as the system.
func outboundJob(t *testing.T, env *relaytest.Env, id int) *ent.OutboundJob {
	t.Helper()
	j, err := env.DB.Client.OutboundJob.Query().Where(outboundjob.ID(id)).
		WithAttempts(func(q *ent.OutboundAttemptQuery) { q.Order(ent.Asc(outboundattempt.FieldNumber)) }).
		Only(viewer.SystemContext(t.Context()))
	require.NoError(t, err)
	return j
}

func responseBody(a *ent.OutboundAttempt) []byte {
	if a.ResponseBody == nil {
		return nil
	}
	return *a.ResponseBody
}

func waitFinished(t *testing.T, env *relaytest.Env, id int) *ent.OutboundJob {
	t.Helper()
	relaytest.Eventually(t, 30*time.Second, "outbound job to finish", func() bool {
		return outboundJob(t, env, id).FinishedAt != nil
	})
	return outboundJob(t, env, id)
}

// startFailingTarget starts a process on the retry unit with a tenant of 10 credits, and a target that fails
// its first failures calls.
func startFailingTarget(t *testing.T, unit time.Duration, failures int) (*relaytest.Env, relaytest.Tenant, *target) {
	t.Helper()
	env := relaytest.Start(t, compressed(unit))
	return env, env.NewTenant("acme", relaytest.PlanLimits{Credits: 10}), newTarget(t, failThenOK(failures))
}

func TestOutboundFailsThenSucceedsOnSteppedSchedule(t *testing.T) {
	t.Parallel()
	const unit = 20 * time.Millisecond
	env, tn, tg := startFailingTarget(t, unit, 3)

	id := send(t, env, tn, map[string]any{
		"url": tg.URL + "/orders?x=1", "method": "PUT", "body": `{"n":1}`, "idempotencyKey": "order-1",
		"headers": []map[string]any{{"name": "Content-Type", "value": "application/json"}, {"name": "x-token", "value": "abc"}},
	})
	j := waitFinished(t, env, id)
	require.Equal(t, outboundjob.StatusSUCCEEDED, j.Status)
	require.Equal(t, 4, j.AttemptCount)
	require.Nil(t, j.NextAttemptAt)
	require.Len(t, j.Edges.Attempts, 4)
	require.Equal(t, 4, tg.count())
	steps := []int{1, 1, 2} // STEPPED waits after the 1st..3rd failure
	for i, a := range j.Edges.Attempts {
		require.Equal(t, i+1, a.Number)
		if i < 3 {
			require.Equal(t, outboundattempt.StatusFAILED, a.Status)
			require.Equal(t, 500, *a.HTTPStatus)
			require.Equal(t, outboundattempt.ErrorKindHTTP_STATUS, *a.ErrorKind)
		} else {
			require.Equal(t, outboundattempt.StatusSUCCEEDED, a.Status)
			require.Nil(t, a.ErrorKind)
		}
		require.Empty(t, responseBody(a), "response bodies are kept only when asked")
		if i > 0 {
			// Never early: the wait is counted from the end of the previous attempt.
			wait := time.Duration(steps[i-1]) * unit
			require.GreaterOrEqual(t, a.StartedAt.Sub(j.Edges.Attempts[i-1].FinishedAt), wait, "attempt %d started early", a.Number)
		}
	}

	tg.mu.Lock()
	defer tg.mu.Unlock()
	for i, c := range tg.calls {
		require.Equal(t, http.MethodPut, c.method)
		require.Equal(t, "/orders?x=1", c.path)
		require.Equal(t, `{"n":1}`, c.body)
		require.Equal(t, "application/json", c.header.Get("Content-Type"))
		require.Equal(t, "abc", c.header.Get("X-Token"))
		require.Equal(t, strconv.Itoa(id), c.header.Get("X-Adal-Request-Id"))
		require.Equal(t, strconv.Itoa(i+1), c.header.Get("X-Adal-Attempt"))
		require.Empty(t, c.header.Get("X-Adal-Idempotency"), "the idempotency key is not sent to the target")
		require.Empty(t, c.header.Get("Idempotency-Key"))
	}
}

func TestOutboundFailsAfterTenAttempts(t *testing.T) {
	t.Parallel()
	const unit = 2 * time.Millisecond
	env, tn, tg := startFailingTarget(t, unit, 1000)

	id := send(t, env, tn, map[string]any{"url": tg.URL})
	j := waitFinished(t, env, id)
	require.Equal(t, outboundjob.StatusFAILED, j.Status)
	require.Equal(t, outbound.MaxAttempts, j.MaxAttempts)
	require.Equal(t, 10, j.AttemptCount)
	require.Len(t, j.Edges.Attempts, 10)
	require.Nil(t, j.NextAttemptAt)
	require.Equal(t, 10, tg.count())
	steps := []int{1, 1, 2, 5, 10, 20, 20, 60, 60}
	for i := 1; i < 10; i++ {
		prev, a := j.Edges.Attempts[i-1], j.Edges.Attempts[i]
		require.GreaterOrEqual(t, a.StartedAt.Sub(prev.FinishedAt), time.Duration(steps[i-1])*unit, "attempt %d started early", a.Number)
	}
	tg.mu.Lock()
	require.Equal(t, http.MethodPost, tg.calls[0].method, "POST by default")
	tg.mu.Unlock()
}

func TestOutboundStoresResponseBodiesOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	tn := env.NewTenant("acme", relaytest.PlanLimits{Credits: 10})
	big := strings.Repeat("0123456789abcdef", 100<<10/16) // 100 KiB, beyond the 64 KiB cap
	tg := newTarget(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			_, _ = io.WriteString(w, big)
			return
		}
		w.WriteHeader(http.StatusTeapot)
		_, _ = io.WriteString(w, "short and \xff")
	})

	stored := send(t, env, tn, map[string]any{"url": tg.URL + "/big", "storeResponseBody": true})
	notStored := send(t, env, tn, map[string]any{"url": tg.URL + "/big"})
	small := send(t, env, tn, map[string]any{"url": tg.URL + "/small", "storeResponseBody": true})

	j := waitFinished(t, env, stored)
	require.Equal(t, outboundjob.StatusSUCCEEDED, j.Status)
	a := j.Edges.Attempts[0]
	require.Len(t, responseBody(a), 64<<10)
	require.Equal(t, outbound.MaxStoredResponse, 65536)
	require.Equal(t, big[:64<<10], string(responseBody(a)))
	require.True(t, a.ResponseTruncated)

	j = waitFinished(t, env, notStored)
	require.Equal(t, outboundjob.StatusSUCCEEDED, j.Status, "the whole response is read even when not kept")
	require.Empty(t, responseBody(j.Edges.Attempts[0]))
	require.False(t, j.Edges.Attempts[0].ResponseTruncated)

	// Failed attempts keep their answer too; the API shows it as text and as exact bytes.
	relaytest.Eventually(t, 20*time.Second, "first attempt of the small job", func() bool {
		return len(outboundJob(t, env, small).Edges.Attempts) > 0
	})
	var out struct {
		Node struct {
			Attempts []struct {
				HTTPStatus         int
				ErrorKind          string
				ResponseBody       *string
				ResponseBodyBase64 *string
				ResponseTruncated  bool
			}
		}
	}
	env.MustGraphQL(tn.Member, `query($id: ID!){ node(id: $id){ ... on OutboundJob {
		attempts { httpStatus errorKind responseBody responseBodyBase64 responseTruncated } } } }`,
		map[string]any{"id": small}, &out)
	first := out.Node.Attempts[0]
	require.Equal(t, http.StatusTeapot, first.HTTPStatus)
	require.Equal(t, "HTTP_STATUS", first.ErrorKind)
	require.Equal(t, "short and \uFFFD", *first.ResponseBody)
	require.Equal(t, "c2hvcnQgYW5kIP8=", *first.ResponseBodyBase64)
	require.False(t, first.ResponseTruncated)

	env.MustGraphQL(tn.Member, `query($id: ID!){ node(id: $id){ ... on OutboundJob {
		attempts { httpStatus errorKind responseBody responseBodyBase64 responseTruncated } } } }`,
		map[string]any{"id": notStored}, &out)
	require.Nil(t, out.Node.Attempts[0].ResponseBody)
	require.Nil(t, out.Node.Attempts[0].ResponseBodyBase64)
}

func TestOutboundRefusesPrivateTargets(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t, compressed(time.Millisecond), func(c *relay.Config) { c.AllowPrivateTargets = false })
	tn := env.NewTenant("acme", relaytest.PlanLimits{Credits: 10})
	tg := newTarget(t, failThenOK(0))

	id := send(t, env, tn, map[string]any{"url": tg.URL})
	j := waitFinished(t, env, id)
	require.Equal(t, outboundjob.StatusFAILED, j.Status)
	require.Len(t, j.Edges.Attempts, 10)
	for _, a := range j.Edges.Attempts {
		require.Equal(t, outboundattempt.ErrorKindCONNECTION, *a.ErrorKind)
		require.Contains(t, a.ErrorMessage, "refused to connect")
		require.Nil(t, a.HTTPStatus)
	}
	require.Zero(t, tg.count(), "the target was never reached")
}

func TestOutboundTimeoutIncludesReadingTheBody(t *testing.T) {
	t.Parallel()
	// A 1 s lease cuts attempts at 750 ms (scheduler.AttemptBudget), standing in for the 30 s limit.
	const lease = time.Second
	release := make(chan struct{})
	tg := newTarget(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			// Headers and the start of the body at once, then nothing: the answer never completes.
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "partial")
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		_, _ = io.WriteString(w, "done")
	})
	t.Cleanup(func() { close(release) }) // runs before the target closes
	env := relaytest.Start(t, compressed(time.Millisecond), func(c *relay.Config) { c.Lease = lease })
	tn := env.NewTenant("acme", relaytest.PlanLimits{Credits: 10})

	id := send(t, env, tn, map[string]any{"url": tg.URL}) // response body not stored, still read
	j := waitFinished(t, env, id)
	require.Equal(t, outboundjob.StatusSUCCEEDED, j.Status)
	require.Len(t, j.Edges.Attempts, 2)
	a := j.Edges.Attempts[0]
	require.Equal(t, outboundattempt.StatusFAILED, a.Status)
	require.Equal(t, outboundattempt.ErrorKindTIMEOUT, *a.ErrorKind)
	require.Equal(t, 200, *a.HTTPStatus, "the headers arrived in time, the body did not")
	require.Contains(t, a.ErrorMessage, "response body")
	budget := scheduler.AttemptBudget(lease)
	require.GreaterOrEqual(t, a.FinishedAt.Sub(a.StartedAt), budget)
	require.Less(t, a.FinishedAt.Sub(a.StartedAt), lease)
}

func TestOutboundDefaultTimeoutIsThirtySeconds(t *testing.T) {
	t.Parallel()
	require.Equal(t, 30*time.Second, outbound.New(outbound.Config{}).Timeout())
	// Under the default 60 s lease the whole 30 s fit in an attempt's budget.
	require.GreaterOrEqual(t, scheduler.AttemptBudget(60*time.Second), 30*time.Second)
}
