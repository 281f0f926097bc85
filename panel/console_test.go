package panel_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/adal-relay/adal/relay/relaytest"
)

// typeInto replaces what the field at sel holds by typing text into it, key by key, as a person would.
func typeInto(sel, text string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const el = document.querySelector(%q); el.value = ''; el.focus(); })()`, sel)),
		chromedp.SendKeys(css(sel), text),
	)
}

// choose picks value in the select at sel, firing the change event a person's choice fires.
func choose(sel, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(
		`(() => { const el = document.querySelector(%q); el.value = %q; if (el.value !== %q) throw new Error('no option ' + %q); el.dispatchEvent(new Event('change', {bubbles: true})); })()`,
		sel, value, value, value))
}

// unlabelled lists the form controls on the page that no label names: every input must say what it is for.
const unlabelled = `[...document.querySelectorAll('input, select, textarea')]
	.filter((el) => el.type !== 'hidden' && !el.classList.contains('offscreen') && !(el.labels && el.labels.length) && !el.getAttribute('aria-label'))
	.map((el) => el.outerHTML.slice(0, 120))`

// page saves a screenshot of the page as it stands, after checking every control on it has a label.
func (b *browser) page(name string) {
	b.t.Helper()
	if bad := eval[[]string](b, unlabelled); len(bad) > 0 {
		b.t.Errorf("%s: controls without a label: %v", name, bad)
	}
	b.shot(name)
}

// dialogField is the input of a field in the open dialog's form.
func dialogField(name string) string {
	return fmt.Sprintf(`dialog[open] [data-field=%q] input, dialog[open] [data-field=%q] select, dialog[open] [data-field=%q] textarea`, name, name, name)
}

// pageField is the input of a field of the form on the page.
func pageField(name string) string {
	return fmt.Sprintf(`main [data-field=%q] input, main [data-field=%q] select, main [data-field=%q] textarea`, name, name, name)
}

// TestConsoleFromFirstRun is the console as its people use it, from an empty installation: the operator
// opens the sign-in link the server logged, creates plans and a tenant, grants credits and issues the owner's
// token; the owner signs in with it, creates a server, a direct and a CLI recipient, sees a webhook delivered
// live, retries it, pauses a recipient, switches plan, manages the team, sends an outbound job and deletes the
// server. Screenshots of every page land in $ADAL_ARTIFACTS_DIR/panel.
func TestConsoleFromFirstRun(t *testing.T) {
	b := startBrowser(t)
	var logs relaytest.LogBuffer
	env := relaytest.Start(t, relaytest.CaptureLogs(&logs))
	base := panelURL(t, env)
	var hits atomic.Int32
	target := webhookTarget(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"received":true}`)
	})

	// ---- the operator ------------------------------------------------------------------------------------
	links := logs.SignInLinks()
	if len(links) != 1 || !strings.HasPrefix(links[0], base+"/#/signin?code=") {
		t.Fatalf("sign-in links logged = %v, want one under %s\n%s", links, base, logs.String())
	}
	b.do("open the sign-in link", 20*time.Second,
		chromedp.Navigate(links[0]),
		chromedp.WaitVisible(css(`[data-role="first-plan"]`)))
	if got := eval[string](b, `location.hash`); got != "#/tenants" {
		t.Errorf("after sign-in the address is %q: the used code should be gone", got)
	}
	if got := eval[string](b, `document.querySelector('.who-meta .role-chip').textContent`); got != "Operator" {
		t.Errorf("signed in as %q", got)
	}
	b.page("01-first-run")

	// Plans: the form refuses what the API refuses, in the API's words.
	b.do("open the plan form", 15*time.Second,
		chromedp.Click(css(`[data-role="first-plan"]`)),
		chromedp.WaitVisible(css(`dialog[open] form[data-role="plan-form"]`)))
	apiMsg := env.GraphQL(env.AdminToken(), `mutation { createPlan(input: {name: "x", monthlyCredits: 1, retentionDays: 5000, maxServers: 1, maxRecipientsPerServer: 1}) { id } }`, nil)
	if apiMsg.Code() != "INVALID_INPUT" {
		t.Fatalf("API accepted retention 5000: %+v", apiMsg)
	}
	b.do("fill the plan with a retention too long", 15*time.Second,
		typeInto(dialogField("name"), "starter"),
		typeInto(dialogField("monthlyCredits"), "100"),
		typeInto(dialogField("retentionDays"), "5000"),
		typeInto(dialogField("maxServers"), "3"),
		typeInto(dialogField("maxRecipientsPerServer"), "3"),
		chromedp.Click(css(`dialog[open] [data-role="submit"]`)),
		chromedp.WaitVisible(css(`dialog[open] [data-field="retentionDays"] .field-error`)))
	if got := b.text(`dialog[open] [data-field="retentionDays"] .field-error`); got != apiMsg.Errors[0].Message {
		t.Errorf("the form says %q where the API says %q", got, apiMsg.Errors[0].Message)
	}
	b.shotViewport("02-plan-form-invalid")
	b.do("create the plan", 15*time.Second,
		typeInto(dialogField("retentionDays"), "7"),
		chromedp.Click(css(`dialog[open] [data-role="submit"]`)),
		chromedp.WaitNotPresent(css(`dialog[open]`)),
		chromedp.WaitVisible(css(`tr[data-plan-name="starter"]`)))
	b.do("create a plan owners may pick", 15*time.Second,
		chromedp.Click(css(`[data-role="new-plan"]`)),
		chromedp.WaitVisible(css(`dialog[open] form[data-role="plan-form"]`)),
		typeInto(dialogField("name"), "growth"),
		typeInto(dialogField("monthlyCredits"), "5000"),
		typeInto(dialogField("maxRequestsPerSecond"), "50"),
		chromedp.Click(css(dialogField("selectable"))),
		chromedp.Click(css(`dialog[open] [data-role="submit"]`)),
		chromedp.WaitNotPresent(css(`dialog[open]`)),
		chromedp.WaitVisible(css(`tr[data-plan-name="growth"]`)))
	b.page("03-plans")
	var plans struct {
		Plans []struct {
			ID, Name             string
			Selectable           bool
			MaxRequestsPerSecond *int
		}
	}
	env.MustGraphQL(env.AdminToken(), `{ plans { id name selectable maxRequestsPerSecond } }`, nil, &plans)
	planID := map[string]string{}
	for _, p := range plans.Plans {
		planID[p.Name] = p.ID
	}
	if len(plans.Plans) != 2 || !plans.Plans[1].Selectable || plans.Plans[1].MaxRequestsPerSecond == nil || *plans.Plans[1].MaxRequestsPerSecond != 50 {
		t.Fatalf("plans stored = %+v", plans.Plans)
	}

	// A tenant, with the credits its plan grants, then more.
	b.do("create the tenant", 15*time.Second,
		chromedp.Click(css(`a.nav-link[href="#/tenants"]`)),
		chromedp.WaitVisible(css(`[data-role="first-tenant"]`)),
		chromedp.Click(css(`[data-role="first-tenant"]`)),
		chromedp.WaitVisible(css(`dialog[open] form[data-role="tenant-form"]`)),
		typeInto(dialogField("name"), "acme"),
		choose(dialogField("planId"), planID["starter"]))
	if got := b.text(`dialog[open] [data-role="cost"]`); !strings.Contains(got, "Adds 100 credits to acme") {
		t.Errorf("tenant form cost = %q", got)
	}
	b.do("save the tenant", 15*time.Second,
		chromedp.Click(css(`dialog[open] [data-role="submit"]`)),
		chromedp.WaitVisible(css(`.stat [data-role="tenant-balance"]`)))
	if got := b.text(`.stat [data-role="tenant-balance"]`); !strings.HasPrefix(got, "100") {
		t.Errorf("new tenant's balance = %q", got)
	}
	tenantID := strings.TrimPrefix(eval[string](b, `location.hash`), "#/tenants/")
	b.do("grant credits", 15*time.Second,
		chromedp.Click(css(`[data-role="grant-credits"]`)),
		chromedp.WaitVisible(css(`dialog[open] form[data-role="grant-form"]`)),
		typeInto(dialogField("amount"), "50"),
		typeInto(dialogField("reference"), "welcome"))
	if got := b.text(`dialog[open] [data-role="cost"]`); !strings.Contains(got, "100 → 150") {
		t.Errorf("grant cost line = %q, want the balance before and after", got)
	}
	b.do("confirm the grant", 15*time.Second,
		chromedp.Click(css(`dialog[open] [data-role="submit"]`)),
		chromedp.WaitNotPresent(css(`dialog[open]`)))
	b.waitJS("the balance after the grant", `document.querySelector('.stat [data-role="tenant-balance"]').textContent.startsWith('150')`, 10*time.Second)
	if got := eval[string](b, `[...document.querySelectorAll('.toast')].pop().textContent`); !strings.Contains(got, "New balance: 150") {
		t.Errorf("grant result = %q", got)
	}

	// The owner's token, issued here and shown once.
	b.do("issue the owner's token", 15*time.Second,
		chromedp.Click(css(`[data-role="issue-owner-token"]`)),
		chromedp.WaitVisible(css(`dialog[open] form[data-role="issue-token"]`)),
		typeInto(dialogField("subject"), "alice"),
		chromedp.Click(css(`dialog[open] [data-role="submit"]`)),
		chromedp.WaitVisible(css(`dialog[open] [data-role="issued-token"]`)))
	owner := b.text(`dialog[open] [data-role="issued-token"]`)
	var who struct {
		Viewer struct {
			Role, Subject string
			Tenant        struct{ ID string }
		}
	}
	env.MustGraphQL(owner, `{ viewer { role subject tenant { id } } }`, nil, &who)
	if who.Viewer.Role != "OWNER" || who.Viewer.Subject != "alice" || who.Viewer.Tenant.ID != tenantID {
		t.Fatalf("issued token is %+v", who.Viewer)
	}
	b.shotViewport("04-owner-token")
	b.do("close the token", 15*time.Second,
		chromedp.Click(css(`dialog[open] [data-role="dismiss"]`)),
		chromedp.WaitVisible(css(`tr[data-subject="alice"]`)))
	b.page("05-tenant")

	b.do("the ledger names its tenants", 15*time.Second,
		chromedp.Click(css(`a.nav-link[href="#/ledger"]`)),
		chromedp.WaitVisible(css(`[data-role="ledger-tenant"]`)))
	if got := eval[[]string](b, `[...document.querySelectorAll('[data-role="ledger-tenant"]')].map(e => e.textContent)`); strings.Join(got, ",") != "acme,acme" {
		t.Errorf("ledger tenants = %v, want the grant and the plan grant of acme", got)
	}
	b.page("06-ledger")

	// ---- the owner ---------------------------------------------------------------------------------------
	b.do("sign in as the owner", 20*time.Second,
		chromedp.Click(css(`.topbar button[title="Sign out"]`)),
		chromedp.WaitVisible(css("#token")),
		chromedp.SetValue(css("#token"), owner),
		chromedp.Click(css("form.signin-card button[type=submit]")),
		chromedp.WaitVisible(css(`[data-role="empty-new-server"]`)))
	if got := b.text(`[data-role="balance"]`); got != "150" {
		t.Errorf("owner's header balance = %q", got)
	}
	b.page("07-no-servers")

	b.do("create a server", 15*time.Second,
		chromedp.Click(css(`[data-role="empty-new-server"]`)),
		chromedp.WaitVisible(css(`dialog[open] form[data-role="server-form"]`)),
		typeInto(dialogField("name"), "stripe"),
		chromedp.Click(css(`dialog[open] [data-role="submit"]`)),
		chromedp.WaitVisible(css(`[data-role="curl"]`)))
	serverID := strings.TrimPrefix(eval[string](b, `location.hash`), "#/servers/")
	var srv struct{ Server struct{ InboundURL string } }
	env.MustGraphQL(owner, `query($id: ID!){ server(id: $id){ inboundUrl } }`, map[string]any{"id": serverID}, &srv)
	if got := b.text(`[data-role="curl"] pre`); !strings.Contains(got, srv.Server.InboundURL) {
		t.Errorf("test webhook line %q does not use the inbound URL %s", got, srv.Server.InboundURL)
	}
	b.page("08-server-empty")

	// A direct recipient: the form checks the URL as the API does, and shows when attempts come due.
	b.do("open the recipient form", 15*time.Second,
		chromedp.Click(css(`[data-tab="recipients"]`)),
		chromedp.WaitVisible(css(`[data-role="empty-new-recipient"]`)),
		chromedp.Click(css(`[data-role="empty-new-recipient"]`)),
		chromedp.WaitVisible(css(`form[data-role="recipient-form"]`)),
		typeInto(pageField("name"), "billing-api"),
		typeInto(pageField("url"), "ftp://example.com/hooks"),
		choose(pageField("retrySchedule"), "STEPPED"),
		typeInto(pageField("maxAttempts"), "5"),
		chromedp.Click(css(`main [data-role="submit"]`)),
		chromedp.WaitVisible(css(`[data-field="url"] .field-error`)))
	apiMsg = env.GraphQL(owner, `mutation($s: ID!){ createRecipient(input: {serverId: $s, name: "x", method: DIRECT_HTTP, url: "ftp://example.com/hooks"}) { id } }`, map[string]any{"s": serverID})
	if got := b.text(`[data-field="url"] .field-error`); apiMsg.Code() != "INVALID_INPUT" || got != apiMsg.Errors[0].Message {
		t.Errorf("the form says %q where the API says %+v", got, apiMsg.Errors)
	}
	if got := b.text(`[data-role="schedule"]`); !strings.Contains(got, "5 attempts over 9 min") || !strings.Contains(got, "+4 min") {
		t.Errorf("schedule preview = %q, want STEPPED's due times", got)
	}
	b.page("09-recipient-form")
	b.do("create the direct recipient", 15*time.Second,
		typeInto(pageField("url"), target.URL+"/hooks"),
		chromedp.Click(css(`main [data-role="submit"]`)),
		chromedp.WaitVisible(css(`[data-role="health"][data-state="ACTIVE"]`)))
	directID := strings.TrimPrefix(eval[string](b, `location.hash`), "#/recipients/")
	b.page("10-recipient-direct")

	// A CLI recipient shows the command to run, and whether a CLI is attached, live.
	b.do("create the CLI recipient", 15*time.Second,
		chromedp.Navigate(base+"/#/servers/"+serverID+"/recipients/new"),
		chromedp.WaitVisible(css(`form[data-role="recipient-form"]`)),
		chromedp.Click(css(`main [data-field="method"] input[value="CLI"]`)),
		chromedp.WaitNotVisible(css(`main [data-field="url"]`)),
		typeInto(pageField("name"), "alice-laptop"),
		chromedp.Click(css(`main [data-role="submit"]`)),
		chromedp.WaitVisible(css(`[data-role="cli-connected"][data-connected="false"]`)))
	cliID := strings.TrimPrefix(eval[string](b, `location.hash`), "#/recipients/")
	if got, want := b.text(`[data-role="cli-command"] pre`), "adal listen --recipient "+cliID+" --forward http://localhost:3000/webhooks"; got != want {
		t.Errorf("CLI command = %q, want %q", got, want)
	}
	sub := env.Subscribe(owner, `subscription($id: ID!){ cliListen(recipientId: $id){ kind message } }`, map[string]any{"id": cliID})
	if msg := sub.Next(10 * time.Second); len(msg.Errors) > 0 || !strings.Contains(string(msg.Data), "CONNECTED") {
		t.Fatalf("cliListen: %+v", msg)
	}
	b.do("see the CLI connect", 15*time.Second, chromedp.WaitVisible(css(`[data-role="cli-connected"][data-connected="true"]`)))
	b.page("11-recipient-cli")
	sub.Close()
	b.do("see the CLI leave", 15*time.Second, chromedp.WaitVisible(css(`[data-role="cli-connected"][data-connected="false"]`)))

	// A webhook, delivered while the owner watches.
	b.do("watch the requests", 15*time.Second,
		chromedp.Navigate(base+"/#/servers/"+serverID),
		chromedp.WaitVisible(css(`[data-role="curl"]`)),
		chromedp.WaitVisible(css(`.live[data-state="live"]`)))
	eval[bool](b, `window.__noReload = true`)
	reqID := env.Send(srv.Server.InboundURL[len(env.Server.URL+"/in/"):], "/v1/events?type=invoice.paid", `{"id":"evt_1","amount":4200}`)
	b.do("see it delivered live", 20*time.Second,
		chromedp.WaitVisible(css(`tr[data-request-id="`+reqID+`"] .chip[data-status="SUCCEEDED"]`)))
	if !eval[bool](b, `window.__noReload === true`) {
		t.Error("the page reloaded to show the request")
	}
	b.page("12-requests-live")
	b.do("filter by time", 15*time.Second,
		choose(`#range`, "1h"),
		chromedp.WaitVisible(css(`tr[data-request-id="`+reqID+`"]`)),
		choose(`#range`, "custom"),
		chromedp.WaitVisible(css(`[data-role="custom-range"]`)),
		chromedp.SetValue(css(`#since`), "2020-01-01T00:00"),
		chromedp.SetValue(css(`#until`), "2020-01-02T00:00"),
		chromedp.Click(css(`[data-role="custom-range"] button[type=submit]`)),
		chromedp.WaitVisible(css(`.state-empty`)))
	if got := b.text(`.state-empty h3`); got != "No requests in this range" {
		t.Errorf("a range without requests says %q", got)
	}
	if got := eval[string](b, `location.hash`); !strings.Contains(got, "since=2020-01-01") {
		t.Errorf("the range is not in the address: %s", got)
	}
	b.do("back to all requests", 15*time.Second,
		chromedp.Click(css(`.state-empty a.btn`)),
		chromedp.WaitVisible(css(`tr[data-request-id="`+reqID+`"]`)))
	b.do("open the request", 15*time.Second,
		chromedp.Click(css(`tr[data-request-id="`+reqID+`"] a.row-link`)),
		chromedp.WaitVisible(css(`.recipient-group[data-recipient-id="`+directID+`"] .delivery[data-status="SUCCEEDED"] tr[data-attempt="1"]`)))
	b.page("13-request")

	// Retry: the cost before, the balance after.
	before := balanceOf(env, owner)
	b.do("retry the delivery", 15*time.Second,
		chromedp.Click(css(`.recipient-group[data-recipient-id="`+directID+`"] [data-role="retry"]`)),
		chromedp.WaitVisible(css(`dialog[open] .cost`)))
	if got := b.text(`dialog[open] .cost`); !strings.Contains(got, "1 credit") || !strings.Contains(got, fmt.Sprintf("%d → %d", before, before-1)) {
		t.Errorf("retry cost = %q", got)
	}
	b.do("confirm the retry", 20*time.Second,
		chromedp.Click(css(`dialog[open] [data-role="confirm"]`)),
		chromedp.WaitNotPresent(css(`dialog[open]`)))
	b.waitJS("the retry delivered", `document.querySelectorAll('.recipient-group[data-recipient-id="`+directID+`"] .delivery[data-status="SUCCEEDED"]').length === 2`, 20*time.Second)
	if got := balanceOf(env, owner); got != before-1 {
		t.Errorf("balance after the retry = %d, want %d", got, before-1)
	}
	b.waitJS("the new balance in the header", fmt.Sprintf(`document.querySelector('[data-role="balance"]').textContent === '%d'`, before-1), 10*time.Second)
	if n := hits.Load(); n != 2 {
		t.Errorf("the recipient was called %d times, want the delivery and its retry", n)
	}

	// Pause the direct recipient from the server's recipients.
	b.do("pause the recipient", 15*time.Second,
		chromedp.Navigate(base+"/#/servers/"+serverID+"/recipients"),
		chromedp.WaitVisible(css(`tr[data-recipient-id="`+directID+`"] [data-role="pause"]`)),
		chromedp.Click(css(`tr[data-recipient-id="`+directID+`"] [data-role="pause"]`)),
		chromedp.WaitVisible(css(`dialog[open] [data-role="confirm"]`)),
		chromedp.Click(css(`dialog[open] [data-role="confirm"]`)),
		chromedp.WaitVisible(css(`tr[data-recipient-id="`+directID+`"][data-state="PAUSED"] [data-role="resume"]`)))
	var rs struct {
		Node struct{ State, StateReason string }
	}
	env.MustGraphQL(owner, `query($id: ID!){ node(id: $id){ ... on Recipient { state stateReason } } }`, map[string]any{"id": directID}, &rs)
	if rs.Node.State != "PAUSED" || rs.Node.StateReason != "paused by alice" {
		t.Errorf("recipient after pause = %+v", rs.Node)
	}
	b.page("14-recipients")
	b.do("resume it", 15*time.Second,
		chromedp.Click(css(`tr[data-recipient-id="`+directID+`"] [data-role="resume"]`)),
		chromedp.WaitVisible(css(`dialog[open] [data-role="confirm"]`)),
		chromedp.Click(css(`dialog[open] [data-role="confirm"]`)),
		chromedp.WaitVisible(css(`tr[data-recipient-id="`+directID+`"][data-state="ACTIVE"] [data-role="pause"]`)))

	// Settings of the server: the form is the API's, and deletion says what it does.
	b.do("edit the server", 15*time.Second,
		chromedp.Click(css(`[data-tab="settings"]`)),
		chromedp.WaitVisible(css(`form[data-role="server-settings"]`)),
		typeInto(pageField("retentionDays"), "3"),
		chromedp.Click(css(`form[data-role="server-settings"] [data-role="submit"]`)))
	b.waitJS("the settings saved", `[...document.querySelectorAll('.toast')].some(e => e.textContent.includes('Settings of stripe saved'))`, 10*time.Second)
	relaytest.Eventually(t, 10*time.Second, "retention saved", func() bool {
		var s struct{ Server struct{ RetentionDays *int } }
		env.MustGraphQL(owner, `query($id: ID!){ server(id: $id){ retentionDays } }`, map[string]any{"id": serverID}, &s)
		return s.Server.RetentionDays != nil && *s.Server.RetentionDays == 3
	})
	key := srv.Server.InboundURL[len(env.Server.URL+"/in/"):]
	// Saving the settings re-renders the tab when its answer arrives, which resets the rotation form: the grace
	// is chosen and the form submitted in one go.
	b.do("rotate the inbound key", 15*time.Second,
		chooseAndSubmit(`form[data-role="rotate-key"]`, "3600"),
		chromedp.WaitVisible(css(`dialog[open] [data-role="confirm"]`)))
	if got := b.text(`dialog[open] .dialog-body`); !strings.Contains(got, "keeps working for 1 hour, then answers 404") {
		t.Errorf("rotation dialog = %q", got)
	}
	b.do("confirm the rotation", 15*time.Second,
		chromedp.Click(css(`dialog[open] [data-role="confirm"]`)),
		chromedp.WaitNotPresent(css(`dialog[open]`)),
		chromedp.WaitVisible(css(`[data-section="rotate"] time`)))
	env.MustGraphQL(owner, `query($id: ID!){ server(id: $id){ inboundUrl } }`, map[string]any{"id": serverID}, &srv)
	if got := b.text(`.inbound-url`); got != srv.Server.InboundURL || strings.HasSuffix(got, key) {
		t.Errorf("after rotation the page shows %q; the server has %q (old key %s)", got, srv.Server.InboundURL, key)
	}
	env.Send(key, "/during-grace", `{}`) // the old key still works during its grace
	b.page("15-server-settings")

	// Credits: usage by month, and a switch to the plan owners may pick.
	b.do("switch plan", 20*time.Second,
		chromedp.Click(css(`a.nav-link[href="#/credits"]`)),
		chromedp.WaitVisible(css(`[data-role="usage"] svg rect.bar`)),
		chromedp.Click(css(`[data-plan-id="`+planID["growth"]+`"] [data-role="switch-plan"]`)),
		chromedp.WaitVisible(css(`dialog[open] [data-role="confirm"]`)))
	if got := b.text(`dialog[open] .dialog-body`); !strings.Contains(got, "5,000 monthly credits come with next month") {
		t.Errorf("plan switch says %q", got)
	}
	b.do("confirm the switch", 20*time.Second,
		chromedp.Click(css(`dialog[open] [data-role="confirm"]`)),
		chromedp.WaitNotPresent(css(`dialog[open]`)))
	b.waitJS("the new plan", `(document.querySelector('[data-role="plan-name"]') || {}).textContent === 'growth'`, 10*time.Second)
	b.waitJS("the plan change in the ledger", `[...document.querySelectorAll('.reason')].some(e => e.textContent === 'Plan change')`, 10*time.Second)
	if got := eval[string](b, `document.querySelector('[data-period] td:nth-child(2)').textContent`); got != "2" { // the webhook and the one sent during the key's grace
		t.Errorf("requests this month in the usage table = %q", got)
	}
	b.page("16-credits")

	// Team: a member's token, issued and revoked.
	b.do("issue a member token", 15*time.Second,
		chromedp.Click(css(`a.nav-link[href="#/team"]`)),
		chromedp.WaitVisible(css(`[data-role="issue-token"]`)),
		chromedp.Click(css(`button[data-role="issue-token"]`)),
		chromedp.WaitVisible(css(`dialog[open] form[data-role="issue-token"]`)),
		typeInto(dialogField("subject"), "bob"),
		chromedp.Click(css(`dialog[open] [data-role="submit"]`)),
		chromedp.WaitVisible(css(`dialog[open] [data-role="issued-token"]`)))
	member := b.text(`dialog[open] [data-role="issued-token"]`)
	b.do("revoke it", 15*time.Second,
		chromedp.Click(css(`dialog[open] [data-role="dismiss"]`)),
		chromedp.WaitVisible(css(`tr[data-subject="bob"] [data-role="revoke"]`)),
		chromedp.Click(css(`tr[data-subject="bob"] [data-role="revoke"]`)),
		chromedp.WaitVisible(css(`dialog[open] [data-role="confirm"]`)),
		chromedp.Click(css(`dialog[open] [data-role="confirm"]`)),
		chromedp.WaitNotPresent(css(`tr[data-subject="bob"] [data-role="revoke"]`)))
	relaytest.Eventually(t, 10*time.Second, "the member's token refused", func() bool {
		return env.GraphQL(member, `{ viewer { role } }`, nil).Code() == "UNAUTHENTICATED"
	})
	b.page("17-team")

	// An outbound job, with its attempt and the response body kept.
	b.do("send an outbound job", 20*time.Second,
		chromedp.Click(css(`a.nav-link[href="#/outbound"]`)),
		chromedp.WaitVisible(css(`[data-role="new-outbound"]`)),
		chromedp.Click(css(`a[data-role="new-outbound"]`)),
		chromedp.WaitVisible(css(`form[data-role="outbound-form"]`)),
		typeInto(pageField("url"), target.URL+"/notify"),
		typeInto(pageField("headers"), "Content-Type: application/json"),
		typeInto(pageField("body"), `{"hello":"adal"}`))
	if got := b.text(`main [data-role="cost"]`); !strings.Contains(got, "1 credit") {
		t.Errorf("outbound cost = %q", got)
	}
	b.page("18-outbound-form")
	b.do("see its attempt and response", 30*time.Second,
		chromedp.Click(css(`main [data-role="submit"]`)),
		chromedp.WaitVisible(css(`details.attempt[data-status="SUCCEEDED"]`)),
		chromedp.Click(css(`details.attempt summary`)),
		chromedp.WaitVisible(css(`[data-role="response-body"]`)))
	if got := b.text(`[data-role="response-body"]`); got != `{"received":true}` {
		t.Errorf("stored response body = %q", got)
	}
	b.page("19-outbound-job")

	// A narrow screen: the same pages, one column.
	b.narrow("request", base+"/#/requests/"+reqID, "20-narrow-request", `[data-delivery-id]`)
	b.do("narrow servers", 15*time.Second,
		chromedp.Navigate(base+"/#/servers"),
		chromedp.WaitVisible(css(`[data-server-id="`+serverID+`"]`)))
	b.page("21-narrow-servers")
	b.wide()

	// Deleting the server says what happens first.
	b.do("delete the server", 15*time.Second,
		chromedp.Navigate(base+"/#/servers/"+serverID+"/settings"),
		chromedp.WaitVisible(css(`[data-role="delete-server"]`)),
		chromedp.Click(css(`[data-role="delete-server"]`)),
		chromedp.WaitVisible(css(`dialog[open] .consequences`)))
	if got := b.text(`dialog[open] .consequences`); !strings.Contains(got, "404") || !strings.Contains(got, "2 recipients are deleted") {
		t.Errorf("delete dialog = %q", got)
	}
	b.shotViewport("22-delete-server")
	b.do("confirm the deletion", 15*time.Second,
		chromedp.Click(css(`dialog[open] [data-role="confirm"]`)),
		chromedp.WaitVisible(css(`[data-role="empty-new-server"]`)))
	resp := env.Post(srv.Server.InboundURL[len(env.Server.URL+"/in/"):], "/after", []byte(`{}`))
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("webhook after deletion = %d, want 404", resp.StatusCode)
	}

	// A member reads and acts on deliveries, and is offered nothing else.
	var tn struct{ IssueToken struct{ Token string } }
	env.MustGraphQL(owner, `mutation { issueToken(input: {role: MEMBER, subject: "carol"}) { token } }`, nil, &tn)
	b.do("sign in as a member", 20*time.Second,
		chromedp.Click(css(`.topbar button[title="Sign out"]`)),
		chromedp.WaitVisible(css("#token")),
		chromedp.SetValue(css("#token"), tn.IssueToken.Token),
		chromedp.Click(css("form.signin-card button[type=submit]")),
		chromedp.WaitVisible(css(`.state-empty`)))
	for _, sel := range []string{`[data-role="new-server"]`, `[data-role="empty-new-server"]`, `a.nav-link[href="#/team"]`} {
		if eval[bool](b, fmt.Sprintf(`!!document.querySelector(%q)`, sel)) {
			t.Errorf("a member is offered %s", sel)
		}
	}
	b.do("a member's request page", 15*time.Second,
		chromedp.Navigate(base+"/#/requests/"+reqID),
		chromedp.WaitVisible(css(`[data-role="retry"]`)))
	b.do("a member's outbound jobs", 15*time.Second,
		chromedp.Click(css(`a.nav-link[href="#/outbound"]`)),
		chromedp.WaitVisible(css(`tr[data-job-id]`)))
	if eval[bool](b, `!!document.querySelector('[data-role="new-outbound"]')`) {
		t.Error("a member is offered to send an outbound job")
	}
	b.page("23-member-outbound")

	// Back as the operator: move the tenant to another plan.
	link, _, err := env.Relay.SignInLink(env.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	b.do("the operator changes the tenant's plan", 20*time.Second,
		chromedp.Navigate(link),
		chromedp.WaitVisible(css(`tr[data-tenant-name="acme"]`)),
		chromedp.Click(css(`tr[data-tenant-name="acme"] a.row-link`)),
		chromedp.WaitVisible(css(`[data-role="change-plan"]`)),
		chromedp.Click(css(`[data-role="change-plan"]`)),
		chromedp.WaitVisible(css(`dialog[open] form[data-role="change-plan-form"]`)),
		chromedp.Click(css(`dialog[open] input[value="`+planID["starter"]+`"]`)),
		chromedp.Click(css(`dialog[open] [data-role="submit"]`)),
		chromedp.WaitNotPresent(css(`dialog[open]`)))
	b.waitJS("the tenant on its new plan", `(document.querySelector('[data-role="plan-name"]') || {}).textContent === 'starter'`, 10*time.Second)
	b.page("24-tenant-plan-changed")
	b.noExceptions()
	t.Logf("screenshots in %s", b.dir)
}
