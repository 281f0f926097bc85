package delivery_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/relay/relaytest"
)

// A manual retry is a new delivery with its own attempts, for one credit; the delivery it replaces and the
// other recipients' deliveries are left as they were, and the request status follows the new delivery.
func TestRetryDeliveryCreatesNewDelivery(t *testing.T) {
	t.Parallel()
	env, tn, srv := startFast(t, 10)
	flaky := newHook(t, failFirst(1))
	good := newHook(t, always(http.StatusOK))
	recA := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": flaky.URL + "/a", "maxAttempts": 1, "sendIdempotencyKey": true})
	recB := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": good.URL + "/b", "maxAttempts": 1})

	reqID := env.Send(srv.Key, "/evt", `{"n":1}`)
	r := waitRequest(t, env, tn.Member, reqID, "request to settle", func(r requestView) bool { return r.Status != "PENDING" })
	require.Equal(t, "PARTIAL", r.Status)
	origA, origB := deliveryTo(t, r, recA), deliveryTo(t, r, recB)
	require.Equal(t, "FAILED", origA.Status)
	require.Equal(t, "SUCCEEDED", origB.Status)
	require.Equal(t, 9, balance(t, env, tn))

	// Retry the failed delivery: a new one, and the request is pending again until it settles.
	retried, code := mutateDelivery(t, env, tn.Member, "retryDelivery", origA.ID)
	require.Empty(t, code)
	require.NotEqual(t, origA.ID, retried.ID)
	require.Equal(t, "MANUAL_RETRY", retried.Trigger)
	require.Equal(t, recA, retried.RecipientID)
	require.Equal(t, 0, retried.AttemptCount)
	require.False(t, retried.Superseded)
	require.Equal(t, "PENDING", retried.Request.Status, "the request is pending while the retry is")

	r = waitRequest(t, env, tn.Member, reqID, "request delivered", func(r requestView) bool { return r.Status == "DELIVERED" })
	require.Len(t, r.Deliveries, 3)
	newA := deliveryTo(t, r, recA)
	require.Equal(t, retried.ID, newA.ID)
	require.Equal(t, "SUCCEEDED", newA.Status)
	require.Equal(t, 1, newA.AttemptCount, "the retry has its own attempts")
	require.Len(t, newA.Attempts, 1)
	require.Equal(t, 1, newA.Attempts[0].Number)
	require.Equal(t, "SUCCEEDED", newA.Attempts[0].Status)

	// The retried delivery is kept as it was, only marked superseded.
	oldA := deliveriesTo(r, recA)[0]
	require.Equal(t, origA.ID, oldA.ID)
	require.Equal(t, "FAILED", oldA.Status)
	require.True(t, oldA.Superseded)
	require.Equal(t, origA.Attempts, oldA.Attempts)

	// The other recipient is untouched: same delivery, same attempts, no second call.
	gotB := deliveryTo(t, r, recB)
	gotB.Request = origB.Request // the request's status moved on; the delivery did not
	require.Equal(t, origB, gotB)
	require.Equal(t, 1, good.count())

	// Every call to A carries the request's key, the automatic attempt and the manual one alike; the retry
	// counts its attempts from 1.
	calls := flaky.received()
	require.Len(t, calls, 2)
	for _, c := range calls {
		require.Equal(t, r.Key, c.header.Get("X-Adal-Idempotency"))
		require.Equal(t, reqID, c.header.Get("X-Adal-Request-Id"))
		require.Equal(t, "1", c.header.Get("X-Adal-Attempt"))
		require.Equal(t, "/a/evt", c.path)
		require.Equal(t, `{"n":1}`, c.body)
	}
	require.NotEmpty(t, r.Key)

	// One credit, booked as a manual retry.
	require.Equal(t, 8, balance(t, env, tn))
	entries := ledger(t, env, tn)
	require.Equal(t, ledgerView{Reason: "MANUAL_RETRY", Amount: -1, BalanceAfter: 8, Reference: "delivery:" + origA.ID}, entries[0])

	// Only the newest delivery of a request to a recipient can be retried.
	_, code = mutateDelivery(t, env, tn.Member, "retryDelivery", origA.ID)
	require.Equal(t, "CONFLICT", code)
	require.Equal(t, 8, balance(t, env, tn))

	// A SUCCEEDED delivery can be sent again too.
	again, code := mutateDelivery(t, env, tn.Member, "retryDelivery", origB.ID)
	require.Empty(t, code)
	require.Equal(t, "MANUAL_RETRY", again.Trigger)
	r = waitRequest(t, env, tn.Member, reqID, "second retry delivered", func(r requestView) bool {
		return r.Status == "DELIVERED" && deliveryTo(t, r, recB).Status == "SUCCEEDED"
	})
	require.Len(t, r.Deliveries, 4)
	require.Equal(t, 2, good.count())
	require.Equal(t, 7, balance(t, env, tn))
}

