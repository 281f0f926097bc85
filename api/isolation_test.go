package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/attempt"
	"github.com/adal-relay/adal/ent/bulkjob"
	"github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/ledgerentry"
	"github.com/adal-relay/adal/ent/outboundjob"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/ent/request"
	"github.com/adal-relay/adal/ent/server"
	"github.com/adal-relay/adal/ent/token"
	"github.com/adal-relay/adal/graph/generated"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/viewer"
)

// tenantFixture is one tenant with one of everything the API can name by ID. Recipients are CLI recipients
// with no CLI attached, so no background attempt ever changes the data while the test compares it.
type tenantFixture struct {
	relaytest.Tenant
	Server       relaytest.Server
	RcpActive    string // ACTIVE
	RcpPaused    string // PAUSED (set in the database)
	RcpDisabled  string // DISABLED (set in the database)
	Request      string // an accepted request; one delivery per recipient
	DelPending   string // PENDING delivery of Request to RcpActive
	DelCanceled  string // CANCELED delivery of Request to RcpPaused (set in the database)
	Attempt      string // an attempt of DelCanceled (inserted in the database)
	LedgerEntry  string // the tenant's newest ledger entry
	Outbound     string // a finished outbound job, sent with idempotency key OutboundKey
	OutboundTry  string // its attempt
	OutboundKey  string
	Token        string // a stored MEMBER token the owner minted
	BulkJob      string // a running bulk job whose lease a process holds (set in the database)
	TokensAll    []string
	OtherPlan    string // a second plan, selectable, that the tenant could switch to
	LedgerAll    []string
	RequestsAll  []string
	ServersAll   []string
	DeliveryAll  []string
	RecipientAll []string
	Alert        string // an alert subscription (made last: its hidden server is none of ServersAll)
	EventType    string // an event type with a schema
	RcpDirect    string // a DIRECT_HTTP recipient, added after Request
}

// newTenantFixture builds a tenant's data; target is where its outbound job goes (answers 200).
func newTenantFixture(t *testing.T, env *relaytest.Env, name, target string) tenantFixture {
	t.Helper()
	ctx := viewer.SystemContext(t.Context())
	db := env.DB.Client
	f := tenantFixture{Tenant: env.NewTenant(name, relaytest.PlanLimits{Credits: 50})}
	f.Server = env.NewServer(f.Tenant, name+"-srv", nil)
	f.RcpActive = env.NewRecipient(f.Tenant, f.Server.ID, map[string]any{"method": "CLI", "name": "active"})
	f.RcpPaused = env.NewRecipient(f.Tenant, f.Server.ID, map[string]any{"method": "CLI", "name": "paused"})
	f.RcpDisabled = env.NewRecipient(f.Tenant, f.Server.ID, map[string]any{"method": "CLI", "name": "disabled"})
	require.NoError(t, db.Recipient.UpdateOneID(relaytest.RowID(t, f.RcpPaused)).SetState(recipient.StatePAUSED).Exec(ctx))
	require.NoError(t, db.Recipient.UpdateOneID(relaytest.RowID(t, f.RcpDisabled)).SetState(recipient.StateDISABLED).Exec(ctx))

	f.Request = postOK(t, env, f.Server.Key, "/isolation?x=1", `{"tenant":"`+name+`"}`)
	dels, err := db.Delivery.Query().Where(delivery.RequestID(relaytest.RowID(t, f.Request))).Order(ent.Asc(delivery.FieldID)).All(ctx)
	require.NoError(t, err)
	require.Len(t, dels, 3, "one delivery per recipient")
	for _, d := range dels {
		switch strconv.Itoa(d.RecipientID) {
		case f.RcpActive:
			f.DelPending = strconv.Itoa(d.ID)
		case f.RcpPaused:
			f.DelCanceled = strconv.Itoa(d.ID)
			now := time.Now()
			require.NoError(t, db.Delivery.UpdateOneID(d.ID).SetStatus(delivery.StatusCANCELED).SetFinishedAt(now).Exec(ctx))
			a, err := db.Attempt.Create().SetTenantID(d.TenantID).SetDeliveryID(d.ID).SetNumber(1).SetExpiresAt(d.ExpiresAt).
				SetStartedAt(now.Add(-time.Second)).SetFinishedAt(now).SetStatus(attempt.StatusFAILED).
				SetHTTPStatus(500).SetDurationMs(1000).SetErrorKind(attempt.ErrorKindHTTP_STATUS).Save(ctx)
			require.NoError(t, err)
			f.Attempt = strconv.Itoa(a.ID)
		}
	}
	require.NotEmpty(t, f.DelPending)
	require.NotEmpty(t, f.DelCanceled)

	f.RcpDirect = env.NewRecipient(f.Tenant, f.Server.ID, map[string]any{"method": "DIRECT_HTTP", "name": "direct", "url": target})
	var et struct{ CreateEventType struct{ ID string } }
	env.MustGraphQL(f.Owner, `mutation { createEventType(input: {name: "order.paid", schema: "{\"type\": \"object\"}"}){ id } }`, nil, &et)
	f.EventType = et.CreateEventType.ID

	f.OutboundKey = name + "-idempotency"
	var ob struct{ SendOutbound struct{ ID string } }
	env.MustGraphQL(f.Owner, `mutation($url: String!, $key: String){ sendOutbound(input: {url: $url, body: "x", idempotencyKey: $key}){ id } }`,
		map[string]any{"url": target, "key": f.OutboundKey}, &ob)
	f.Outbound = ob.SendOutbound.ID
	relaytest.Eventually(t, 10*time.Second, "outbound job of "+name+" done", func() bool {
		j, err := db.OutboundJob.Query().Where(outboundjob.ID(relaytest.RowID(t, f.Outbound))).WithAttempts().Only(ctx)
		require.NoError(t, err)
		if j.Status != outboundjob.StatusSUCCEEDED || len(j.Edges.Attempts) != 1 {
			return false
		}
		f.OutboundTry = strconv.Itoa(j.Edges.Attempts[0].ID)
		return true
	})

	tid := relaytest.RowID(t, f.ID)
	led, err := db.LedgerEntry.Query().Where(ledgerentry.TenantID(tid)).Order(ent.Desc(ledgerentry.FieldID)).All(ctx)
	require.NoError(t, err)
	require.Len(t, led, 3, "plan grant, one accepted request, one outbound job")
	f.LedgerEntry = strconv.Itoa(led[0].ID)
	f.LedgerAll = idStrings(led, func(e *ent.LedgerEntry) int { return e.ID })

	var p struct{ CreatePlan struct{ ID string } }
	env.MustGraphQL(env.AdminToken(), `mutation($in: CreatePlanInput!){ createPlan(input: $in){ id } }`, map[string]any{"in": map[string]any{
		"name": name + "-other-plan", "monthlyCredits": 1, "retentionDays": 1, "maxServers": 10, "maxRecipientsPerServer": 10,
		"selectable": true,
	}}, &p)
	f.OtherPlan = p.CreatePlan.ID

	job, err := db.BulkJob.Create().SetTenantID(tid).SetServerID(relaytest.RowID(t, f.Server.ID)).SetKind(bulkjob.KindRETRY).
		SetCriteria([]byte(`{"serverId":` + f.Server.ID + `}`)).SetTotal(0).SetLeaseOwner("elsewhere").
		SetLeaseExpiresAt(time.Now().Add(24 * time.Hour)).Save(ctx)
	require.NoError(t, err)
	f.BulkJob = strconv.Itoa(job.ID)

	var tok struct{ IssueToken struct{ ID string } }
	env.MustGraphQL(f.Owner, `mutation { issueToken(input: {role: MEMBER, subject: "minted"}){ id } }`, nil, &tok)
	f.Token = tok.IssueToken.ID
	tids, err := db.Token.Query().Where(token.TenantID(tid)).IDs(ctx)
	require.NoError(t, err)
	f.TokensAll = intStrings(tids)

	reqs, err := db.Request.Query().Where(request.TenantID(tid)).IDs(ctx)
	require.NoError(t, err)
	f.RequestsAll = intStrings(reqs)
	srvs, err := db.Server.Query().Where(server.TenantID(tid)).IDs(ctx)
	require.NoError(t, err)
	f.ServersAll = intStrings(srvs)
	dids, err := db.Delivery.Query().Where(delivery.TenantID(tid)).IDs(ctx)
	require.NoError(t, err)
	f.DeliveryAll = intStrings(dids)
	rids, err := db.Recipient.Query().Where(recipient.TenantID(tid)).IDs(ctx)
	require.NoError(t, err)
	f.RecipientAll = intStrings(rids)
	var sub struct{ CreateAlertSubscription struct{ ID string } }
	env.MustGraphQL(f.Owner, `mutation($url: String!){ createAlertSubscription(input: {url: $url, events: [CREDITS_LOW]}){ id } }`,
		map[string]any{"url": target}, &sub)
	f.Alert = sub.CreateAlertSubscription.ID
	return f
}

