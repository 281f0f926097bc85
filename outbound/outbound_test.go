package outbound_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/ledgerentry"
	"github.com/adal-relay/adal/ent/outboundattempt"
	"github.com/adal-relay/adal/ent/outboundjob"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/outbound"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/viewer"
)

// testBundle is one running process with a tenant and a target that answers 200 and counts its calls.
type testBundle struct {
	env    *relaytest.Env
	tenant relaytest.Tenant
	target *httptest.Server
	calls  atomic.Int64
}

func setup(t *testing.T, limits relaytest.PlanLimits, configure ...func(*relay.Config)) *testBundle {
	t.Helper()
	b := &testBundle{env: relaytest.Start(t, configure...)}
	b.tenant = b.env.NewTenant("acme", limits)
	b.target = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		b.calls.Add(1)
	}))
	t.Cleanup(b.target.Close)
	return b
}

type jobView struct {
	ID             string
	Status         string
	IdempotencyKey *string
	AttemptCount   int
	DuplicateOf    *struct{ ID string }
}

const sendMutation = `mutation($in: SendOutboundInput!){ sendOutbound(input: $in){
	id status idempotencyKey attemptCount duplicateOf { id } } }`

// send submits a job and returns it, or the error code.
func (b *testBundle) send(token string, in map[string]any) (jobView, string) {
	b.env.T.Helper()
	resp := b.env.GraphQL(token, sendMutation, map[string]any{"in": in})
	if code := resp.Code(); code != "" {
		return jobView{}, code
	}
	var out struct{ SendOutbound jobView }
	require.NoError(b.env.T, json.Unmarshal(resp.Data, &out))
	return out.SendOutbound, ""
}

func (b *testBundle) mustSend(in map[string]any) jobView {
	b.env.T.Helper()
	j, code := b.send(b.owner(), in)
	require.Empty(b.env.T, code)
	return j
}

// owner returns a fresh OWNER token of the tenant (sending is the owner's): tests that move the clock outlive
// the fixture's.
func (b *testBundle) owner() string {
	tid := relaytest.RowID(b.env.T, b.tenant.ID)
	return b.env.Token(viewer.Viewer{Role: viewer.Owner, TenantID: tid})
}

func (b *testBundle) job(t *testing.T, id string) *ent.OutboundJob {
	t.Helper()
	n := relaytest.RowID(t, id)
	j, err := b.env.DB.Client.OutboundJob.Query().Where(outboundjob.ID(n)).WithAttempts().
		Only(viewer.SystemContext(t.Context()))
	require.NoError(t, err)
	return j
}

func (b *testBundle) waitStatus(t *testing.T, id string, want outboundjob.Status) {
	t.Helper()
	relaytest.Eventually(t, 20*time.Second, "job "+id+" "+string(want), func() bool {
		return b.job(t, id).Status == want
	})
}

// outboundLedger lists the tenant's OUTBOUND ledger entries.
func (b *testBundle) outboundLedger(t *testing.T) []*ent.LedgerEntry {
	t.Helper()
	tid := relaytest.RowID(t, b.tenant.ID)
	es, err := b.env.DB.Client.LedgerEntry.Query().
		Where(ledgerentry.TenantID(tid), ledgerentry.ReasonEQ(ledgerentry.ReasonOUTBOUND)).
		All(viewer.SystemContext(t.Context()))
	require.NoError(t, err)
	return es
}

func (b *testBundle) balance(t *testing.T) int64 {
	t.Helper()
	tid := relaytest.RowID(t, b.tenant.ID)
	tn, err := b.env.DB.Client.Tenant.Get(viewer.SystemContext(t.Context()), tid)
	require.NoError(t, err)
	return tn.CreditBalance
}

// barrier sends a job without key and waits for it: the scheduler takes due jobs in due order, so once this
// one ran, anything submitted before it that were runnable ran too.
func (b *testBundle) barrier(t *testing.T) {
	t.Helper()
	j := b.mustSend(map[string]any{"url": b.target.URL + "/barrier"})
	b.waitStatus(t, j.ID, outboundjob.StatusSUCCEEDED)
}

