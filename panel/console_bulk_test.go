package panel_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/adal-relay/adal/relay/relaytest"
)

// rowIDs lists the request IDs the requests table shows.
const rowIDs = `[...document.querySelectorAll('tr[data-request-id]')].map((r) => r.dataset.requestId)`

// deliveryStatuses reads, as the owner, the status of every delivery of a server's requests by recipient name.
func deliveryStatuses(env *relaytest.Env, token, serverID string) map[string][]string {
	var out struct {
		Requests struct {
			Edges []struct {
				Node struct {
					Deliveries []struct {
						Status    string
						Recipient struct{ Name string }
					}
				}
			}
		}
	}
	env.MustGraphQL(token, `query($s: ID!) { requests(serverId: $s, first: 100) { edges { node { deliveries { status recipient { name } } } } } }`,
		map[string]any{"s": serverID}, &out)
	got := map[string][]string{}
	for _, e := range out.Requests.Edges {
		for _, d := range e.Node.Deliveries {
			got[d.Recipient.Name] = append(got[d.Recipient.Name], d.Status)
		}
	}
	return got
}

// searchFor types text into the requests page's search and submits it.
func searchFor(text string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(typeInto("#search", text), chromedp.Click(css(`form[data-role="search"] button[type=submit]`)))
}

// search searches the requests page for text and waits for the search's summary.
func (b *browser) search(text string) {
	b.t.Helper()
	b.do("search for "+text, 20*time.Second, searchFor(text), chromedp.WaitVisible(css(`[data-role="search-summary"]`)))
}

// bulkOnEveryMatch selects every request that matches and asks for the bulk kind (retry, cancel) up to its dry run.
func bulkOnEveryMatch(kind string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Click(css(`input[data-role="select-page"]`)),
		chromedp.WaitVisible(css(`[data-role="select-all-matching"]`)),
		chromedp.Click(css(`[data-role="select-all-matching"]`)),
		chromedp.Click(css(`[data-role="bulk-`+kind+`"]`)),
		chromedp.WaitVisible(css(`dialog[open] [data-role="dry-run"]`)))
}

// dryRun checks that the open dry run of what counts want, and returns what it says of the cost.
func (b *browser) dryRun(what, want string) string {
	b.t.Helper()
	if got := b.text(`dialog[open] [data-role="plan-count"]`); got != want {
		b.t.Errorf("%s dry run count = %q, want %s", what, got, want)
	}
	return b.text(`dialog[open] [data-role="cost"]`)
}

// confirmBulk starts the job the open dry run of what describes and waits until its progress shows it
// succeeded, with done ("n / n") and credits spent; it returns the job's ID.
func (b *browser) confirmBulk(what, done, credits string) string {
	b.t.Helper()
	b.do("start the "+what, 20*time.Second,
		chromedp.Click(css(`dialog[open] [data-role="confirm"]`)),
		chromedp.WaitNotPresent(css(`dialog[open]`)),
		chromedp.WaitVisible(css(`[data-role="bulk-progress"]`)))
	jobID := eval[string](b, `document.querySelector('[data-role="bulk-progress"]').dataset.jobId`)
	b.waitJS("the "+what+" is done", fmt.Sprintf(`(() => {
		const p = document.querySelector('[data-role="bulk-progress"][data-status="SUCCEEDED"]');
		return !!p && p.querySelector('[data-role="bulk-done"]').textContent === %q && p.querySelector('[data-role="bulk-credits"]').textContent === %q;
	})()`, done, credits), 60*time.Second)
	return jobID
}