// isolationOp is one query or mutation that names something by ID, aimed at tenant A's data.
type isolationOp struct {
	field string // the Query or Mutation field exercised
	name  string // distinguishes several rows for one field (node of each type)
	query string
	vars  func(a tenantFixture) map[string]any
	// adminOnly: any tenant token must get FORBIDDEN (not just some denial).
	adminOnly bool
	// mutation: changes data when allowed, so the positive control runs it after the denial checks, in
	// table order (destructive rows last).
	mutation bool
}

func idVar(pick func(a tenantFixture) string) func(a tenantFixture) map[string]any {
	return func(a tenantFixture) map[string]any { return map[string]any{"id": pick(a)} }
}

// isolationOps names every Query and Mutation field that takes an ID (TestIsolationCoversSchema keeps the list
// complete). Reads first, then mutations in an order where the positive control (A's owner on A's data) works:
// deletions last.
var isolationOps = []isolationOp{
	{field: "node", name: "tenant", query: `query($id: ID!){ node(id: $id){ id ... on Tenant { name creditBalance } } }`,
		vars: idVar(func(a tenantFixture) string { return a.ID })},
	{field: "node", name: "server", query: `query($id: ID!){ node(id: $id){ id ... on Server { name inboundUrl } } }`,
		vars: idVar(func(a tenantFixture) string { return a.Server.ID })},
	{field: "node", name: "recipient", query: `query($id: ID!){ node(id: $id){ id ... on Recipient { name } } }`,
		vars: idVar(func(a tenantFixture) string { return a.RcpActive })},
	{field: "node", name: "request", query: `query($id: ID!){ node(id: $id){ id ... on Request { body } } }`,
		vars: idVar(func(a tenantFixture) string { return a.Request })},
	{field: "node", name: "delivery", query: `query($id: ID!){ node(id: $id){ id ... on Delivery { status } } }`,
		vars: idVar(func(a tenantFixture) string { return a.DelPending })},
	{field: "node", name: "attempt", query: `query($id: ID!){ node(id: $id){ id ... on Attempt { number } } }`,
		vars: idVar(func(a tenantFixture) string { return a.Attempt })},
	{field: "node", name: "ledger entry", query: `query($id: ID!){ node(id: $id){ id ... on LedgerEntry { amount } } }`,
		vars: idVar(func(a tenantFixture) string { return a.LedgerEntry })},
	{field: "node", name: "plan", query: `query($id: ID!){ node(id: $id){ id ... on Plan { name } } }`,
		vars: idVar(func(a tenantFixture) string { return a.PlanID })},
	{field: "node", name: "outbound job", query: `query($id: ID!){ node(id: $id){ id ... on OutboundJob { url body } } }`,
		vars: idVar(func(a tenantFixture) string { return a.Outbound })},
	{field: "node", name: "outbound attempt", query: `query($id: ID!){ node(id: $id){ id ... on OutboundAttempt { httpStatus } } }`,
		vars: idVar(func(a tenantFixture) string { return a.OutboundTry })},
	{field: "node", name: "token", query: `query($id: ID!){ node(id: $id){ id ... on Token { subject role expiresAt } } }`,
		vars: idVar(func(a tenantFixture) string { return a.Token })},
	{field: "node", name: "recipient hourly stats", query: `query($id: ID!){ node(id: $id){ id ... on Recipient { hourlyStats(hours: 2){ hour attempts successRate p95Ms } } } }`,
		vars: idVar(func(a tenantFixture) string { return a.RcpActive })},
	{field: "node", name: "server requests per hour", query: `query($id: ID!){ node(id: $id){ id ... on Server { requestsPerHour(hours: 2){ hour requests } } } }`,
		vars: idVar(func(a tenantFixture) string { return a.Server.ID })},
	{field: "node", name: "tenant credits per day", query: `query($id: ID!){ node(id: $id){ id ... on Tenant { creditsPerDay{ day credits } } } }`,
		vars: idVar(func(a tenantFixture) string { return a.ID })},
	{field: "node", name: "bulk job", query: `query($id: ID!){ node(id: $id){ id ... on BulkJob { status } } }`,
		vars: idVar(func(a tenantFixture) string { return a.BulkJob })},
	{field: "nodes", query: `query($ids: [ID!]!){ nodes(ids: $ids){ id } }`,
		vars: func(a tenantFixture) map[string]any {
			return map[string]any{"ids": []string{a.ID, a.Server.ID, a.RcpActive, a.Request, a.DelPending, a.Attempt, a.LedgerEntry, a.Outbound, a.OutboundTry, a.Token, a.BulkJob}}
		}},
	{field: "server", query: `query($id: ID!){ server(id: $id){ id name inboundUrl recipients { id } } }`,
		vars: idVar(func(a tenantFixture) string { return a.Server.ID })},
	{field: "requests", query: `query($id: ID!){ requests(serverId: $id, first: 3){ totalCount edges { node { id body } } } }`,
		vars: idVar(func(a tenantFixture) string { return a.Server.ID })},
	{field: "requests", name: "search", query: `query($id: ID!){ requests(serverId: $id, search: "tenant"){ totalCount edges { node { id body } } } }`,
		vars: idVar(func(a tenantFixture) string { return a.Server.ID })},
	{field: "bulkJob", query: `query($id: ID!){ bulkJob(id: $id){ id status filter { serverId } } }`,
		vars: idVar(func(a tenantFixture) string { return a.BulkJob })},
	{field: "planBulkRetry", query: `query($id: ID!){ planBulkRetry(filter: {serverId: $id}){ count credits balance } }`,
		vars: idVar(func(a tenantFixture) string { return a.Server.ID })},
	{field: "planBulkCancel", query: `query($id: ID!){ planBulkCancel(filter: {serverId: $id}){ count } }`,
		vars: idVar(func(a tenantFixture) string { return a.Server.ID })},
	{field: "request", query: `query($id: ID!){ request(id: $id){ id body headers { name value } deliveries { id } } }`,
		vars: idVar(func(a tenantFixture) string { return a.Request })},
	{field: "ledger", query: `query($id: ID!){ ledger(tenantId: $id, first: 10){ totalCount edges { node { id amount } } } }`,
		vars: idVar(func(a tenantFixture) string { return a.ID })},
	{field: "testFilter", query: `query($id: ID!){ testFilter(filter: {method: "POST"}, requestId: $id){ matches error } }`,
		vars: idVar(func(a tenantFixture) string { return a.Request })},

	{field: "updatePlan", adminOnly: true, mutation: true,
		query: `mutation($id: ID!){ updatePlan(id: $id, input: {monthlyCredits: 999999}){ id } }`,
		vars:  idVar(func(a tenantFixture) string { return a.PlanID })},
	{field: "grantCredits", adminOnly: true, mutation: true,
		query: `mutation($id: ID!){ grantCredits(tenantId: $id, amount: 1000){ id } }`,
		vars:  idVar(func(a tenantFixture) string { return a.ID })},
	{field: "issueToken", name: "owner", mutation: true,
		query: `mutation($id: ID!){ issueToken(input: {role: OWNER, tenantId: $id}){ token } }`,
		vars:  idVar(func(a tenantFixture) string { return a.ID })},
	{field: "issueToken", name: "member", mutation: true,
		query: `mutation($id: ID!){ issueToken(input: {role: MEMBER, tenantId: $id}){ token } }`,
		vars:  idVar(func(a tenantFixture) string { return a.ID })},
	{field: "createServer", mutation: true,
		query: `mutation($id: ID!){ createServer(input: {tenantId: $id, name: "intruder"}){ id inboundUrl } }`,
		vars:  idVar(func(a tenantFixture) string { return a.ID })},
	{field: "updateServer", mutation: true,
		query: `mutation($id: ID!){ updateServer(id: $id, input: {name: "renamed", retentionDays: 1}){ id } }`,
		vars:  idVar(func(a tenantFixture) string { return a.Server.ID })},
	{field: "createRecipient", mutation: true,
		query: `mutation($id: ID!){ createRecipient(input: {serverId: $id, name: "intruder", method: CLI}){ id } }`,
		vars:  idVar(func(a tenantFixture) string { return a.Server.ID })},
	{field: "updateRecipient", mutation: true,
		query: `mutation($id: ID!){ updateRecipient(id: $id, input: {name: "renamed", maxAttempts: 1}){ id } }`,
		vars:  idVar(func(a tenantFixture) string { return a.RcpActive })},
	{field: "pauseRecipient", mutation: true,
		query: `mutation($id: ID!){ pauseRecipient(id: $id){ id state } }`,
		vars:  idVar(func(a tenantFixture) string { return a.RcpActive })},
	{field: "resumeRecipient", mutation: true,
		query: `mutation($id: ID!){ resumeRecipient(id: $id){ id state } }`,
		vars:  idVar(func(a tenantFixture) string { return a.RcpPaused })},
	{field: "enableRecipient", mutation: true,
		query: `mutation($id: ID!){ enableRecipient(id: $id){ id state } }`,
		vars:  idVar(func(a tenantFixture) string { return a.RcpDisabled })},
	{field: "cancelDelivery", mutation: true,
		query: `mutation($id: ID!){ cancelDelivery(id: $id){ id status } }`,
		vars:  idVar(func(a tenantFixture) string { return a.DelPending })},
	{field: "retryDelivery", mutation: true,
		query: `mutation($id: ID!){ retryDelivery(id: $id){ id status } }`,
		vars:  idVar(func(a tenantFixture) string { return a.DelCanceled })},
	{field: "node", name: "eventType", query: `query($id: ID!){ node(id: $id){ id ... on EventType { name schema } } }`,
		vars: idVar(func(a tenantFixture) string { return a.EventType })},
	{field: "createEventType", mutation: true,
		query: `mutation($id: ID!){ createEventType(input: {tenantId: $id, name: "sneaky"}){ id } }`,
		vars:  idVar(func(a tenantFixture) string { return a.ID })},
	{field: "updateEventType", mutation: true,
		query: `mutation($id: ID!){ updateEventType(id: $id, input: {clearSchema: true}){ id } }`,
		vars:  idVar(func(a tenantFixture) string { return a.EventType })},
	{field: "deleteEventType", mutation: true,
		query: `mutation($id: ID!){ deleteEventType(id: $id){ id } }`,
		vars:  idVar(func(a tenantFixture) string { return a.EventType })},
	{field: "setRecipientTransform", mutation: true,
		query: `mutation($id: ID!){ setRecipientTransform(recipientId: $id, source: "function transform(r) { return null; }"){ id } }`,
		vars:  idVar(func(a tenantFixture) string { return a.RcpDirect })},
	{field: "tryTransform",
		query: `query($id: ID!){ tryTransform(requestId: $id, source: "function transform(r) { return r; }"){ body } }`,
		vars:  idVar(func(a tenantFixture) string { return a.Request })},
	{field: "replayRequest", mutation: true,
		query: `mutation($id: ID!){ replayRequest(id: $id){ id } }`,
		vars:  idVar(func(a tenantFixture) string { return a.Request })},
	{field: "reportCliAttempt", mutation: true,
		query: `mutation($id: ID!){ reportCliAttempt(input: {deliveryId: $id, attempt: 1, leaseToken: "cli:guess", startedAt: "2026-01-01T00:00:00Z", finishedAt: "2026-01-01T00:00:01Z", httpStatus: 200}) }`,
		vars:  idVar(func(a tenantFixture) string { return a.DelPending })},
	{field: "changeTenantPlan", mutation: true,
		query: `mutation($id: ID!, $plan: ID!){ changeTenantPlan(tenantId: $id, planId: $plan){ id } }`,
		vars: func(a tenantFixture) map[string]any {
			return map[string]any{"id": a.ID, "plan": a.OtherPlan}
		}},
	{field: "createAlertSubscription", mutation: true,
		query: `mutation($id: ID!){ createAlertSubscription(input: {tenantId: $id, url: "http://127.0.0.1:9/alerts", events: [CREDITS_LOW]}){ id } }`,
		vars:  idVar(func(a tenantFixture) string { return a.ID })},
	{field: "setLowCreditThreshold", mutation: true,
		query: `mutation($id: ID!){ setLowCreditThreshold(tenantId: $id, threshold: 1){ id lowCreditThreshold } }`,
		vars:  idVar(func(a tenantFixture) string { return a.ID })},
	{field: "deleteAlertSubscription", mutation: true,
		query: `mutation($id: ID!){ deleteAlertSubscription(id: $id){ id } }`,
		vars:  idVar(func(a tenantFixture) string { return a.Alert })},
	{field: "revokeToken", mutation: true,
		query: `mutation($id: ID!){ revokeToken(id: $id){ id revokedAt } }`,
		vars:  idVar(func(a tenantFixture) string { return a.Token })},
	{field: "rotateInboundKey", mutation: true,
		query: `mutation($id: ID!){ rotateInboundKey(serverId: $id, graceSeconds: 0){ id inboundUrl } }`,
		vars:  idVar(func(a tenantFixture) string { return a.Server.ID })},
	// With a grace, so that a rotation that got through would show in the snapshot (previousSecretExpiresAt).
	{field: "rotateRecipientSecret", mutation: true,
		query: `mutation($id: ID!){ rotateRecipientSecret(id: $id, graceSeconds: 3600){ id signingSecret previousSecretExpiresAt } }`,
		vars:  idVar(func(a tenantFixture) string { return a.RcpActive })},
	{field: "bulkRetry", mutation: true,
		query: `mutation($id: ID!){ bulkRetry(filter: {serverId: $id}){ id total } }`,
		vars:  idVar(func(a tenantFixture) string { return a.Server.ID })},
	{field: "bulkCancel", mutation: true,
		query: `mutation($id: ID!){ bulkCancel(filter: {serverId: $id}){ id total } }`,
		vars:  idVar(func(a tenantFixture) string { return a.Server.ID })},
	{field: "cancelBulkJob", mutation: true,
		query: `mutation($id: ID!){ cancelBulkJob(id: $id){ id status } }`,
		vars:  idVar(func(a tenantFixture) string { return a.BulkJob })},
	{field: "deleteRecipient", mutation: true,
		query: `mutation($id: ID!){ deleteRecipient(id: $id){ id } }`,
		vars:  idVar(func(a tenantFixture) string { return a.RcpDisabled })},
	{field: "deleteServer", mutation: true,
		query: `mutation($id: ID!){ deleteServer(id: $id){ id } }`,
		vars:  idVar(func(a tenantFixture) string { return a.Server.ID })},
}

