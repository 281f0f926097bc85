package bulk_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/bulk"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/bulkjobitem"
	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/ledgerentry"
	"github.com/adal-relay/adal/ent/tenant"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/viewer"
)

const wait = 30 * time.Second

// receiver is a recipient whose answer the test sets: a status code, or holding every request until released.
type receiver struct {
	*httptest.Server
	code     atomic.Int32
	hold     atomic.Bool
	release  chan struct{}
	once     sync.Once
	inFlight atomic.Int32
}

func newReceiver(t *testing.T, code int) *receiver {
	r := &receiver{release: make(chan struct{})}
	r.code.Store(int32(code))
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.hold.Load() {
			r.inFlight.Add(1)
			<-r.release
			r.inFlight.Add(-1)
		}
		w.WriteHeader(int(r.code.Load()))
	}))
	t.Cleanup(r.Close)
	t.Cleanup(r.open) // before the server closes: a held attempt must end for the process to stop
	return r
}

// open lets held requests go and stops holding new ones.
func (r *receiver) open() {
	r.hold.Store(false)
	r.once.Do(func() { close(r.release) })
}

type fixture struct {
	t   *testing.T
	env *relaytest.Env
	tn  relaytest.Tenant
	srv relaytest.Server
}

func setup(t *testing.T, credits int, configure ...func(*relay.Config)) fixture {
	env, tn, srv := relaytest.StartWithServer(t, credits, configure...)
	return fixture{t: t, env: env, tn: tn, srv: srv}
}