func TestSendAnswersAtOnceAndCostsOneCredit(t *testing.T) {
	t.Parallel()
	b := setup(t, relaytest.PlanLimits{Credits: 5, RetentionDays: 3})
	j := b.mustSend(map[string]any{"url": b.target.URL, "bodyBase64": "AAEC/w==", "headers": []map[string]any{
		{"name": "x-b", "value": "2"}, {"name": "X-A", "value": "1"}, {"name": "x-b", "value": "3"},
	}})
	require.Equal(t, "PENDING", j.Status)
	require.Nil(t, j.DuplicateOf)
	require.Nil(t, j.IdempotencyKey)

	es := b.outboundLedger(t)
	require.Len(t, es, 1)
	require.Equal(t, int64(-1), es[0].Amount)
	require.Equal(t, "outbound:"+j.ID, es[0].Reference)
	require.Equal(t, int64(4), b.balance(t))

	b.waitStatus(t, j.ID, outboundjob.StatusSUCCEEDED)
	var out struct {
		Node struct {
			Method, Body, BodyBase64 string
			BodySize, MaxAttempts    int
			CreatedAt, ExpiresAt     time.Time
			Headers                  []struct{ Name, Value string }
			Attempts                 []struct {
				Number int
				Status string
			}
		}
	}
	b.env.MustGraphQL(b.tenant.Member, `query($id: ID!){ node(id: $id){ ... on OutboundJob {
		method body bodyBase64 bodySize maxAttempts createdAt expiresAt headers { name value } attempts { number status } } } }`,
		map[string]any{"id": j.ID}, &out)
	n := out.Node
	require.Equal(t, "POST", n.Method)
	require.Equal(t, "AAEC/w==", n.BodyBase64)
	require.Equal(t, 4, n.BodySize)
	require.Equal(t, 10, n.MaxAttempts)
	require.Equal(t, 3*24*time.Hour, n.ExpiresAt.Sub(n.CreatedAt), "retention from the plan")
	require.Equal(t, []struct{ Name, Value string }{{"X-A", "1"}, {"X-B", "2"}, {"X-B", "3"}}, n.Headers)
	require.Len(t, n.Attempts, 1)
	require.Equal(t, "SUCCEEDED", n.Attempts[0].Status)
	require.Equal(t, int64(1), b.calls.Load())
}

func TestSendValidatesInput(t *testing.T) {
	t.Parallel()
	b := setup(t, relaytest.PlanLimits{Credits: 5})
	for name, in := range map[string]map[string]any{
		"relative URL":      {"url": "/hook"},
		"not http":          {"url": "ftp://example.com/x"},
		"no host":           {"url": "http:///x"},
		"bad method":        {"url": b.target.URL, "method": "GET /x"},
		"bad header name":   {"url": b.target.URL, "headers": []map[string]any{{"name": "X Y", "value": "1"}}},
		"header injection":  {"url": b.target.URL, "headers": []map[string]any{{"name": "X-Y", "value": "1\r\nX-Z: 2"}}},
		"reserved header":   {"url": b.target.URL, "headers": []map[string]any{{"name": "x-adal-attempt", "value": "9"}}},
		"hop-by-hop header": {"url": b.target.URL, "headers": []map[string]any{{"name": "Host", "value": "evil"}}},
		"two bodies":        {"url": b.target.URL, "body": "a", "bodyBase64": "YQ=="},
		"bad base64":        {"url": b.target.URL, "bodyBase64": "%%%"},
		"empty key":         {"url": b.target.URL, "idempotencyKey": " "},
		"key too long":      {"url": b.target.URL, "idempotencyKey": strings.Repeat("k", 256)},
	} {
		_, code := b.send(b.tenant.Owner, in)
		require.Equal(t, "INVALID_INPUT", code, name)
	}
	_, code := b.send("", map[string]any{"url": b.target.URL})
	require.Equal(t, "UNAUTHENTICATED", code)
	_, code = b.send(b.env.AdminToken(), map[string]any{"url": b.target.URL})
	require.Equal(t, "INVALID_INPUT", code, "operators have no tenant to send for")

	// The body limit, through the service (a GraphQL request that large is refused before it is parsed).
	svc := outbound.New(outbound.Config{Billing: b.env.Relay.Billing, Dialect: b.env.DB.Dialect})
	tid := relaytest.RowID(t, b.tenant.ID)
	ctx := viewer.NewContext(t.Context(), viewer.Viewer{Role: viewer.Owner, TenantID: tid})
	_, err := svc.Send(ctx, b.env.DB.Client, outbound.SendInput{URL: b.target.URL, Body: make([]byte, outbound.DefaultMaxBody+1)})
	require.Equal(t, fault.InvalidInput, fault.KindOf(err))
	_, err = svc.Send(ctx, b.env.DB.Client, outbound.SendInput{URL: b.target.URL, Body: make([]byte, outbound.DefaultMaxBody)})
	require.NoError(t, err)

	require.Equal(t, int64(4), b.balance(t), "only the valid job was charged")
}

func TestInsufficientCreditsStoresNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, relaytest.PlanLimits{Credits: 1})
	first := b.mustSend(map[string]any{"url": b.target.URL, "idempotencyKey": "k1"})

	_, code := b.send(b.tenant.Owner, map[string]any{"url": b.target.URL})
	require.Equal(t, "INSUFFICIENT_CREDITS", code)
	_, code = b.send(b.tenant.Owner, map[string]any{"url": b.target.URL, "idempotencyKey": "k2"})
	require.Equal(t, "INSUFFICIENT_CREDITS", code)

	// A duplicate costs nothing, so it is recorded even at a zero balance.
	dup := b.mustSend(map[string]any{"url": b.target.URL, "idempotencyKey": "k1"})
	require.Equal(t, "DUPLICATE", dup.Status)
	require.Equal(t, first.ID, dup.DuplicateOf.ID)

	var out struct{ OutboundJobs struct{ TotalCount int } }
	b.env.MustGraphQL(b.tenant.Member, `{ outboundJobs { totalCount } }`, nil, &out)
	require.Equal(t, 2, out.OutboundJobs.TotalCount, "the refused submissions left nothing")
	require.Len(t, b.outboundLedger(t), 1)
	require.Zero(t, b.balance(t))

	// k2 was never taken: with credit it makes an original.
	tid := relaytest.RowID(t, b.tenant.ID)
	b.env.MustGraphQL(b.env.AdminToken(), `mutation($t: ID!){ grantCredits(tenantId: $t, amount: 1){ id } }`, map[string]any{"t": tid}, nil)
	j := b.mustSend(map[string]any{"url": b.target.URL, "idempotencyKey": "k2"})
	require.Equal(t, "PENDING", j.Status)
}

func TestSameKeyIsDuplicateNotExecutedNotCharged(t *testing.T) {
	t.Parallel()
	b := setup(t, relaytest.PlanLimits{Credits: 10})
	in := map[string]any{"url": b.target.URL, "body": "pay 10", "idempotencyKey": "pay-42"}
	first := b.mustSend(in)
	require.Equal(t, "PENDING", first.Status)
	require.Equal(t, "pay-42", *first.IdempotencyKey)
	b.waitStatus(t, first.ID, outboundjob.StatusSUCCEEDED)

	second := b.mustSend(in)
	require.Equal(t, "DUPLICATE", second.Status)
	require.NotEqual(t, first.ID, second.ID, "a new record")
	require.Equal(t, first.ID, second.DuplicateOf.ID)
	require.Zero(t, second.AttemptCount)

	// Another tenant's key space is its own.
	other := b.env.NewTenant("other", relaytest.PlanLimits{Credits: 10})
	theirs, code := b.send(other.Owner, in)
	require.Empty(t, code)
	require.Equal(t, "PENDING", theirs.Status)

	b.barrier(t)
	require.Equal(t, int64(3), b.calls.Load(), "the original, the other tenant's job and the barrier; never the duplicate")
	dup := b.job(t, second.ID)
	require.Equal(t, outboundjob.StatusDUPLICATE, dup.Status)
	require.Empty(t, dup.Edges.Attempts)
	require.Nil(t, dup.NextAttemptAt)
	require.Nil(t, dup.IdempotencyClaim, "only originals hold the key")

	es := b.outboundLedger(t)
	require.Len(t, es, 2, "the original and the barrier")
	refs := []string{es[0].Reference, es[1].Reference}
	require.Contains(t, refs, "outbound:"+first.ID)
	require.NotContains(t, refs, "outbound:"+second.ID)
	require.Equal(t, int64(8), b.balance(t))
}