// subscriptionOps are the subscriptions that name something by ID, tried over the websocket.
var subscriptionOps = []isolationOp{
	{field: "deliveryUpdated", name: "server", query: `subscription($id: ID!){ deliveryUpdated(serverId: $id){ id status } }`,
		vars: idVar(func(a tenantFixture) string { return a.Server.ID })},
	{field: "deliveryUpdated", name: "request", query: `subscription($id: ID!){ deliveryUpdated(requestId: $id){ id status } }`,
		vars: idVar(func(a tenantFixture) string { return a.Request })},
	{field: "bulkJobUpdated", query: `subscription($id: ID!){ bulkJobUpdated(id: $id){ id status done } }`,
		vars: idVar(func(a tenantFixture) string { return a.BulkJob })},
	{field: "cliListen", query: `subscription($id: ID!){ cliListen(recipientId: $id){ kind message deliveryId } }`,
		vars: idVar(func(a tenantFixture) string { return a.RcpActive })},
}

// adminOnlyOps take no ID of another tenant: any tenant token is refused by role.
var adminOnlyOps = []isolationOp{
	{field: "createPlan", adminOnly: true, mutation: true,
		query: `mutation { createPlan(input: {name: "sneaky", monthlyCredits: 1000000, retentionDays: 30, maxServers: 100, maxRecipientsPerServer: 100}){ id } }`},
	{field: "createTenant", adminOnly: true, mutation: true,
		query: `mutation($plan: ID!){ createTenant(input: {name: "sneaky", planId: $plan}){ id } }`,
		vars:  func(a tenantFixture) map[string]any { return map[string]any{"plan": a.PlanID} }},
}