// A FAILED request becomes PENDING with the retry and DELIVERED when it succeeds.
func TestRetryTurnsFailedRequestIntoDelivered(t *testing.T) {
	t.Parallel()
	env, tn, srv := startFast(t, 10)
	flaky := newHook(t, failFirst(2))
	rec := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": flaky.URL, "maxAttempts": 2, "retrySchedule": "STEPPED"})

	reqID := env.Send(srv.Key, "", `{}`)
	r := waitRequest(t, env, tn.Member, reqID, "request failed", func(r requestView) bool { return r.Status == "FAILED" })
	d := deliveryTo(t, r, rec)
	require.Equal(t, 2, d.AttemptCount)

	retried, code := mutateDelivery(t, env, tn.Member, "retryDelivery", d.ID)
	require.Empty(t, code)
	require.Equal(t, "PENDING", retried.Request.Status)
	require.Equal(t, 2, retried.MaxAttempts, "the retry takes the recipient's settings")

	r = waitRequest(t, env, tn.Member, reqID, "request delivered", func(r requestView) bool { return r.Status == "DELIVERED" })
	nd := deliveryTo(t, r, rec)
	require.Equal(t, retried.ID, nd.ID)
	require.Equal(t, 1, nd.AttemptCount)
	require.Equal(t, 3, flaky.count())
}