// TestConcurrentSendsOfOneKeyExecuteOnce races 20 submissions of one key. On Postgres each runs in its own
// transaction on its own connection and the insert of all but one waits on the winner's; on SQLite they
// queue on the single writer.
func TestConcurrentSendsOfOneKeyExecuteOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, relaytest.PlanLimits{Credits: 100})
	const n = 20
	body, _ := json.Marshal(map[string]any{"query": sendMutation, "variables": map[string]any{"in": map[string]any{
		"url": b.target.URL, "idempotencyKey": "once",
	}}})
	results := make([]jobView, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = rawSend(b.env, b.tenant.Owner, body)
		})
	}
	close(start)
	wg.Wait()

	var originals []string
	dups := map[string]int{}
	for i := range n {
		require.NoError(t, errs[i])
		switch results[i].Status {
		case "PENDING", "IN_PROGRESS", "SUCCEEDED":
			originals = append(originals, results[i].ID)
		case "DUPLICATE":
			dups[results[i].DuplicateOf.ID]++
		default:
			t.Fatalf("unexpected status %q", results[i].Status)
		}
	}
	require.Len(t, originals, 1)
	require.Equal(t, map[string]int{originals[0]: n - 1}, dups)

	b.waitStatus(t, originals[0], outboundjob.StatusSUCCEEDED)
	b.barrier(t)
	require.Equal(t, int64(2), b.calls.Load(), "one execution of the key, plus the barrier")
	es := b.outboundLedger(t)
	require.Len(t, es, 2, "one charge for the key, plus the barrier")
	require.Equal(t, int64(98), b.balance(t))
}