func count(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

// TestConsoleSearchAndBulkInBrowser: the owner searches a server's requests by a text of their bodies, selects
// every request the search matches and retries their failed deliveries in one bulk job (the dry run states the
// count and the cost first; the job's progress shows live until it is done, and the credits are debited), then
// cancels pending deliveries in bulk, and retries one selected row's delivery.
func TestConsoleSearchAndBulkInBrowser(t *testing.T) {
	b, env, base, tenant := startPanel(t, "initech", 100)

	// The recipient fails until the test makes it healthy.
	var healthy atomic.Bool
	var succeeded atomic.Int32
	target := webhookTarget(t, func(w http.ResponseWriter, r *http.Request) {
		if !healthy.Load() {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		succeeded.Add(1)
		w.WriteHeader(http.StatusNoContent)
	})
	srv := env.NewServer(tenant, "shop", nil)
	env.NewRecipient(tenant, srv.ID, map[string]any{
		"name": "orders-api", "method": "DIRECT_HTTP", "url": target.URL + "/hooks", "maxAttempts": 1,
	})
	var orders, customers []string
	for i := range 3 {
		orders = append(orders, env.Send(srv.Key, "/events", fmt.Sprintf(`{"type":"order.created","id":"ord_%d"}`, i)))
	}
	for i := range 2 {
		customers = append(customers, env.Send(srv.Key, "/events", fmt.Sprintf(`{"type":"customer.updated","id":"cus_%d"}`, i)))
	}
	relaytest.Eventually(t, 30*time.Second, "every first delivery failed", func() bool {
		return count(deliveryStatuses(env, tenant.Owner, srv.ID)["orders-api"], "FAILED") == 5
	})

	b.signIn(base, "#/servers/"+srv.ID, tenant.Owner, `tr[data-request-id]`)
	b.waitJS("five requests listed", rowIDs+`.length === 5`, 15*time.Second)

	// The search takes 3 characters or more, as the API does.
	b.do("search with too short a text", 15*time.Second, searchFor("or"), chromedp.WaitVisible(css(`#search-error`)))
	apiMsg := env.GraphQL(tenant.Owner, `query($s: ID!) { requests(serverId: $s, first: 5, search: "or") { totalCount } }`, map[string]any{"s": srv.ID})
	if apiMsg.Code() != "INVALID_INPUT" {
		t.Fatalf("API accepted a 2-character search: %+v", apiMsg)
	}
	if got := b.text(`#search-error`); got != apiMsg.Errors[0].Message {
		t.Errorf("the search says %q where the API says %q", got, apiMsg.Errors[0].Message)
	}
	if eval[string](b, `location.hash`) != "#/servers/"+srv.ID {
		t.Errorf("a refused search changed the address to %s", eval[string](b, `location.hash`))
	}

	b.search("order.created")
	b.waitJS("only the matching requests", rowIDs+`.length === 3`, 15*time.Second)
	if got := eval[[]string](b, rowIDs); !sameSet(got, orders) {
		t.Errorf("search shows %v, want the order requests %v", got, orders)
	}
	if got := eval[string](b, `location.hash`); !strings.Contains(got, "q=order.created") {
		t.Errorf("the search is not in the address: %s", got)
	}
	if got := b.text(`[data-role="search-summary"]`); !strings.Contains(got, "3 matches") {
		t.Errorf("search summary = %q", got)
	}
	// The address keeps it: a reload shows the same search.
	b.do("reload the search", 20*time.Second,
		chromedp.Reload(),
		chromedp.WaitVisible(css(`[data-role="search-summary"]`)))
	b.waitJS("the same matches after a reload", rowIDs+`.length === 3`, 15*time.Second)
	if got := eval[string](b, `document.querySelector('#search').value`); got != "order.created" {
		t.Errorf("search box after reload = %q", got)
	}
	b.page("bulk-01-search")

	// Select every request the search matches and retry their failed deliveries, now that the recipient is up.
	healthy.Store(true)
	before := balanceOf(env, tenant.Owner)
	b.do("select the page", 15*time.Second,
		chromedp.Click(css(`input[data-role="select-page"]`)),
		chromedp.WaitVisible(css(`[data-role="select-all-matching"]`)))
	if n := eval[int](b, `document.querySelectorAll('input[data-role="select-row"]:checked').length`); n != 3 {
		t.Errorf("rows checked = %d, want 3", n)
	}
	b.do("select all matching and ask for a retry", 20*time.Second,
		chromedp.Click(css(`[data-role="select-all-matching"]`)),
		chromedp.WaitVisible(css(`[data-role="clear-selection"]`)),
		choose(`[data-role="bulk-status"]`, "FAILED"),
		chromedp.Click(css(`[data-role="bulk-retry"]`)),
		chromedp.WaitVisible(css(`dialog[open] [data-role="dry-run"]`)))
	if bad := eval[[]string](b, unlabelled); len(bad) > 0 {
		t.Errorf("controls without a label with the selection bar shown: %v", bad)
	}
	var plan struct{ PlanBulkRetry struct{ Count, Credits int } }
	env.MustGraphQL(tenant.Owner, `query($s: ID!) { planBulkRetry(filter: {serverId: $s, status: FAILED, search: "order.created"}) { count credits } }`,
		map[string]any{"s": srv.ID}, &plan)
	if plan.PlanBulkRetry.Count != 3 || plan.PlanBulkRetry.Credits != 3 {
		t.Fatalf("API dry run = %+v, want 3 deliveries for 3 credits", plan.PlanBulkRetry)
	}
	if got := b.dryRun("retry", "3 deliveries"); !strings.Contains(got, "3 credits") || !strings.Contains(got, fmt.Sprintf("%d → %d", before, before-3)) {
		t.Errorf("dry run cost = %q, want 3 credits and %d → %d", got, before, before-3)
	}
	if got := b.text(`dialog[open] .dialog-body`); !strings.Contains(got, "order.created") {
		t.Errorf("the dialog does not say which requests: %q", got)
	}
	b.shotViewport("bulk-02-retry-dry-run")
	jobID := b.confirmBulk("bulk retry", "3 / 3", "3")
	if got := b.text(`[data-role="bulk-progress"] [data-role="bulk-failed"]`); got != "0" {
		t.Errorf("failed = %q", got)
	}
	var job struct {
		BulkJob struct {
			Kind, Status              string
			Total, Done, CreditsSpent int
		}
	}
	env.MustGraphQL(tenant.Owner, `query($id: ID!) { bulkJob(id: $id) { kind status total done creditsSpent } }`, map[string]any{"id": jobID}, &job)
	if j := job.BulkJob; j.Kind != "RETRY" || j.Status != "SUCCEEDED" || j.Total != 3 || j.Done != 3 || j.CreditsSpent != 3 {
		t.Errorf("bulk job %s = %+v", jobID, j)
	}
	if got := balanceOf(env, tenant.Owner); got != before-3 {
		t.Errorf("balance after the bulk retry = %d, want %d", got, before-3)
	}
	relaytest.Eventually(t, 30*time.Second, "the three retries delivered", func() bool {
		return count(deliveryStatuses(env, tenant.Owner, srv.ID)["orders-api"], "SUCCEEDED") == 3
	})
	if n := succeeded.Load(); n != 3 {
		t.Errorf("the recipient got %d successful attempts, want 3", n)
	}
	b.waitJS("the header shows the debited balance",
		fmt.Sprintf(`document.querySelector('[data-role="balance"]').textContent === '%d'`, before-3), 15*time.Second)
	b.waitJS("the jobs list shows the job done", fmt.Sprintf(`!!document.querySelector('[data-section="bulk-jobs"] tr[data-job-id=%q][data-status="SUCCEEDED"]')`, jobID), 15*time.Second)
	b.waitJS("the list shows the retried deliveries", `document.querySelectorAll('tr[data-request-id] .chip[data-status="SUCCEEDED"]').length === 3`, 15*time.Second)
	b.page("bulk-03-retry-done")

	// Pending deliveries: a CLI recipient nobody listens on gets the next two requests.
	env.NewRecipient(tenant, srv.ID, map[string]any{"name": "laptop", "method": "CLI"})
	for i := range 2 {
		customers = append(customers, env.Send(srv.Key, "/events", fmt.Sprintf(`{"type":"customer.updated","id":"cus_late_%d"}`, i)))
	}
	relaytest.Eventually(t, 30*time.Second, "the late requests delivered to orders-api and pending for laptop", func() bool {
		got := deliveryStatuses(env, tenant.Owner, srv.ID)
		return count(got["laptop"], "PENDING") == 2 && count(got["orders-api"], "PENDING")+count(got["orders-api"], "IN_PROGRESS") == 0
	})
	balanceBeforeCancel := balanceOf(env, tenant.Owner)
	b.search("customer.updated")
	b.waitJS("the four customer requests", rowIDs+`.length === 4`, 15*time.Second)
	if got := eval[[]string](b, rowIDs); !sameSet(got, customers) {
		t.Errorf("search shows %v, want %v", got, customers)
	}
	b.do("select all matching and ask for a cancel", 20*time.Second, bulkOnEveryMatch("cancel"))
	if got := b.dryRun("cancel", "2 deliveries"); !strings.Contains(got, "no credits") {
		t.Errorf("cancel cost = %q, want free", got)
	}
	b.shotViewport("bulk-04-cancel-dry-run")
	b.confirmBulk("bulk cancel", "2 / 2", "0")
	laptop := deliveryStatuses(env, tenant.Owner, srv.ID)["laptop"]
	if len(laptop) != 2 || count(laptop, "CANCELED") != 2 {
		t.Errorf("the CLI recipient's deliveries = %v, want 2 canceled", laptop)
	}
	if got := balanceOf(env, tenant.Owner); got != balanceBeforeCancel {
		t.Errorf("balance after the bulk cancel = %d, want %d (a cancel is free)", got, balanceBeforeCancel)
	}
	b.page("bulk-05-cancel-done")

	// One selected row: its canceled delivery is retried, as its own page's button would.
	one := customers[len(customers)-1]
	before = balanceOf(env, tenant.Owner)
	b.do("select one row and retry its canceled delivery", 20*time.Second,
		chromedp.Click(css(`tr[data-request-id="`+one+`"] input[data-role="select-row"]`)),
		chromedp.WaitVisible(css(`[data-role="selection-count"]`)),
		choose(`[data-role="bulk-status"]`, "CANCELED"),
		chromedp.Click(css(`[data-role="bulk-retry"]`)),
		chromedp.WaitVisible(css(`dialog[open] [data-role="dry-run"]`)))
	if got := b.dryRun("selected row", "1 delivery"); !strings.Contains(got, "1 credit") {
		t.Errorf("selected row cost = %q", got)
	}
	b.do("retry the selected row", 20*time.Second,
		chromedp.Click(css(`dialog[open] [data-role="confirm"]`)),
		chromedp.WaitNotPresent(css(`dialog[open]`)),
		chromedp.WaitVisible(css(`[data-role="bulk-progress"][data-job-id="local"][data-status="SUCCEEDED"]`)))
	if got := b.text(`[data-role="bulk-progress"] [data-role="bulk-done"]`); got != "1 / 1" {
		t.Errorf("selected row progress = %q", got)
	}
	if got := balanceOf(env, tenant.Owner); got != before-1 {
		t.Errorf("balance after retrying one row = %d, want %d", got, before-1)
	}
	if got := deliveryStatuses(env, tenant.Owner, srv.ID)["laptop"]; len(got) != 3 || count(got, "PENDING") != 1 {
		t.Errorf("the CLI recipient's deliveries after the retry = %v, want one new pending", got)
	}

	// A narrow screen: the list, its search and its jobs fit.
	b.narrow("requests", base+"/#/servers/"+srv.ID, "bulk-06-narrow", `tr[data-request-id]`, `[data-section="bulk-jobs"]`)
	b.wide()
	b.noExceptions()
	t.Logf("screenshots in %s", b.dir)
}

// TestConsoleBulkJobProgressAndCancelInBrowser: a bulk retry to a recipient that hangs stops making retries
// once a few wait for their first attempt; its progress shows live on the page (no reload), and Cancel job
// stops it: what it did stays done and is all that was charged.
func TestConsoleBulkJobProgressAndCancelInBrowser(t *testing.T) {
	b, env, base, tenant := startPanel(t, "hooli", 100)

	var hang atomic.Bool
	release := make(chan struct{})
	target := webhookTarget(t, func(w http.ResponseWriter, r *http.Request) {
		if hang.Load() {
			select { // hold the attempt until the test ends
			case <-release:
			case <-r.Context().Done():
			}
		}
		http.Error(w, "unavailable", http.StatusBadGateway)
	})
	t.Cleanup(func() { close(release) }) // runs first: lets the held attempts finish so the server can close
	srv := env.NewServer(tenant, "warehouse", nil)
	env.NewRecipient(tenant, srv.ID, map[string]any{
		"name": "stock-api", "method": "DIRECT_HTTP", "url": target.URL + "/stock", "maxAttempts": 1, "timeoutSeconds": 30,
	})
	const total = 12
	for i := range total {
		env.Send(srv.Key, "/stock", fmt.Sprintf(`{"sku":"sku_%02d"}`, i))
	}
	relaytest.Eventually(t, 30*time.Second, "every delivery failed", func() bool {
		return count(deliveryStatuses(env, tenant.Owner, srv.ID)["stock-api"], "FAILED") == total
	})
	hang.Store(true)
	before := balanceOf(env, tenant.Owner)

	b.signIn(base, "#/servers/"+srv.ID, tenant.Owner, `tr[data-request-id]`)
	b.waitJS("the requests listed", rowIDs+fmt.Sprintf(`.length === %d`, total), 15*time.Second)
	eval[bool](b, `window.__noReload = true`)
	b.do("retry every failed delivery", 20*time.Second, bulkOnEveryMatch("retry"))
	b.dryRun("retry", fmt.Sprintf("%d deliveries", total))
	if got := b.text(`dialog[open] .dialog-body`); !strings.Contains(got, "all of them, not only this page") {
		t.Errorf("the dialog does not say it acts beyond the page: %q", got)
	}
	b.do("start it", 20*time.Second,
		chromedp.Click(css(`dialog[open] [data-role="confirm"]`)),
		chromedp.WaitNotPresent(css(`dialog[open]`)),
		chromedp.WaitVisible(css(`[data-role="bulk-progress"][data-status="RUNNING"]`)))
	// The job makes a few retries, then waits for the recipient: the page shows how far it got, live.
	jobID := eval[string](b, `document.querySelector('[data-role="bulk-progress"]').dataset.jobId`)
	type jobState struct {
		Status                    string
		Total, Done, CreditsSpent int
	}
	readJob := func() jobState {
		var out struct{ BulkJob jobState }
		env.MustGraphQL(tenant.Owner, `query($id: ID!) { bulkJob(id: $id) { status total done creditsSpent } }`, map[string]any{"id": jobID}, &out)
		return out.BulkJob
	}
	var partial jobState
	relaytest.Eventually(t, 20*time.Second, "the job waiting for the recipient after a few retries", func() bool {
		partial = readJob()
		return partial.Status == "RUNNING" && partial.Done > 0 && partial.Done < total
	})
	b.waitJS("partial progress shown live", fmt.Sprintf(`(() => {
		const p = document.querySelector('[data-role="bulk-progress"][data-status="RUNNING"]');
		return !!p && p.querySelector('[data-role="bulk-done"]').textContent === '%d / %d' && p.querySelector('[data-role="bulk-credits"]').textContent === '%d';
	})()`, partial.Done, total, partial.CreditsSpent), 10*time.Second)
	b.shot("cancel-01-running")
	b.do("cancel the job", 20*time.Second,
		chromedp.Click(css(`[data-role="bulk-progress"] [data-role="cancel-job"]`)),
		chromedp.WaitVisible(css(`dialog[open] [data-role="confirm"]`)),
		chromedp.Click(css(`dialog[open] [data-role="confirm"]`)),
		chromedp.WaitNotPresent(css(`dialog[open]`)),
		chromedp.WaitVisible(css(`[data-role="bulk-progress"][data-status="CANCELED"]`)))
	j := readJob()
	if j.Status != "CANCELED" || j.Total != total || j.Done == 0 || j.Done >= total || j.CreditsSpent != j.Done {
		t.Fatalf("job after cancel = %+v", j)
	}
	if got := b.text(`[data-role="bulk-progress"] [data-role="bulk-done"]`); got != fmt.Sprintf("%d / %d", j.Done, total) {
		t.Errorf("progress shown = %q, the job did %d of %d", got, j.Done, total)
	}
	if got := balanceOf(env, tenant.Owner); got != before-j.Done {
		t.Errorf("balance = %d, want %d: only the retries made are charged", got, before-j.Done)
	}
	b.waitJS("the jobs list shows it canceled", fmt.Sprintf(`!!document.querySelector('[data-section="bulk-jobs"] tr[data-job-id=%q][data-status="CANCELED"]')`, jobID), 15*time.Second)
	if !eval[bool](b, `window.__noReload === true`) {
		t.Error("the page reloaded to show the progress")
	}
	b.page("cancel-02-canceled")
	b.noExceptions()
}

func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}