// Retry needs a final delivery and cancel a pending one: an attempt in flight can be neither retried nor
// recalled. A cancelled delivery is never attempted again, even when its recipient resumes, and can itself be
// retried.
func TestRetryAndCancelConflicts(t *testing.T) {
	t.Parallel()
	env, tn, srv := startFast(t, 10)
	held := newHook(t, always(http.StatusOK))
	held.hold()
	idle := newHook(t, always(http.StatusOK))
	recH := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": held.URL, "maxAttempts": 1})
	recP := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": idle.URL})
	setRecipientState(t, env, tn, "pauseRecipient", recP)

	reqID := env.Send(srv.Key, "", `{}`)
	r := waitRequest(t, env, tn.Member, reqID, "attempt in flight", func(r requestView) bool {
		return deliveryTo(t, r, recH).Status == "IN_PROGRESS" && held.count() == 1
	})
	inFlight, pending := deliveryTo(t, r, recH), deliveryTo(t, r, recP)
	require.Equal(t, "PENDING", pending.Status)
	require.Equal(t, 1, held.count())

	for _, tc := range []struct{ mutation, id string }{
		{"retryDelivery", inFlight.ID},
		{"retryDelivery", pending.ID},
		{"cancelDelivery", inFlight.ID},
	} {
		_, code := mutateDelivery(t, env, tn.Member, tc.mutation, tc.id)
		require.Equal(t, "CONFLICT", code, "%s of delivery %s", tc.mutation, tc.id)
	}
	require.Equal(t, 9, balance(t, env, tn), "refused actions cost nothing")

	canceled, code := mutateDelivery(t, env, tn.Member, "cancelDelivery", pending.ID)
	require.Empty(t, code)
	require.Equal(t, "CANCELED", canceled.Status)
	require.Nil(t, canceled.NextAttemptAt)
	require.NotNil(t, canceled.FinishedAt)
	require.Equal(t, 0, canceled.AttemptCount)
	require.Equal(t, "PENDING", canceled.Request.Status, "the other delivery is still in flight")
	_, code = mutateDelivery(t, env, tn.Member, "cancelDelivery", pending.ID)
	require.Equal(t, "CONFLICT", code, "cancelling a cancelled delivery")

	// The attempt in flight was not recalled: it completes.
	held.release()
	r = waitRequest(t, env, tn.Member, reqID, "request settled", func(r requestView) bool { return r.Status != "PENDING" })
	require.Equal(t, "PARTIAL", r.Status)
	require.Equal(t, "SUCCEEDED", deliveryTo(t, r, recH).Status)
	_, code = mutateDelivery(t, env, tn.Member, "cancelDelivery", inFlight.ID)
	require.Equal(t, "CONFLICT", code, "cancelling a succeeded delivery")

	// Resume the recipient and send a second request through it: once that one is delivered, the scheduler
	// has claimed everything due for the recipient (the cancelled delivery was due earlier), and the
	// cancelled delivery was never attempted.
	setRecipientState(t, env, tn, "resumeRecipient", recP)
	req2 := env.Send(srv.Key, "", `{}`)
	waitRequest(t, env, tn.Member, req2, "second request delivered", func(r requestView) bool { return r.Status == "DELIVERED" })
	r = getRequest(t, env, tn.Member, reqID)
	after := deliveryTo(t, r, recP)
	require.Equal(t, "CANCELED", after.Status)
	require.Equal(t, 0, after.AttemptCount)
	require.Empty(t, after.Attempts)
	calls := idle.received()
	require.Len(t, calls, 1)
	require.Equal(t, req2, calls[0].header.Get("X-Adal-Request-Id"))

	// A cancelled delivery can be retried.
	retried, code := mutateDelivery(t, env, tn.Member, "retryDelivery", pending.ID)
	require.Empty(t, code)
	require.Equal(t, "MANUAL_RETRY", retried.Trigger)
	r = waitRequest(t, env, tn.Member, reqID, "request delivered", func(r requestView) bool { return r.Status == "DELIVERED" })
	require.Equal(t, "SUCCEEDED", deliveryTo(t, r, recP).Status)
	require.Equal(t, 7, balance(t, env, tn))
}

// Cancelling a delivery that waits for a retry stops it: the retry never happens.
func TestCancelScheduledRetry(t *testing.T) {
	t.Parallel()
	const unit = 500 * time.Millisecond // the retry is due 4 units (2 s) after the first attempt
	env, tn, srv := relaytest.StartWithServer(t, 10, retryUnit(unit))
	flaky := newHook(t, failFirst(1))
	rec := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": flaky.URL})

	reqID := env.Send(srv.Key, "", `{}`)
	r := waitRequest(t, env, tn.Member, reqID, "retry scheduled", func(r requestView) bool {
		d := deliveryTo(t, r, rec)
		return d.Status == "PENDING" && d.AttemptCount == 1
	})
	d := deliveryTo(t, r, rec)
	require.NotNil(t, d.NextAttemptAt)
	due := *d.NextAttemptAt

	canceled, code := mutateDelivery(t, env, tn.Member, "cancelDelivery", d.ID)
	require.Empty(t, code)
	require.Equal(t, "CANCELED", canceled.Status)
	require.Nil(t, canceled.NextAttemptAt)
	require.Equal(t, "FAILED", canceled.Request.Status, "nothing succeeded")

	// Watch past the due time (plus more than a poll interval): the retry never starts.
	watchUntil := due.Add(1500 * time.Millisecond)
	require.True(t, time.Now().Before(due), "the test cancelled after the retry was due; slow machine?")
	throughout(watchUntil, func() {
		require.Equal(t, 1, flaky.count())
		d := deliveryTo(t, getRequest(t, env, tn.Member, reqID), rec)
		require.Equal(t, "CANCELED", d.Status)
		require.Equal(t, 1, d.AttemptCount)
	})
}