// exempt names Query/Mutation fields outside the ID table, with why.
var exempt = map[string]string{
	"servers":            "takes no ID; TestIsolation checks that the list (also filtered by A's id) holds only B's servers",
	"tenants":            "takes no ID; TestIsolation checks that the list (also filtered by A's id) holds only B's tenant",
	"viewer":             "takes no ID; TestIsolation checks that it names B's tenant",
	"plans":              "takes no ID; TestIsolation checks that B sees only the selectable plans and its own, not A's",
	"outboundJobs":       "takes no ID; TestIsolation checks that the list (also filtered by A's id) holds only B's jobs",
	"sendOutbound":       "takes no ID; TestIsolation checks that B reusing A's idempotency key is not A's duplicate",
	"tokens":             "takes no ID; TestIsolation checks that B's owner lists only B's tokens and B's member none",
	"alertSubscriptions": "takes no ID; alerting's TestAlertTenantIsolation checks that B lists only its own",
	"alerts":             "takes no ID; alerting's TestAlertTenantIsolation checks that B lists only its own alerts",
	"limits":             "takes no ID and holds no tenant's data: the bounds the API checks input against",
	"redeemSignInCode":   "takes no ID and no token: a one-time code buys an operator token (TestFirstRunSignInLink)",
	"bulkJobs":           "takes no ID; TestIsolation checks that the list (also filtered by A's id) holds only B's jobs",
	"eventTypes":         "takes no ID; TestIsolation checks that the list (also filtered by A's id) holds only B's types",
}