// recipient creates a direct recipient of one attempt per delivery (so a failure is final at once).
func (f fixture) recipient(url string) int {
	id := relaytest.RowID(f.t, f.env.NewRecipient(f.tn, f.srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": url, "maxAttempts": 1}))
	return id
}

// settled waits until n deliveries are final and returns every delivery.
func (f fixture) settled(n int) []*ent.Delivery {
	f.t.Helper()
	var ds []*ent.Delivery
	relaytest.Eventually(f.t, wait, fmt.Sprintf("%d deliveries to be final", n), func() bool {
		ds = f.env.Deliveries(entdelivery.StatusIn(entdelivery.StatusFAILED, entdelivery.StatusSUCCEEDED, entdelivery.StatusCANCELED))
		return len(ds) >= n
	})
	require.Len(f.t, ds, n)
	return ds
}

// failedOnce accepts n requests for a recipient of its own, whose receiver fails their one attempt, and waits
// until they are final; the receiver answers 200 OK from then on, so a retry succeeds. It returns the receiver
// and every delivery.
func (f fixture) failedOnce(n int) (*receiver, []*ent.Delivery) {
	f.t.Helper()
	rcv := newReceiver(f.t, http.StatusInternalServerError)
	f.recipient(rcv.URL)
	for range n {
		f.env.Accept(f.srv.Key)
	}
	ds := f.settled(n)
	rcv.code.Store(http.StatusOK)
	return rcv, ds
}

type plan struct{ Count, Credits, Balance, MaxCount int }

type job struct {
	ID, Status, Kind, ErrorMessage string
	Total, Done, Failed            int
	CreditsSpent                   int
	FinishedAt                     *string
	Filter                         struct {
		ServerID    string
		RecipientID *string
		Status      *string
		Search      *string
	}
}

const jobFields = `id status kind total done failed creditsSpent errorMessage finishedAt filter { serverId recipientId status search }`

// call sends token's operation on filter and returns what it answers as r, when it answers no errors.
func call[T any](f fixture, token, operation string, filter map[string]any) (T, relaytest.Response) {
	f.t.Helper()
	resp := f.env.GraphQL(token, operation, map[string]any{"f": filter})
	var out struct{ R T }
	if len(resp.Errors) == 0 {
		require.NoError(f.t, json.Unmarshal(resp.Data, &out))
	}
	return out.R, resp
}

func (f fixture) plan(token, kind string, filter map[string]any) (plan, relaytest.Response) {
	f.t.Helper()
	return call[plan](f, token, `query($f: BulkFilter!){ r: planBulk`+kind+`(filter: $f){ count credits balance maxCount } }`, filter)
}

func (f fixture) mustPlan(kind string, filter map[string]any) plan {
	f.t.Helper()
	p, resp := f.plan(f.tn.Member, kind, filter)
	require.Empty(f.t, resp.Errors)
	return p
}

func (f fixture) start(token, kind string, filter map[string]any) (job, relaytest.Response) {
	f.t.Helper()
	return call[job](f, token, `mutation($f: BulkFilter!){ r: bulk`+kind+`(filter: $f){ `+jobFields+` } }`, filter)
}

func (f fixture) mustStart(kind string, filter map[string]any) job {
	f.t.Helper()
	j, resp := f.start(f.tn.Member, kind, filter)
	require.Empty(f.t, resp.Errors)
	return j
}

// windowHeld starts a retry job over 20 failed deliveries (failedOnce) whose receiver holds every request, and
// waits until it holds a window of retries. It returns the receiver, every delivery and the job.
func (f fixture) windowHeld() (*receiver, []*ent.Delivery, job) {
	f.t.Helper()
	rcv, originals := f.failedOnce(20)
	rcv.hold.Store(true)
	j := f.mustStart("Retry", map[string]any{"serverId": f.srv.ID})
	relaytest.Eventually(f.t, wait, "the recipient to hold a window of retries", func() bool {
		return rcv.inFlight.Load() == bulk.DefaultWindow
	})
	return rcv, originals, j
}

func (f fixture) job(id string) job {
	f.t.Helper()
	var out struct{ BulkJob job }
	f.env.MustGraphQL(f.tn.Member, `query($id: ID!){ bulkJob(id: $id){ `+jobFields+` } }`, map[string]any{"id": id}, &out)
	return out.BulkJob
}

func (f fixture) waitJob(id, status string) job {
	f.t.Helper()
	var j job
	relaytest.Eventually(f.t, wait, "job "+id+" to be "+status, func() bool {
		j = f.job(id)
		return j.Status == status
	})
	return j
}

// checkLedger requires the tenant's balance to be the sum of its ledger, and returns the MANUAL_RETRY
// entries' references.
func (f fixture) checkLedger() (refs []string, balance int64) {
	f.t.Helper()
	ctx := viewer.SystemContext(f.t.Context())
	id := relaytest.RowID(f.t, f.tn.ID)
	var sum int64
	for _, e := range f.env.DB.Client.LedgerEntry.Query().Where(ledgerentry.TenantID(id)).AllX(ctx) {
		sum += e.Amount
		if e.Reason == ledgerentry.ReasonMANUAL_RETRY {
			require.EqualValues(f.t, -1, e.Amount)
			refs = append(refs, e.Reference)
		}
	}
	balance = f.env.DB.Client.Tenant.Query().Where(tenant.ID(id)).OnlyX(ctx).CreditBalance
	require.Equal(f.t, sum, balance, "the balance is the sum of the ledger")
	return refs, balance
}

// checkRetriedOnce requires each of originals to be superseded by exactly one MANUAL_RETRY delivery of its
// request to its recipient, paid for by exactly one ledger entry naming it, and nothing else to be retried.
func (f fixture) checkRetriedOnce(originals []*ent.Delivery) {
	f.t.Helper()
	all := f.env.Deliveries()
	retries := map[[2]int]int{}
	for _, d := range all {
		if d.Trigger == entdelivery.TriggerMANUAL_RETRY {
			retries[[2]int{d.RequestID, d.RecipientID}]++
		}
	}
	want := map[string]bool{}
	for _, o := range originals {
		require.Equal(f.t, 1, retries[[2]int{o.RequestID, o.RecipientID}], "delivery %d retried once", o.ID)
		want[fmt.Sprintf("delivery:%d", o.ID)] = true
		d := f.env.Deliveries(entdelivery.ID(o.ID))[0]
		require.True(f.t, d.Superseded, "delivery %d superseded", o.ID)
	}
	n := 0
	for _, c := range retries {
		n += c
	}
	require.Equal(f.t, len(originals), n, "no other delivery retried")
	refs, _ := f.checkLedger()
	require.Len(f.t, refs, len(originals), "one debit per retry")
	for _, ref := range refs {
		require.True(f.t, want[ref], "debit %s names a retried delivery", ref)
		delete(want, ref)
	}
}

func ids(ds []*ent.Delivery) []int {
	out := make([]int, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

// The dry run counts what bulkRetry then retries: each matched delivery once, 1 credit each, debited once, the
// ledger balanced; deliveries the filter leaves out are untouched. Progress streams over bulkJobUpdated until
// the job ends.
func TestBulkRetryDoesWhatItsDryRunSaid(t *testing.T) {
	t.Parallel()
	f := setup(t, 100)
	failing := newReceiver(t, http.StatusInternalServerError)
	fine := newReceiver(t, http.StatusOK)
	bad := f.recipient(failing.URL)
	f.recipient(fine.URL)
	for i := range 12 {
		f.env.Send(f.srv.Key, "", fmt.Sprintf(`{"n":%d}`, i))
	}
	all := f.settled(24)
	var originals []*ent.Delivery
	for _, d := range all {
		if d.RecipientID == bad {
			require.Equal(t, entdelivery.StatusFAILED, d.Status)
			originals = append(originals, d)
		}
	}
	filter := map[string]any{"serverId": f.srv.ID, "status": "FAILED"}
	p := f.mustPlan("Retry", filter)
	require.Equal(t, plan{Count: 12, Credits: 12, Balance: 100 - 12, MaxCount: bulk.DefaultMaxDeliveries}, p)
	require.Equal(t, 24, f.mustPlan("Retry", map[string]any{"serverId": f.srv.ID}).Count, "without status: every final delivery")

	failing.code.Store(http.StatusOK)
	j := f.mustStart("Retry", filter)
	require.Equal(t, "RETRY", j.Kind)
	require.Equal(t, p.Count, j.Total)
	require.Equal(t, f.srv.ID, j.Filter.ServerID)
	require.Equal(t, "FAILED", *j.Filter.Status)
	sub := f.env.Subscribe(f.tn.Member, `subscription($id: ID!){ bulkJobUpdated(id: $id){ status done creditsSpent } }`, map[string]any{"id": j.ID})

	done := f.waitJob(j.ID, "SUCCEEDED")
	require.Equal(t, 12, done.Done)
	require.Zero(t, done.Failed)
	require.Equal(t, 12, done.CreditsSpent)
	require.NotNil(t, done.FinishedAt)
	f.checkRetriedOnce(originals)
	_, balance := f.checkLedger()
	require.EqualValues(t, 100-12-12, balance)

	// The stream gave the job as it stood, then its progress, never backwards, and ended with it.
	last := -1
	deadline := time.After(wait)
	for {
		var msg relaytest.Response
		var ok bool
		select {
		case msg, ok = <-sub.Messages:
		case <-deadline:
			t.Fatal("the stream did not end with the job")
		}
		if !ok {
			break
		}
		require.Empty(t, msg.Errors)
		var out struct {
			BulkJobUpdated struct {
				Status             string
				Done, CreditsSpent int
			}
		}
		require.NoError(t, json.Unmarshal(msg.Data, &out))
		require.GreaterOrEqual(t, out.BulkJobUpdated.Done, last)
		last = out.BulkJobUpdated.Done
		require.Equal(t, out.BulkJobUpdated.Done, out.BulkJobUpdated.CreditsSpent)
		if out.BulkJobUpdated.Status != "RUNNING" {
			require.Equal(t, "SUCCEEDED", out.BulkJobUpdated.Status)
			require.Equal(t, 12, last)
		}
	}
	require.Equal(t, 12, last, "the stream ends with the finished job")

	// The retries succeeded: nothing FAILED is left to retry, and the job's items are gone.
	require.Zero(t, f.mustPlan("Retry", filter).Count)
	require.Zero(t, f.env.DB.Client.BulkJobItem.Query().CountX(viewer.SystemContext(t.Context())))
}

// A retry job debits as it goes and stops cleanly when the tenant's credits run out: as many retries as there
// were credits, each paid once, the ledger balanced, the rest untouched.
func TestBulkRetryStopsAtZeroCredits(t *testing.T) {
	t.Parallel()
	f := setup(t, 10)
	_, originals := f.failedOnce(7) // 3 credits left
	p := f.mustPlan("Retry", map[string]any{"serverId": f.srv.ID})
	require.Equal(t, 7, p.Count)
	require.Equal(t, 3, p.Balance)

	j := f.mustStart("Retry", map[string]any{"serverId": f.srv.ID})
	j = f.waitJob(j.ID, "STOPPED_NO_CREDITS")
	require.Equal(t, 3, j.Done)
	require.Equal(t, 3, j.CreditsSpent)
	require.Zero(t, j.Failed)
	require.Contains(t, j.ErrorMessage, "credits")
	require.NotNil(t, j.FinishedAt)
	f.checkRetriedOnce(originals[:3]) // in delivery order
	_, balance := f.checkLedger()
	require.Zero(t, balance)
	for _, d := range f.env.Deliveries(entdelivery.IDIn(ids(originals[3:])...)) {
		require.False(t, d.Superseded)
	}
}

// bulkCancel cancels the pending deliveries the filter matches, and only those, free of charge.
func TestBulkCancel(t *testing.T) {
	t.Parallel()
	f := setup(t, 100)
	rcv := newReceiver(t, http.StatusOK)
	parked := f.recipient(rcv.URL)
	other := f.recipient(rcv.URL)
	for _, id := range []int{parked, other} {
		f.env.MustGraphQL(f.tn.Owner, `mutation($id: ID!){ pauseRecipient(id: $id){ id } }`, map[string]any{"id": id}, nil)
	}
	for range 5 {
		f.env.Accept(f.srv.Key)
	}
	filter := map[string]any{"serverId": f.srv.ID, "recipientId": parked}
	p := f.mustPlan("Cancel", filter)
	require.Equal(t, 5, p.Count)
	require.Zero(t, p.Credits)
	_, before := f.checkLedger()

	j := f.mustStart("Cancel", filter)
	require.Equal(t, "CANCEL", j.Kind)
	j = f.waitJob(j.ID, "SUCCEEDED")
	require.Equal(t, 5, j.Done)
	require.Zero(t, j.CreditsSpent)
	require.Len(t, f.env.Deliveries(entdelivery.RecipientID(parked), entdelivery.StatusEQ(entdelivery.StatusCANCELED)), 5)
	require.Len(t, f.env.Deliveries(entdelivery.RecipientID(other), entdelivery.StatusEQ(entdelivery.StatusPENDING)), 5)
	_, after := f.checkLedger()
	require.Equal(t, before, after)
	require.Zero(t, f.mustPlan("Cancel", filter).Count)
}

// Each field of the filter narrows what the dry run counts, and a job acts on exactly what its dry run
// counted.
func TestBulkFilterFields(t *testing.T) {
	t.Parallel()
	f := setup(t, 200)
	r500 := newReceiver(t, http.StatusInternalServerError)
	r404 := newReceiver(t, http.StatusNotFound)
	ok := newReceiver(t, http.StatusOK)
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close() // connection refused from now on
	a, b, c, d := f.recipient(r500.URL), f.recipient(r404.URL), f.recipient(deadURL), f.recipient(ok.URL)
	var times []string
	for i := range 6 {
		body := `{"kind":"alpha"}`
		if i%2 == 1 {
			body = `{"kind":"beta"}`
		}
		f.env.Send(f.srv.Key, "", body)
		var out struct {
			Requests struct {
				Edges []struct{ Node struct{ ReceivedAt string } }
			}
		}
		f.env.MustGraphQL(f.tn.Member, `query($s: ID!){ requests(serverId: $s, first: 1){ edges { node { receivedAt } } } }`,
			map[string]any{"s": f.srv.ID}, &out)
		times = append(times, out.Requests.Edges[0].Node.ReceivedAt)
	}
	f.settled(24)
	// One of d's deliveries is retried by hand and canceled while pending (the recipient paused meanwhile).
	f.env.MustGraphQL(f.tn.Owner, `mutation($id: ID!){ pauseRecipient(id: $id){ id } }`, map[string]any{"id": d}, nil)
	first := f.env.Deliveries(entdelivery.RecipientID(d))[0]
	var retried struct{ RetryDelivery struct{ ID string } }
	f.env.MustGraphQL(f.tn.Member, `mutation($id: ID!){ retryDelivery(id: $id){ id } }`, map[string]any{"id": first.ID}, &retried)
	f.env.MustGraphQL(f.tn.Member, `mutation($id: ID!){ cancelDelivery(id: $id){ id } }`, map[string]any{"id": retried.RetryDelivery.ID}, nil)

	server := func(extra map[string]any) map[string]any {
		m := map[string]any{"serverId": f.srv.ID}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	for _, c := range []struct {
		name   string
		filter map[string]any
		want   int
	}{
		{"server", server(nil), 24}, // the superseded one is replaced by its CANCELED retry
		{"recipient", server(map[string]any{"recipientId": a}), 6},
		{"status FAILED", server(map[string]any{"status": "FAILED"}), 18},
		{"status SUCCEEDED", server(map[string]any{"status": "SUCCEEDED"}), 5},
		{"status CANCELED", server(map[string]any{"status": "CANCELED"}), 1},
		{"received after", server(map[string]any{"receivedAfter": times[4]}), 8},
		{"received before", server(map[string]any{"receivedBefore": times[1]}), 4},
		{"received range", server(map[string]any{"receivedAfter": times[1], "receivedBefore": times[3]}), 8},
		{"http status 500-599", server(map[string]any{"httpStatusMin": 500}), 6},
		{"http status 400-499", server(map[string]any{"httpStatusMin": 400, "httpStatusMax": 499}), 6},
		{"http status 200", server(map[string]any{"httpStatusMax": 299}), 5},
		{"error kind", server(map[string]any{"errorKind": "CONNECTION"}), 6},
		{"error kind and status", server(map[string]any{"errorKind": "HTTP_STATUS", "httpStatusMin": 404, "httpStatusMax": 404}), 6},
		{"search", server(map[string]any{"search": "ALPHA"}), 12},
		{"search and recipient", server(map[string]any{"search": "beta", "recipientId": c}), 3},
		{"recipient and status", server(map[string]any{"recipientId": b, "status": "SUCCEEDED"}), 0},
	} {
		require.Equal(t, c.want, f.mustPlan("Retry", c.filter).Count, c.name)
	}

	// The job on one of them acts on exactly what the dry run counted.
	filter := server(map[string]any{"errorKind": "CONNECTION", "search": "alpha"})
	require.Equal(t, 3, f.mustPlan("Retry", filter).Count)
	originals := f.env.Deliveries(entdelivery.RecipientID(c))
	var matched []*ent.Delivery
	for _, o := range originals {
		req := f.env.DB.Client.Request.GetX(viewer.SystemContext(t.Context()), o.RequestID)
		if string(req.Body) == `{"kind":"alpha"}` {
			matched = append(matched, o)
		}
	}
	require.Len(t, matched, 3)
	j := f.mustStart("Retry", filter)
	require.Equal(t, 3, j.Total)
	f.waitJob(j.ID, "SUCCEEDED")
	before := len(f.env.Deliveries(entdelivery.TriggerEQ(entdelivery.TriggerMANUAL_RETRY)))
	require.Equal(t, 1+3, before, "the manual retry and the job's three")
	for _, o := range matched {
		require.True(t, f.env.Deliveries(entdelivery.ID(o.ID))[0].Superseded)
	}
}

// Bad filters are refused with INVALID_INPUT, and another tenant's server, recipient or job is NOT_FOUND to
// every operation; a tenant lists only its own jobs.
func TestBulkRefusesBadFiltersAndOtherTenants(t *testing.T) {
	t.Parallel()
	f := setup(t, 100)
	rcv := newReceiver(t, http.StatusInternalServerError)
	rid := f.recipient(rcv.URL)
	f.env.Accept(f.srv.Key)
	f.settled(1)
	mine := f.mustStart("Retry", map[string]any{"serverId": f.srv.ID})

	other := f.env.NewTenant("other", relaytest.PlanLimits{Credits: 100})
	otherSrv := f.env.NewServer(other, "theirs", nil)
	for name, filter := range map[string]map[string]any{
		"retry from PENDING":    {"serverId": f.srv.ID, "status": "PENDING"},
		"http status range":     {"serverId": f.srv.ID, "httpStatusMin": 500, "httpStatusMax": 400},
		"http status too large": {"serverId": f.srv.ID, "httpStatusMax": 700},
		"received range":        {"serverId": f.srv.ID, "receivedAfter": "2030-01-02T00:00:00Z", "receivedBefore": "2030-01-01T00:00:00Z"},
		"short search":          {"serverId": f.srv.ID, "search": "ab"},
	} {
		_, resp := f.plan(f.tn.Member, "Retry", filter)
		require.Equal(t, "INVALID_INPUT", resp.Code(), name)
		_, resp = f.start(f.tn.Member, "Retry", filter)
		require.Equal(t, "INVALID_INPUT", resp.Code(), name)
	}
	_, resp := f.start(f.tn.Member, "Cancel", map[string]any{"serverId": f.srv.ID, "status": "FAILED"})
	require.Equal(t, "INVALID_INPUT", resp.Code())
	_, resp = f.plan(f.tn.Member, "Retry", map[string]any{"serverId": otherSrv.ID, "recipientId": rid})
	require.Equal(t, "NOT_FOUND", resp.Code(), "a recipient of another server")

	for _, kind := range []string{"Retry", "Cancel"} {
		_, resp := f.plan(other.Member, kind, map[string]any{"serverId": f.srv.ID})
		require.Equal(t, "NOT_FOUND", resp.Code(), kind)
		_, resp = f.start(other.Member, kind, map[string]any{"serverId": f.srv.ID})
		require.Equal(t, "NOT_FOUND", resp.Code(), kind)
		_, resp = f.plan(other.Member, kind, map[string]any{"serverId": otherSrv.ID, "recipientId": rid})
		require.Equal(t, "NOT_FOUND", resp.Code(), kind)
	}
	resp = f.env.GraphQL(other.Member, `mutation($id: ID!){ cancelBulkJob(id: $id){ id } }`, map[string]any{"id": mine.ID})
	require.Equal(t, "NOT_FOUND", resp.Code())
	resp = f.env.GraphQL(other.Member, `query($id: ID!){ bulkJob(id: $id){ id } }`, map[string]any{"id": mine.ID})
	require.Equal(t, "NOT_FOUND", resp.Code())
	var list struct{ BulkJobs struct{ TotalCount int } }
	f.env.MustGraphQL(other.Member, `{ bulkJobs { totalCount } }`, nil, &list)
	require.Zero(t, list.BulkJobs.TotalCount)
	f.env.MustGraphQL(f.tn.Member, `{ bulkJobs { totalCount } }`, nil, &list)
	require.Equal(t, 1, list.BulkJobs.TotalCount)
	sub := f.env.Subscribe(other.Member, `subscription($id: ID!){ bulkJobUpdated(id: $id){ id } }`, map[string]any{"id": mine.ID})
	require.Equal(t, "NOT_FOUND", sub.Next(wait).Code())

	// The job was not disturbed: it retries its one delivery.
	require.Equal(t, 1, f.waitJob(mine.ID, "SUCCEEDED").Done)
}

// A job keeps no more than its window of retries to a recipient waiting for their first attempt: with the
// recipient holding every request, it stops at the window. cancelBulkJob then ends it: nothing more is retried.
func TestBulkRetryFollowsTheRecipientsPaceAndCancels(t *testing.T) {
	t.Parallel()
	f := setup(t, 100)
	rcv, _, j := f.windowHeld()
	require.Equal(t, bulk.DefaultWindow, f.job(j.ID).Done, "no more retries than the window while none is answered")

	resp := f.env.GraphQL(f.tn.Member, `mutation($id: ID!){ cancelBulkJob(id: $id){ status finishedAt } }`, map[string]any{"id": j.ID})
	require.Empty(t, resp.Errors)
	require.Contains(t, string(resp.Data), `"CANCELED"`)
	resp = f.env.GraphQL(f.tn.Member, `mutation($id: ID!){ cancelBulkJob(id: $id){ status } }`, map[string]any{"id": j.ID})
	require.Equal(t, "CONFLICT", resp.Code(), "a job that ended cannot be canceled")
	rcv.open()
	relaytest.Eventually(t, wait, "the held retries to succeed", func() bool {
		return len(f.env.Deliveries(entdelivery.StatusEQ(entdelivery.StatusSUCCEEDED))) == bulk.DefaultWindow
	})
	ended := f.job(j.ID)
	require.Equal(t, "CANCELED", ended.Status)
	require.Equal(t, bulk.DefaultWindow, ended.Done)
	ctx := viewer.SystemContext(t.Context())
	jobID := relaytest.RowID(t, j.ID)
	require.Zero(t, f.env.DB.Client.BulkJobItem.Query().Where(bulkjobitem.JobID(jobID)).CountX(ctx), "nothing left to act on")
	require.Len(t, f.env.Deliveries(entdelivery.TriggerEQ(entdelivery.TriggerMANUAL_RETRY)), bulk.DefaultWindow)
	refs, _ := f.checkLedger()
	require.Len(t, refs, bulk.DefaultWindow)
}

// A job whose runner stops mid-job (its process died: the lease stays until it lapses) is taken over by another
// runner — on PostgreSQL in another process — once the lease lapsed, which goes on from the last batch
// committed: every delivery retried exactly once, each paid once.
func TestBulkRetryResumesAfterItsRunnerDies(t *testing.T) {
	t.Parallel()
	f := setup(t, 100)
	rcv, originals, j := f.windowHeld()
	f.env.Relay.BulkRunner.Stop()
	require.Equal(t, bulk.DefaultWindow, f.job(j.ID).Done)

	// The successor runs in another process when the database is shared, else in this one; its clock is past
	// the dead runner's lease, which it must wait for.
	successor := f.env
	if f.env.DB.Postgres() {
		successor = f.env.Peer(t)
		successor.Relay.BulkRunner.Stop() // only the runner under test takes the job
	}
	later := func() time.Time { return time.Now().UTC().Add(bulk.DefaultLease + time.Second) }
	runner, err := bulk.NewRunner(bulk.RunnerConfig{
		DB: successor.Relay.DB, Delivery: successor.Relay.Delivery, Events: successor.Relay.Events,
		Owner: "successor", Now: later,
	})
	require.NoError(t, err)
	require.NoError(t, runner.Start(successor.Ctx))
	t.Cleanup(runner.Stop)
	rcv.open()

	done := f.waitJob(j.ID, "SUCCEEDED")
	require.Equal(t, 20, done.Done)
	require.Equal(t, 20, done.CreditsSpent)
	require.Zero(t, done.Failed)
	f.checkRetriedOnce(originals)
}