// A replay is a new request with a new key, delivered to the recipients configured now, for one credit; the
// original stays as it was.
func TestReplayRequest(t *testing.T) {
	t.Parallel()
	env, tn, srv := startFast(t, 10)
	kept := newHook(t, always(http.StatusOK))
	removed := newHook(t, always(http.StatusOK))
	added := newHook(t, always(http.StatusOK))
	recKept := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": kept.URL, "sendIdempotencyKey": true})
	recRemoved := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": removed.URL})

	origID := env.Send(srv.Key, "/evt?x=1", `{"n":1}`)
	orig := waitRequest(t, env, tn.Member, origID, "original delivered", func(r requestView) bool { return r.Status == "DELIVERED" })
	require.Len(t, orig.Deliveries, 2)

	recAdded := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": added.URL, "sendIdempotencyKey": true})
	env.MustGraphQL(tn.Owner, `mutation($id: ID!){ deleteRecipient(id: $id){ id } }`, map[string]any{"id": recRemoved}, nil)

	rep, code := replay(t, env, tn.Member, origID)
	require.Empty(t, code)
	require.NotEqual(t, origID, rep.ID)
	require.NotNil(t, rep.ReplayOf)
	require.Equal(t, origID, rep.ReplayOf.ID)
	require.NotEmpty(t, rep.Key)
	require.NotEqual(t, orig.Key, rep.Key)

	r := waitRequest(t, env, tn.Member, rep.ID, "replay delivered", func(r requestView) bool { return r.Status == "DELIVERED" })
	require.Equal(t, orig.Method, r.Method)
	require.Equal(t, orig.Path, r.Path)
	require.Equal(t, orig.Query, r.Query)
	require.Equal(t, orig.Body, r.Body)
	recipients := []string{}
	for _, d := range r.Deliveries {
		recipients = append(recipients, d.RecipientID)
		require.Equal(t, "AUTOMATIC", d.Trigger)
	}
	require.ElementsMatch(t, []string{recKept, recAdded}, recipients, "delivered to the recipients configured now")
	require.Equal(t, 1, removed.count())

	// The idempotency key is the request's: the replay's differs from the original's.
	keptCalls := kept.received()
	require.Len(t, keptCalls, 2)
	require.Equal(t, orig.Key, keptCalls[0].header.Get("X-Adal-Idempotency"))
	require.Equal(t, rep.Key, keptCalls[1].header.Get("X-Adal-Idempotency"))
	require.Equal(t, rep.ID, keptCalls[1].header.Get("X-Adal-Request-Id"))
	require.Equal(t, "/evt?x=1", keptCalls[1].path)
	require.Equal(t, `{"n":1}`, keptCalls[1].body)
	addedCalls := added.received()
	require.Len(t, addedCalls, 1)
	require.Equal(t, rep.Key, addedCalls[0].header.Get("X-Adal-Idempotency"))

	// One credit, booked as a replay.
	require.Equal(t, 8, balance(t, env, tn))
	require.Equal(t, "REPLAY", ledger(t, env, tn)[0].Reason)
	require.Equal(t, -1, ledger(t, env, tn)[0].Amount)

	// The original is unchanged, and knows its replay.
	now := getRequest(t, env, tn.Member, origID)
	require.Equal(t, "DELIVERED", now.Status)
	require.Equal(t, orig.Deliveries, now.Deliveries)
	require.Equal(t, orig.Key, now.Key)
	require.Nil(t, now.ReplayOf)
	require.Len(t, now.Replays, 1)
	require.Equal(t, rep.ID, now.Replays[0].ID)
}