func (op isolationOp) label() string {
	if op.name == "" {
		return op.field
	}
	return op.field + "/" + op.name
}

func (op isolationOp) varsFor(a tenantFixture) map[string]any {
	if op.vars == nil {
		return nil
	}
	return op.vars(a)
}

func TestIsolation(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	target := okTarget(t)
	a := newTenantFixture(t, env, "tenant-a", target)
	b := newTenantFixture(t, env, "tenant-b", target)

	before := snapshot(t, env)

	denied := map[string]bool{"NOT_FOUND": true, "FORBIDDEN": true}
	tokens := []struct{ role, token string }{{"B owner", b.Owner}, {"B member", b.Member}}
	for _, op := range append(slices.Clone(isolationOps), adminOnlyOps...) {
		for _, tk := range tokens {
			resp := env.GraphQL(tk.token, op.query, op.varsFor(a))
			what := fmt.Sprintf("%s as %s: %s", op.label(), tk.role, resp.Data)
			require.NotEmpty(t, resp.Errors, "%s must be denied", what)
			for _, e := range resp.Errors {
				if op.adminOnly {
					require.Equal(t, "FORBIDDEN", e.Code(), "%s: %+v", what, e)
				} else {
					require.True(t, denied[e.Code()], "%s: want NOT_FOUND or FORBIDDEN, got %+v", what, e)
				}
			}
			requireNoData(t, resp, op.field, what)
		}
		resp := env.GraphQL("", op.query, op.varsFor(a))
		require.NotEmpty(t, resp.Errors, "%s without token", op.label())
		for _, e := range resp.Errors {
			require.Equal(t, "UNAUTHENTICATED", e.Code(), "%s without token: %+v", op.label(), e)
		}
		requireNoData(t, resp, op.field, op.label()+" without token")
	}

	// Subscriptions, over the websocket: refused before any event flows.
	for _, op := range subscriptionOps {
		for _, tk := range append(tokens, struct{ role, token string }{"no token", ""}) {
			m := subscribe(t, env, tk.token, op.query, op.varsFor(a)).next(10 * time.Second)
			what := fmt.Sprintf("subscription %s as %s: %+v", op.label(), tk.role, m)
			require.False(t, m.TimedOut, what)
			require.NotEmpty(t, m.Errors, what)
			for _, e := range m.Errors {
				if tk.token == "" {
					require.Equal(t, "UNAUTHENTICATED", e.Code(), what)
				} else {
					require.True(t, denied[e.Code()], "%s: want NOT_FOUND or FORBIDDEN", what)
				}
			}
			require.True(t, len(m.Data) == 0 || string(m.Data) == "null", what)
		}
	}

	// nodes mixing B's own IDs with A's: B's resolve, A's are null with a NOT_FOUND error each.
	ids := []string{b.Server.ID, a.Server.ID, b.Request, a.Request, b.DelPending, a.DelPending}
	resp := env.GraphQL(b.Member, `query($ids: [ID!]!){ nodes(ids: $ids){ id } }`, map[string]any{"ids": ids})
	var nodes struct{ Nodes []*struct{ ID string } }
	require.NoError(t, json.Unmarshal(resp.Data, &nodes), "%s", resp.Data)
	require.Len(t, nodes.Nodes, len(ids))
	for i, n := range nodes.Nodes {
		if i%2 == 0 {
			require.NotNil(t, n, "B's own node %s", ids[i])
			require.Equal(t, ids[i], n.ID)
		} else {
			require.Nil(t, n, "A's node %s must not resolve for B", ids[i])
		}
	}
	require.Len(t, resp.Errors, 3)
	for _, e := range resp.Errors {
		require.Equal(t, "NOT_FOUND", e.Code(), "%+v", e)
	}

	// Lists and filters show B only its own rows, whatever the filter asks for.
	for _, tk := range tokens {
		var lists struct {
			Servers struct {
				Edges []struct{ Node struct{ ID string } }
			}
			Tenants struct {
				Edges []struct{ Node struct{ ID string } }
			}
			Requests struct {
				Edges []struct{ Node struct{ ID string } }
			}
			Ledger struct {
				Edges []struct{ Node struct{ ID string } }
			}
			Viewer struct {
				Role   string
				Tenant struct{ ID string }
			}
			Plans   []struct{ ID string }
			FServer struct {
				Edges []struct{ Node struct{ ID string } }
			}
			FTenant struct {
				Edges []struct{ Node struct{ ID string } }
			}
			OutboundJobs struct {
				Edges []struct{ Node struct{ ID string } }
			}
			FOutbound struct {
				Edges []struct{ Node struct{ ID string } }
			}
			BulkJobs, FBulkJobs struct {
				Edges []struct{ Node struct{ ID string } }
			}
			EventTypes, FEventTypes struct {
				Edges []struct{ Node struct{ ID string } }
			}
		}
		env.MustGraphQL(tk.token, `query($srv: ID!, $aSrv: ID!, $aTenant: ID!, $aJob: ID!, $aBulk: ID!, $aType: ID!){
			servers(first: 20){ edges { node { id } } }
			tenants(first: 20){ edges { node { id } } }
			requests(serverId: $srv, first: 20){ edges { node { id } } }
			ledger(first: 20){ edges { node { id } } }
			viewer { role tenant { id } }
			plans { id }
			fServer: servers(where: {id: $aSrv}){ edges { node { id } } }
			fTenant: tenants(where: {id: $aTenant}){ edges { node { id } } }
			outboundJobs(first: 20){ edges { node { id } } }
			fOutbound: outboundJobs(where: {id: $aJob}){ edges { node { id } } }
			bulkJobs(first: 20){ edges { node { id } } }
			fBulkJobs: bulkJobs(where: {id: $aBulk}){ edges { node { id } } }
			eventTypes(first: 20){ edges { node { id } } }
			fEventTypes: eventTypes(where: {id: $aType}){ edges { node { id } } }
		}`, map[string]any{"srv": b.Server.ID, "aSrv": a.Server.ID, "aTenant": a.ID, "aJob": a.Outbound, "aBulk": a.BulkJob,
			"aType": a.EventType}, &lists)
		ids := func(edges []struct{ Node struct{ ID string } }) []string {
			var out []string
			for _, e := range edges {
				out = append(out, e.Node.ID)
			}
			sort.Strings(out)
			return out
		}
		require.Equal(t, sorted(b.ServersAll), ids(lists.Servers.Edges), tk.role+": servers")
		require.Equal(t, []string{b.ID}, ids(lists.Tenants.Edges), tk.role+": tenants")
		require.Equal(t, sorted(b.RequestsAll), ids(lists.Requests.Edges), tk.role+": requests")
		require.Equal(t, sorted(b.LedgerAll), ids(lists.Ledger.Edges), tk.role+": ledger")
		require.Equal(t, b.ID, lists.Viewer.Tenant.ID, tk.role+": viewer")
		require.Empty(t, lists.FServer.Edges, tk.role+": servers filtered to A's id")
		require.Empty(t, lists.FTenant.Edges, tk.role+": tenants filtered to A's id")
		require.Equal(t, []string{b.Outbound}, ids(lists.OutboundJobs.Edges), tk.role+": outbound jobs")
		require.Empty(t, lists.FOutbound.Edges, tk.role+": outbound jobs filtered to A's id")
		require.Equal(t, []string{b.BulkJob}, ids(lists.BulkJobs.Edges), tk.role+": bulk jobs")
		require.Empty(t, lists.FBulkJobs.Edges, tk.role+": bulk jobs filtered to A's id")
		require.Equal(t, []string{b.EventType}, ids(lists.EventTypes.Edges), tk.role+": event types")
		require.Empty(t, lists.FEventTypes.Edges, tk.role+": event types filtered to A's id")
		var planIDs []string
		for _, p := range lists.Plans {
			planIDs = append(planIDs, p.ID)
		}
		require.ElementsMatch(t, []string{b.PlanID, a.OtherPlan, b.OtherPlan}, planIDs,
			tk.role+": its own plan and the selectable ones, not A's")
	}
	// Tokens are listed to owners (their tenant's only, even filtered to A's id), never to members.
	var toks struct {
		Tokens, FTokens struct {
			Edges []struct{ Node struct{ ID string } }
		}
	}
	env.MustGraphQL(b.Owner, `query($aTok: ID!){ tokens(first: 50){ edges { node { id } } }
		fTokens: tokens(where: {id: $aTok}){ edges { node { id } } } }`, map[string]any{"aTok": a.Token}, &toks)
	var listed []string
	for _, e := range toks.Tokens.Edges {
		listed = append(listed, e.Node.ID)
	}
	require.Equal(t, sorted(b.TokensAll), sorted(listed), "B owner: tokens")
	require.Empty(t, toks.FTokens.Edges, "B owner: tokens filtered to A's id")
	require.Equal(t, "FORBIDDEN", env.GraphQL(b.Member, `{ tokens { edges { node { id } } } }`, nil).Code(), "B member: tokens")

	// Nothing B tried changed anything, A's data or B's.
	require.Equal(t, before, snapshot(t, env), "denied operations must not change the database")

	// Idempotency keys are per tenant: B reusing A's key gets a job of its own, not A's duplicate.
	var dup struct {
		SendOutbound struct {
			ID          string
			Status      string
			DuplicateOf *struct{ ID string }
		}
	}
	env.MustGraphQL(b.Owner, `mutation($url: String!, $key: String){ sendOutbound(input: {url: $url, idempotencyKey: $key}){ id status duplicateOf { id } } }`,
		map[string]any{"url": target, "key": a.OutboundKey}, &dup)
	require.Equal(t, "PENDING", dup.SendOutbound.Status)
	require.Nil(t, dup.SendOutbound.DuplicateOf)

	// B's live stream carries B's deliveries only: A's webhooks never show up in it.
	bSub := subscribe(t, env, b.Member, `subscription($id: ID!){ deliveryUpdated(serverId: $id){ id requestID } }`, map[string]any{"id": b.Server.ID})
	var got wsMessage
	deadline := time.Now().Add(20 * time.Second)
	for got = bSub.next(100 * time.Millisecond); got.TimedOut; got = bSub.next(500 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "B's stream: no event")
		postOK(t, env, a.Server.Key, "", `{"for":"a"}`) // published first: would arrive first if it leaked
		postOK(t, env, b.Server.Key, "", `{"for":"b"}`)
	}
	require.Empty(t, got.Errors, "%+v", got)
	var ev struct {
		DeliveryUpdated struct{ ID, RequestID string }
	}
	require.NoError(t, json.Unmarshal(got.Data, &ev))
	d, err := env.DB.Client.Delivery.Get(viewer.SystemContext(t.Context()), relaytest.RowID(t, ev.DeliveryUpdated.ID))
	require.NoError(t, err)
	require.Equal(t, relaytest.RowID(t, b.ID), d.TenantID, "B's stream delivered %+v", ev)

	// Positive control for the subscriptions: A's own token is served.
	for _, op := range subscriptionOps {
		vars := op.varsFor(a)
		// trigger makes an event the subscription should see; it is repeated until one arrives, since the
		// subscription starts listening some time after it is sent.
		trigger := func() {}
		switch op.label() {
		case "deliveryUpdated/server":
			trigger = func() { postOK(t, env, a.Server.Key, "", `{}`) }
		case "deliveryUpdated/request":
			// A fresh request of A's whose delivery is cancelled, retried, cancelled…: each step is an event.
			req := postOK(t, env, a.Server.Key, "", `{}`)
			vars = map[string]any{"id": req}
			d, err := env.DB.Client.Delivery.Query().
				Where(delivery.RequestID(relaytest.RowID(t, req)), delivery.RecipientID(relaytest.RowID(t, a.RcpActive))).
				Only(viewer.SystemContext(t.Context()))
			require.NoError(t, err)
			current, pending := strconv.Itoa(d.ID), true
			trigger = func() {
				if pending {
					env.MustGraphQL(a.Owner, `mutation($id: ID!){ cancelDelivery(id: $id){ id } }`, map[string]any{"id": current}, nil)
				} else {
					var out struct{ RetryDelivery struct{ ID string } }
					env.MustGraphQL(a.Owner, `mutation($id: ID!){ retryDelivery(id: $id){ id } }`, map[string]any{"id": current}, &out)
					current = out.RetryDelivery.ID
				}
				pending = !pending
			}
		}
		sub := subscribe(t, env, a.Owner, op.query, vars)
		deadline := time.Now().Add(20 * time.Second)
		var m wsMessage
		for m = sub.next(100 * time.Millisecond); m.TimedOut; m = sub.next(500 * time.Millisecond) {
			require.True(t, time.Now().Before(deadline), "subscription %s as A's owner: no event", op.label())
			trigger()
		}
		require.Empty(t, m.Errors, "subscription %s as A's owner: %+v", op.label(), m)
		require.NotEqual(t, "null", string(m.Data), op.label())
		require.NotEmpty(t, m.Data, op.label())
		sub.conn.CloseNow()
	}

	// Positive control: the same operations with A's own owner token succeed, so the denials above were
	// about tenancy, not about malformed operations or wrong IDs.
	for _, op := range isolationOps {
		if op.adminOnly {
			continue
		}
		resp := env.GraphQL(a.Owner, op.query, op.varsFor(a))
		require.Empty(t, resp.Errors, "%s as A's owner must succeed: %+v", op.label(), resp.Errors)
	}
	// And admin-only ones with an operator token.
	for _, op := range append(slices.Clone(isolationOps), adminOnlyOps...) {
		if !op.adminOnly {
			continue
		}
		resp := env.GraphQL(env.AdminToken(), op.query, op.varsFor(a))
		require.Empty(t, resp.Errors, "%s as operator must succeed: %+v", op.label(), resp.Errors)
	}
}

