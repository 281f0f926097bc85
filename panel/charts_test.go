package panel_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/viewer"
)

// TestChartsInBrowser sends real traffic through intake to a receiver that answers and one that fails, waits
// for the deliveries, retries and replays, and reads in Chromium the figures of the recipients' activity,
// the server's requests per hour and the credits per day, which must be the counts of what happened.
func TestChartsInBrowser(t *testing.T) {
	b, env, base, tenant := startPanel(t, "acme", 100)
	target := webhookTarget(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/failing") {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	srv := env.NewServer(tenant, "stripe", nil)
	good := env.NewRecipient(tenant, srv.ID, map[string]any{"name": "billing-api", "method": "DIRECT_HTTP", "url": target.URL + "/ok", "maxAttempts": 1})
	bad := env.NewRecipient(tenant, srv.ID, map[string]any{"name": "legacy", "method": "DIRECT_HTTP", "url": target.URL + "/failing",
		"maxAttempts": 2, "retrySchedule": "STEPPED"})

	const sent = 5
	var first string
	for i := range sent {
		id := env.Send(srv.Key, "/events", fmt.Sprintf(`{"id":"evt_%d"}`, i))
		if i == 0 {
			first = id
		}
	}
	ctx := viewer.SystemContext(context.Background())
	settled := func() bool {
		n, err := env.DB.Client.Delivery.Query().
			Where(entdelivery.StatusIn(entdelivery.StatusPENDING, entdelivery.StatusIN_PROGRESS)).Count(ctx)
		if err != nil {
			t.Fatalf("count deliveries: %v", err)
		}
		return n == 0
	}
	relaytest.Eventually(t, 30*time.Second, "the deliveries to settle", settled)
	failed, err := env.DB.Client.Delivery.Query().
		Where(entdelivery.RecipientID(relaytest.RowID(t, bad)), entdelivery.StatusEQ(entdelivery.StatusFAILED)).First(ctx)
	if err != nil {
		t.Fatalf("a failed delivery: %v", err)
	}
	env.MustGraphQL(tenant.Owner, `mutation($id: ID!){ retryDelivery(id: $id){ id } }`, map[string]any{"id": strconv.Itoa(failed.ID)}, nil)
	env.MustGraphQL(tenant.Owner, `mutation($id: ID!){ replayRequest(id: $id){ id } }`, map[string]any{"id": first}, nil)
	relaytest.Eventually(t, 30*time.Second, "the retry and the replay to settle", settled)

	// What happened, as the history holds it: each request and the replay once to billing-api; each twice to
	// legacy, and the retry twice more.
	attempts := func(recipient string) (all, ok int) {
		for _, d := range env.Deliveries(entdelivery.RecipientID(relaytest.RowID(t, recipient))) {
			for _, a := range d.Edges.Attempts {
				all++
				if a.Status == "SUCCEEDED" {
					ok++
				}
			}
		}
		return all, ok
	}
	goodAll, goodOK := attempts(good)
	badAll, badOK := attempts(bad)
	if goodAll != sent+1 || goodOK != goodAll || badAll != 2*(sent+2) || badOK != 0 {
		t.Fatalf("attempts: billing-api %d (%d ok), legacy %d (%d ok)", goodAll, goodOK, badAll, badOK)
	}

	// sumRows adds up a data attribute over the rows of a chart's table.
	sumRows := func(chart, attr string) int {
		return eval[int](b, fmt.Sprintf(`[...document.querySelectorAll('%s tr[data-%s]')]
			.reduce((n, tr) => n + Number(tr.dataset.%s), 0)`, chart, attr, attr))
	}
	check := func(what string, got, want int) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %d, want %d", what, got, want)
		}
	}

	// A recipient that succeeds: every attempt counted, all of them succeeded, durations drawn.
	attemptsChart := `[data-chart="recipient-attempts"]`
	b.signIn(base, "#/recipients/"+good, tenant.Owner, attemptsChart)
	check("billing-api attempts", eval[int](b, `Number(document.querySelector('`+attemptsChart+`').dataset.attempts)`), goodAll)
	check("billing-api successes", eval[int](b, `Number(document.querySelector('`+attemptsChart+`').dataset.successes)`), goodOK)
	check("billing-api attempts in the table", sumRows(`[data-section="activity"]`, "attempts"), goodAll)
	check("billing-api hours shown", eval[int](b, `Number(document.querySelector('`+attemptsChart+`').dataset.hours)`), 24)
	if n := eval[int](b, `document.querySelectorAll('`+attemptsChart+` svg rect.bar-ok').length`); n < 1 {
		t.Errorf("no bar of successes drawn")
	}
	if n := eval[int](b, `document.querySelectorAll('[data-chart="recipient-durations"] svg .line-p95').length`); n < 1 {
		t.Errorf("no p95 drawn")
	}
	if p50 := eval[string](b, `document.querySelector('[data-section="activity"] tr[data-hour]').dataset.p50`); p50 == "null" || p50 == "" {
		t.Errorf("the hour with attempts has no p50: %q", p50)
	}
	b.do("open the figures", 10*time.Second, chromedp.Click(css(`[data-section="activity"] details.chart-figures summary`)))
	b.page("1-recipient-activity")

	// A recipient that fails: its attempts, none succeeded; the week's range lists 168 hours.
	b.do("open the failing recipient", 15*time.Second,
		chromedp.Navigate(base+"/#/recipients/"+bad),
		chromedp.WaitVisible(css(attemptsChart)))
	check("legacy attempts", eval[int](b, `Number(document.querySelector('`+attemptsChart+`').dataset.attempts)`), badAll)
	check("legacy failures", eval[int](b, `Number(document.querySelector('`+attemptsChart+`').dataset.failures)`), badAll)
	check("legacy successes", eval[int](b, `Number(document.querySelector('`+attemptsChart+`').dataset.successes)`), 0)
	b.do("show 7 days", 15*time.Second,
		chromedp.Click(css(`[data-section="activity"] [data-range="168"]`)),
		chromedp.WaitVisible(css(attemptsChart+`[data-hours="168"]`)))
	check("legacy attempts over 7 days", eval[int](b, `Number(document.querySelector('`+attemptsChart+`').dataset.attempts)`), badAll)
	b.page("2-failing-recipient-7-days")

	// The server: every request intake accepted and the replay.
	serverChart := `[data-chart="server-requests"]`
	b.do("open the server's activity", 15*time.Second,
		chromedp.Navigate(base+"/#/servers/"+srv.ID),
		chromedp.WaitVisible(css(`[data-tab="activity"]`)),
		chromedp.Click(css(`[data-tab="activity"]`)),
		chromedp.WaitVisible(css(serverChart)))
	check("server requests", eval[int](b, `Number(document.querySelector('`+serverChart+`').dataset.requests)`), sent+1)
	check("server replays", eval[int](b, `Number(document.querySelector('`+serverChart+`').dataset.replays)`), 1)
	check("server requests in the table", sumRows(`[data-section="activity"]`, "requests"), sent+1)
	b.page("3-server-activity")
	b.narrow("server activity", base+"/#/servers/"+srv.ID+"/activity", "3-server-activity-narrow", serverChart)
	b.narrow("recipient activity", base+"/#/recipients/"+good, "3-recipient-activity-narrow", attemptsChart)
	b.wide()

	// Credits: the requests, the retry and the replay, one each, today.
	creditsChart := `[data-chart="credits-per-day"]`
	b.do("open the credits", 15*time.Second,
		chromedp.Click(css(`a.nav-link[href="#/credits"]`)),
		chromedp.WaitVisible(css(creditsChart)))
	check("credits spent", eval[int](b, `Number(document.querySelector('`+creditsChart+`').dataset.credits)`), sent+2)
	check("credits in the table", sumRows(creditsChart, "credits"), sent+2)
	check("days shown", eval[int](b, `Number(document.querySelector('`+creditsChart+`').dataset.days)`), 7)
	b.page("4-credits-per-day")

	// The operator sees the same on the tenant's page.
	b.do("sign in as the operator", 20*time.Second,
		chromedp.Click(css(`.topbar button[title="Sign out"]`)),
		chromedp.WaitVisible(css("#token")),
		chromedp.SetValue(css("#token"), env.AdminToken()),
		chromedp.Click(css("form.signin-card button[type=submit]")),
		chromedp.WaitVisible(css(`tr[data-tenant-name="acme"]`)),
		chromedp.Navigate(base+"/#/tenants/"+tenant.ID),
		chromedp.WaitVisible(css(creditsChart)))
	check("the tenant's credits, for the operator", eval[int](b, `Number(document.querySelector('`+creditsChart+`').dataset.credits)`), sent+2)
	b.page("5-tenant-credits")
	b.noExceptions()
}
