package panel_test

import (
	"fmt"
	"io"
	"net/http"
	"slices"
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

// submitForm clicks the page's submit button from inside the page, as a person's click does: a click at the
// button's coordinates could land where a preview filling in above it has just moved it from, and be lost.
func submitForm() chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](`document.querySelector('main [data-role="submit"]').click()`)
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
		submitForm(),
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
		submitForm(),
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
		submitForm(),
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
		submitForm(),
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