// TestMemberCannotManage: a MEMBER reads and acts on deliveries, but servers, recipients and the plan are the
// owner's, even in the member's own tenant.
func TestMemberCannotManage(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	b := newTenantFixture(t, env, "tenant-m", okTarget(t))
	before := snapshot(t, env)
	ops := []struct{ name, query string }{
		{"createServer", `mutation { createServer(input: {name: "m"}){ id } }`},
		{"createServer/own tenant", fmt.Sprintf(`mutation { createServer(input: {tenantId: %q, name: "m"}){ id } }`, b.ID)},
		{"updateServer", fmt.Sprintf(`mutation { updateServer(id: %q, input: {name: "m"}){ id } }`, b.Server.ID)},
		{"deleteServer", fmt.Sprintf(`mutation { deleteServer(id: %q){ id } }`, b.Server.ID)},
		{"createRecipient", fmt.Sprintf(`mutation { createRecipient(input: {serverId: %q, name: "m", method: CLI}){ id } }`, b.Server.ID)},
		{"updateRecipient", fmt.Sprintf(`mutation { updateRecipient(id: %q, input: {name: "m"}){ id } }`, b.RcpActive)},
		{"deleteRecipient", fmt.Sprintf(`mutation { deleteRecipient(id: %q){ id } }`, b.RcpActive)},
		{"rotateInboundKey", fmt.Sprintf(`mutation { rotateInboundKey(serverId: %q){ id } }`, b.Server.ID)},
		{"rotateRecipientSecret", fmt.Sprintf(`mutation { rotateRecipientSecret(id: %q){ id } }`, b.RcpActive)},
		{"changeTenantPlan", fmt.Sprintf(`mutation { changeTenantPlan(tenantId: %q, planId: %q){ id } }`, b.ID, b.OtherPlan)},
		{"issueToken", fmt.Sprintf(`mutation { issueToken(input: {role: MEMBER, tenantId: %q}){ token } }`, b.ID)},
		{"grantCredits", fmt.Sprintf(`mutation { grantCredits(tenantId: %q, amount: 5){ id } }`, b.ID)},
		{"updatePlan", fmt.Sprintf(`mutation { updatePlan(id: %q, input: {maxServers: 100}){ id } }`, b.PlanID)},
		{"sendOutbound", `mutation { sendOutbound(input: {url: "http://127.0.0.1:9/hook", body: "x"}){ id } }`},
		{"revokeToken", fmt.Sprintf(`mutation { revokeToken(id: %q){ id } }`, b.Token)},
		{"tokens", `{ tokens { edges { node { id } } } }`},
	}
	for _, op := range ops {
		resp := env.GraphQL(b.Member, op.query, nil)
		require.Equal(t, "FORBIDDEN", resp.Code(), "%s as member: %+v", op.name, resp.Errors)
	}
	// An owner cannot mint an operator token, nor grant itself credits.
	require.Equal(t, "FORBIDDEN", env.GraphQL(b.Owner, `mutation { issueToken(input: {role: ADMIN}){ token } }`, nil).Code())
	require.Equal(t, "FORBIDDEN", env.GraphQL(b.Owner,
		fmt.Sprintf(`mutation { grantCredits(tenantId: %q, amount: 5){ id } }`, b.ID), nil).Code())
	require.Equal(t, before, snapshot(t, env))
}