// TestReplayEmptyBody: a request without a body replays like any other. SQLite reads an empty blob back as no
// value at all, which the body column does not take.
func TestReplayEmptyBody(t *testing.T) {
	t.Parallel()
	env, tn, srv := startFast(t, 10)
	hook := newHook(t, always(http.StatusOK))
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": hook.URL})
	origID := env.Send(srv.Key, "", "")
	waitRequest(t, env, tn.Member, origID, "original delivered", func(r requestView) bool { return r.Status == "DELIVERED" })
	rep, code := replay(t, env, tn.Member, origID)
	require.Empty(t, code)
	r := waitRequest(t, env, tn.Member, rep.ID, "replay delivered", func(r requestView) bool { return r.Status == "DELIVERED" })
	require.Empty(t, r.Body)
	calls := hook.received()
	require.Len(t, calls, 2)
	require.Empty(t, calls[1].body)
}

// Without credits, retry and replay are refused and change nothing.
func TestManualActionsWithoutCredits(t *testing.T) {
	t.Parallel()
	env, tn, srv := startFast(t, 1)
	failing := newHook(t, always(http.StatusServiceUnavailable))
	rec := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": failing.URL, "maxAttempts": 1})

	reqID := env.Send(srv.Key, "", `{}`)
	before := waitRequest(t, env, tn.Member, reqID, "request failed", func(r requestView) bool { return r.Status == "FAILED" })
	d := deliveryTo(t, before, rec)
	require.Equal(t, 0, balance(t, env, tn))
	ledgerBefore := ledger(t, env, tn)

	_, code := mutateDelivery(t, env, tn.Member, "retryDelivery", d.ID)
	require.Equal(t, "INSUFFICIENT_CREDITS", code)
	_, code = replay(t, env, tn.Member, reqID)
	require.Equal(t, "INSUFFICIENT_CREDITS", code)

	after := getRequest(t, env, tn.Member, reqID)
	require.Equal(t, before, after, "no new delivery, nothing superseded")
	require.Equal(t, 1, requestCount(t, env, tn.Member, srv.ID), "no replayed request")
	require.Equal(t, 0, balance(t, env, tn))
	require.Equal(t, ledgerBefore, ledger(t, env, tn))
	require.Equal(t, 1, failing.count())

	// Another tenant cannot act on them, whatever its credits.
	intruder := env.NewTenant("intruder", relaytest.PlanLimits{Credits: 10})
	for _, m := range []string{"retryDelivery", "cancelDelivery"} {
		_, code = mutateDelivery(t, env, intruder.Member, m, d.ID)
		require.Equal(t, "NOT_FOUND", code, m)
	}
	_, code = replay(t, env, intruder.Member, reqID)
	require.Equal(t, "NOT_FOUND", code)
	require.Equal(t, 10, balance(t, env, intruder))
	require.Equal(t, before, getRequest(t, env, tn.Member, reqID))

	// With a credit the same retry goes through.
	env.MustGraphQL(env.AdminToken(), `mutation($t: ID!){ grantCredits(tenantId: $t, amount: 1){ id } }`, map[string]any{"t": tn.ID}, nil)
	_, code = mutateDelivery(t, env, tn.Member, "retryDelivery", d.ID)
	require.Empty(t, code)
	require.Equal(t, 0, balance(t, env, tn))
}