func rawSend(env *relaytest.Env, token string, body []byte) (jobView, error) {
	req, err := http.NewRequest(http.MethodPost, env.Server.URL+"/graphql", bytes.NewReader(body))
	if err != nil {
		return jobView{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := env.Server.Client().Do(req)
	if err != nil {
		return jobView{}, err
	}
	defer resp.Body.Close()
	var out struct {
		Data   struct{ SendOutbound jobView }
		Errors []relaytest.GQLError
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return jobView{}, err
	}
	if len(out.Errors) > 0 {
		return jobView{}, fmt.Errorf("graphql: %+v", out.Errors)
	}
	return out.Data.SendOutbound, nil
}

func TestKeyIsFreeAgainAfterRetention(t *testing.T) {
	t.Parallel()
	clock := relaytest.NewClock(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	b := setup(t, relaytest.PlanLimits{Credits: 10, RetentionDays: 1}, clock.Use)
	ctx := viewer.SystemContext(t.Context())
	svc, client := b.env.Relay.Outbound, b.env.Relay.DB.Client
	in := map[string]any{"url": b.target.URL, "idempotencyKey": "nightly"}

	first := b.mustSend(in)
	b.waitStatus(t, first.ID, outboundjob.StatusSUCCEEDED)
	clock.Advance(time.Minute)
	dup := b.mustSend(in)
	require.Equal(t, "DUPLICATE", dup.Status)

	// The first job's retention ends; the purge has not come by yet, but the key is free already.
	clock.Advance(24*time.Hour - 30*time.Second)
	second := b.mustSend(in)
	require.Equal(t, "PENDING", second.Status)
	require.Nil(t, second.DuplicateOf)
	b.waitStatus(t, second.ID, outboundjob.StatusSUCCEEDED)
	require.Nil(t, b.job(t, first.ID).IdempotencyClaim, "the expired job gave its claim up")

	// The purge deletes the expired original with its attempts; its duplicate, retained a minute longer,
	// stays and no longer points anywhere.
	p, err := svc.PurgeExpired(ctx, client, clock.Now(), 1)
	require.NoError(t, err)
	require.Equal(t, outbound.Purged{Jobs: 1, Attempts: 1}, p)
	_, err = client.OutboundJob.Get(ctx, relaytest.RowID(t, first.ID))
	require.True(t, ent.IsNotFound(err))
	require.Zero(t, client.OutboundAttempt.Query().Where(outboundattempt.JobID(relaytest.RowID(t, first.ID))).CountX(ctx))
	d := b.job(t, dup.ID)
	require.Equal(t, outboundjob.StatusDUPLICATE, d.Status)
	require.Nil(t, d.DuplicateOfID)

	// The live holder of the key is the second job now.
	third := b.mustSend(in)
	require.Equal(t, "DUPLICATE", third.Status)
	require.Equal(t, second.ID, third.DuplicateOf.ID)

	// Once everything is purged, in batches, the key makes an original again.
	clock.Advance(48 * time.Hour)
	p, err = svc.PurgeExpired(ctx, client, clock.Now(), 2)
	require.NoError(t, err)
	require.Equal(t, outbound.Purged{Jobs: 3, Attempts: 1}, p)
	fourth := b.mustSend(in)
	require.Equal(t, "PENDING", fourth.Status)
	b.waitStatus(t, fourth.ID, outboundjob.StatusSUCCEEDED)
	require.Len(t, b.outboundLedger(t), 3, "first, second and fourth were charged")
}

func TestOutboundJobsAreTenantPrivate(t *testing.T) {
	t.Parallel()
	b := setup(t, relaytest.PlanLimits{Credits: 10})
	mine := b.mustSend(map[string]any{"url": b.target.URL, "idempotencyKey": "k"})
	b.waitStatus(t, mine.ID, outboundjob.StatusSUCCEEDED)
	other := b.env.NewTenant("other", relaytest.PlanLimits{Credits: 10})

	type page struct {
		OutboundJobs struct {
			TotalCount int
			Edges      []struct{ Node struct{ ID string } }
		}
	}
	var theirs page
	b.env.MustGraphQL(other.Owner, `{ outboundJobs(first: 10) { totalCount edges { node { id } } } }`, nil, &theirs)
	require.Zero(t, theirs.OutboundJobs.TotalCount)
	require.Empty(t, theirs.OutboundJobs.Edges)

	resp := b.env.GraphQL(other.Member, `query($id: ID!){ node(id: $id){ id } }`, map[string]any{"id": mine.ID})
	require.Equal(t, "NOT_FOUND", resp.Code())
	attemptID := b.job(t, mine.ID).Edges.Attempts[0].ID
	resp = b.env.GraphQL(other.Member, `query($id: ID!){ node(id: $id){ id } }`, map[string]any{"id": attemptID})
	require.Equal(t, "NOT_FOUND", resp.Code())

	var own page
	b.env.MustGraphQL(b.tenant.Member, `{ outboundJobs(first: 10, where: {status: SUCCEEDED}) { totalCount edges { node { id } } } }`, nil, &own)
	require.Equal(t, 1, own.OutboundJobs.TotalCount)
	require.Equal(t, mine.ID, own.OutboundJobs.Edges[0].Node.ID)

	var all page
	b.env.MustGraphQL(b.env.AdminToken(), `{ outboundJobs { totalCount } }`, nil, &all)
	require.Equal(t, 1, all.OutboundJobs.TotalCount, "operators see every tenant's")
}

// TestSendWithoutGraphQLTransaction calls the service directly, the way a background caller would: it opens
// its own transaction.
func TestSendWithoutGraphQLTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t, relaytest.PlanLimits{Credits: 2})
	svc := b.env.Relay.Outbound
	tid := relaytest.RowID(t, b.tenant.ID)
	ctx := viewer.NewContext(t.Context(), viewer.Viewer{Role: viewer.Owner, TenantID: tid})
	key := "direct"
	j1, err := svc.Send(ctx, b.env.DB.Client, outbound.SendInput{URL: b.target.URL, IdempotencyKey: &key})
	require.NoError(t, err)
	j2, err := svc.Send(ctx, b.env.DB.Client, outbound.SendInput{URL: b.target.URL, IdempotencyKey: &key})
	require.NoError(t, err)
	require.Equal(t, outboundjob.StatusDUPLICATE, j2.Status)
	require.Equal(t, j1.ID, *j2.DuplicateOfID)

	// A tenant cannot send for another tenant.
	other := b.env.NewTenant("other", relaytest.PlanLimits{Credits: 2})
	_, err = svc.Send(ctx, b.env.DB.Client, outbound.SendInput{TenantID: relaytest.RowID(t, other.ID), URL: b.target.URL})
	require.Error(t, err)
	require.Contains(t, []fault.Kind{fault.NotFound, fault.Forbidden}, fault.KindOf(err))
}