// TestIsolationCoversSchema fails when the schema gains a Query, Mutation or Subscription field that neither the isolation
// table nor the exemptions account for: a new operation must be tried with another tenant's IDs.
func TestIsolationCoversSchema(t *testing.T) {
	t.Parallel()
	schema := generated.NewExecutableSchema(generated.Config{}).Schema()
	covered := map[string]bool{}
	for _, op := range slices.Concat(isolationOps, adminOnlyOps, subscriptionOps) {
		covered[op.field] = true
	}
	for f := range exempt {
		covered[f] = true
	}
	var schemaFields []string
	for _, typ := range []string{"Query", "Mutation", "Subscription"} {
		def := schema.Types[typ]
		if def == nil && typ == "Subscription" {
			continue
		}
		require.NotNil(t, def, typ)
		for _, f := range def.Fields {
			if len(f.Name) >= 2 && f.Name[:2] == "__" {
				continue
			}
			schemaFields = append(schemaFields, f.Name)
			require.True(t, covered[f.Name],
				"%s.%s is not in the isolation table: add a row trying it with another tenant's IDs (or an exemption with a reason)", typ, f.Name)
		}
	}
	// The table names no field the schema lacks (a renamed field would otherwise go untested).
	for f := range covered {
		require.Contains(t, schemaFields, f, "isolation table names %q, which the schema does not have", f)
	}
}