// A paused recipient's deliveries wait without spending attempts — a scheduled retry as well as a new
// delivery — while other recipients go on; resumed, they are delivered.
func TestPausedRecipientWaits(t *testing.T) {
	t.Parallel()
	const unit = 20 * time.Millisecond
	env, tn, srv := relaytest.StartWithServer(t, 10, retryUnit(unit))
	paused := newHook(t, failFirst(1))
	paused.hold()
	other := newHook(t, always(http.StatusOK))
	recP := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": paused.URL, "maxAttempts": 3})
	recO := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": other.URL})

	// Pause while the first attempt is in flight; it fails, and its retry is scheduled.
	req1 := env.Send(srv.Key, "", `{}`)
	waitRequest(t, env, tn.Member, req1, "first attempt in flight", func(r requestView) bool {
		return deliveryTo(t, r, recP).Status == "IN_PROGRESS" && paused.count() == 1
	})
	setRecipientState(t, env, tn, "pauseRecipient", recP)
	paused.release()
	r := waitRequest(t, env, tn.Member, req1, "retry scheduled", func(r requestView) bool {
		d := deliveryTo(t, r, recP)
		return d.Status == "PENDING" && d.AttemptCount == 1
	})
	due := *deliveryTo(t, r, recP).NextAttemptAt

	// A request arriving while paused waits as well; the other recipient gets it.
	req2 := env.Send(srv.Key, "", `{}`)
	waitRequest(t, env, tn.Member, req2, "other recipient served", func(r requestView) bool {
		return deliveryTo(t, r, recO).Status == "SUCCEEDED"
	})

	// Watch well past the retry's due time (many units, and more than a poll interval): nothing is sent to
	// the paused recipient and no attempt is spent.
	watchUntil := due.Add(max(25*unit, 1500*time.Millisecond))
	throughout(watchUntil, func() {
		require.Equal(t, 1, paused.count())
		d1 := deliveryTo(t, getRequest(t, env, tn.Member, req1), recP)
		d2 := deliveryTo(t, getRequest(t, env, tn.Member, req2), recP)
		require.Equal(t, "PENDING", d1.Status)
		require.Equal(t, 1, d1.AttemptCount)
		require.Equal(t, "PENDING", d2.Status)
		require.Equal(t, 0, d2.AttemptCount)
	})
	require.Equal(t, "PENDING", getRequest(t, env, tn.Member, req1).Status)

	setRecipientState(t, env, tn, "resumeRecipient", recP)
	r1 := waitRequest(t, env, tn.Member, req1, "first request delivered", func(r requestView) bool { return r.Status == "DELIVERED" })
	r2 := waitRequest(t, env, tn.Member, req2, "second request delivered", func(r requestView) bool { return r.Status == "DELIVERED" })
	d1 := deliveryTo(t, r1, recP)
	require.Equal(t, 2, d1.AttemptCount)
	require.Equal(t, "FAILED", d1.Attempts[0].Status)
	require.Equal(t, "SUCCEEDED", d1.Attempts[1].Status)
	require.Equal(t, 1, deliveryTo(t, r2, recP).AttemptCount)
	require.Equal(t, 3, paused.count())
}

// Concurrent retries of one delivery: exactly one wins, and only it is paid for.
func TestConcurrentRetriesCreateOneDelivery(t *testing.T) {
	t.Parallel()
	env, tn, srv := startFast(t, 10)
	good := newHook(t, always(http.StatusOK))
	rec := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": good.URL})
	reqID := env.Send(srv.Key, "", `{}`)
	r := waitRequest(t, env, tn.Member, reqID, "delivered", func(r requestView) bool { return r.Status == "DELIVERED" })
	d := deliveryTo(t, r, rec)

	const n = 6
	codes := make(chan string, n)
	body, _ := json.Marshal(map[string]any{"query": `mutation($id: ID!){ retryDelivery(id: $id){ id } }`, "variables": map[string]any{"id": d.ID}})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, env.Server.URL+"/graphql", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+tn.Member)
			resp, err := env.Server.Client().Do(req)
			if err != nil {
				codes <- err.Error()
				return
			}
			defer resp.Body.Close()
			var out relaytest.Response
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
				codes <- err.Error()
				return
			}
			codes <- out.Code()
		})
	}
	wg.Wait()
	close(codes)
	won := 0
	for c := range codes {
		switch c {
		case "":
			won++
		case "CONFLICT":
		default:
			t.Errorf("unexpected answer %q", c)
		}
	}
	require.Equal(t, 1, won)
	r = waitRequest(t, env, tn.Member, reqID, "retry delivered", func(r requestView) bool {
		return len(r.Deliveries) == 2 && r.Status == "DELIVERED"
	})
	require.Equal(t, 8, balance(t, env, tn))
	require.Equal(t, 2, good.count())
}