// requireNoData asserts that the response carries nothing for field: null data or a null field.
func requireNoData(t *testing.T, resp relaytest.Response, field, what string) {
	t.Helper()
	if len(resp.Data) == 0 || string(resp.Data) == "null" {
		return
	}
	var data map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(resp.Data, &data), what)
	v, ok := data[field]
	if !ok || string(v) == "null" {
		return
	}
	// A list field (nodes) may answer one null per ID it refused.
	var list []json.RawMessage
	require.NoError(t, json.Unmarshal(v, &list), "%s leaked data: %s", what, v)
	for _, item := range list {
		require.Equal(t, "null", string(item), "%s leaked data: %s", what, v)
	}
}

// snapshot reads every row of every table, so a comparison shows any change at all.
func snapshot(t *testing.T, env *relaytest.Env) string {
	t.Helper()
	ctx := viewer.SystemContext(t.Context())
	c := env.DB.Client
	var all []any
	add := func(v any, err error) {
		require.NoError(t, err)
		all = append(all, v)
	}
	add(c.Plan.Query().Order(ent.Asc("id")).All(ctx))
	add(c.Tenant.Query().Order(ent.Asc("id")).All(ctx))
	add(c.LedgerEntry.Query().Order(ent.Asc("id")).All(ctx))
	add(c.Server.Query().Order(ent.Asc("id")).All(ctx))
	add(c.Recipient.Query().Order(ent.Asc("id")).All(ctx))
	add(c.Request.Query().Order(ent.Asc("id")).All(ctx))
	add(c.Delivery.Query().Order(ent.Asc("id")).All(ctx))
	add(c.Attempt.Query().Order(ent.Asc("id")).All(ctx))
	add(c.Token.Query().Order(ent.Asc("id")).All(ctx))
	add(c.BulkJob.Query().Order(ent.Asc("id")).All(ctx))
	add(c.BulkJobItem.Query().Order(ent.Asc("id")).All(ctx))
	b, err := json.MarshalIndent(all, "", " ")
	require.NoError(t, err)
	return string(b)
}

// okTarget is an HTTP endpoint that answers 200 to everything (outbound jobs go there).
func okTarget(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/target"
}

// postOK posts a webhook that must be accepted and returns the request ID.
func postOK(t *testing.T, env *relaytest.Env, key, suffix, body string) string {
	t.Helper()
	resp := env.Post(key, suffix, []byte(body))
	defer resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	var out struct{ RequestID string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.NotEmpty(t, out.RequestID)
	return out.RequestID
}

func intStrings(ids []int) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strconv.Itoa(id)
	}
	return out
}

func idStrings[T any](xs []T, id func(T) int) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = strconv.Itoa(id(x))
	}
	return out
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return out
}
