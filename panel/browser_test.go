package panel_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/adal-relay/adal/panel"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
)

// chromiumPath finds a Chromium or Chrome binary: ADAL_CHROMIUM if set, else Debian's /usr/bin/chromium, else
// the usual names on PATH.
func chromiumPath() string {
	if p := os.Getenv("ADAL_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// artifactDir is where screenshots go: $ADAL_ARTIFACTS_DIR/panel when set (CI keeps it), else a temporary
// directory that lives as long as the test.
func artifactDir(t *testing.T) string {
	t.Helper()
	if root := os.Getenv("ADAL_ARTIFACTS_DIR"); root != "" {
		dir := filepath.Join(root, "panel", t.Name())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatalf("artifacts dir: %v", err)
		}
		return dir
	}
	return t.TempDir()
}

// panelURL is the base URL of a server that serves both the panel at "/" and the process's API: env.Server
// when the process serves the panel, otherwise both behind one origin, as the binary serves them, so the panel
// reaches /graphql (HTTP and websocket) same-origin.
func panelURL(t *testing.T, env *relaytest.Env) string {
	t.Helper()
	resp, err := env.Server.Client().Get(env.Server.URL + "/")
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && strings.Contains(string(b), `name="adal-panel"`) {
			return env.Server.URL
		}
	}
	api := env.Relay.Handler()
	mux := http.NewServeMux()
	for _, p := range []string{"/graphql", "/in/", "/healthz", "/readyz", "/metrics"} {
		mux.Handle(p, api)
	}
	mux.Handle("/", panel.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// browser is a headless Chromium tab driven by the test.
type browser struct {
	t     *testing.T
	ctx   context.Context
	dir   string
	mu    sync.Mutex
	msgs  []chromedp.ConsoleMessage
	shots []string
}

func startBrowser(t *testing.T) *browser {
	t.Helper()
	exe := chromiumPath()
	if exe == "" {
		t.Skip("no Chromium binary found (looked for $ADAL_CHROMIUM, /usr/bin/chromium, chromium, chromium-browser, google-chrome): install Debian's chromium to run the browser test")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 960),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
	})
	// The first Run starts the browser; it must not carry a timeout (that would stop the browser with it).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium %s: %v", exe, err)
	}
	b := &browser{t: t, ctx: ctx, dir: artifactDir(t)}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.msgs = append(b.msgs, m)
			b.mu.Unlock()
		}
	}()
	return b
}

// do runs actions with a timeout; on failure it saves a screenshot and the console, then fails the test.
// webhookTarget is an endpoint for a recipient, closed when the test ends.
func webhookTarget(t *testing.T, handler http.HandlerFunc) *httptest.Server {
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return srv
}

// answering answers every request with status.
func answering(status int) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }
}

// narrow opens url on a phone-sized screen, waits for every sel, checks that the what page fits the screen's
// width and saves it as shot; wide returns to the desktop size.
func (b *browser) narrow(what, url, shot string, sels ...string) {
	b.t.Helper()
	steps := []chromedp.Action[chromedp.Void]{chromedp.EmulateViewport(390, 844), chromedp.Navigate(url)}
	for _, sel := range sels {
		steps = append(steps, chromedp.WaitVisible(css(sel)))
	}
	b.do("narrow "+what, 15*time.Second, steps...)
	if w := eval[int](b, `document.documentElement.scrollWidth`); w > 400 {
		b.t.Errorf("the %s page is %dpx wide on a 390px screen", what, w)
	}
	b.page(shot)
}

func (b *browser) wide() {
	b.t.Helper()
	b.do("wide again", 10*time.Second, chromedp.EmulateViewport(1440, 960))
}

func (b *browser) do(what string, timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	start := time.Now()
	defer func() { b.t.Logf("step %q took %v", what, time.Since(start).Round(time.Millisecond)) }()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.shot("failure")
		b.dumpConsole()
		b.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression and decodes its value.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// text returns the text of the first element matching a CSS selector.
func (b *browser) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible))
	if err != nil {
		b.shot("failure")
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// waitJS waits until a JavaScript expression is truthy.
func (b *browser) waitJS(what, expr string, timeout time.Duration) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout+5*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr,
		chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(50*time.Millisecond)))
	if err != nil {
		b.shot("failure")
		b.dumpConsole()
		b.t.Fatalf("%s: %v", what, err)
	}
}

// shot saves a full-page PNG screenshot as name.png in the artifact directory.
func (b *browser) shot(name string) string {
	b.t.Helper()
	// From the top, so the sticky header is where it belongs in the picture.
	eval[chromedp.Void](b, `window.scrollTo(0, 0)`)
	return b.capture(name, chromedp.FullScreenshot(100))
}

// shotViewport saves what the window shows: for modal dialogs, whose backdrop covers only the viewport.
func (b *browser) shotViewport(name string) string {
	b.t.Helper()
	return b.capture(name, chromedp.CaptureScreenshot())
}

func (b *browser) capture(name string, action chromedp.Action[[]byte]) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	// Let animations (toasts, flashes, spinners) settle so the picture shows the steady state.
	_ = chromedp.Do(ctx, chromedp.Sleep(400*time.Millisecond))
	buf, err := chromedp.Run(ctx, action)
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	path := filepath.Join(b.dir, name+".png")
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		b.t.Fatalf("write screenshot: %v", err)
	}
	b.shots = append(b.shots, path)
	b.t.Logf("screenshot: %s (%s)", path, time.Now().Format("15:04:05.000"))
	return path
}

func (b *browser) dumpConsole() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range b.msgs {
		b.t.Logf("browser console %s", m)
	}
}

// noExceptions fails the test if the page threw anything it did not catch or called console.error. Entries
// of the browser's own log (a 401 answer to a bad token, say) have a Source and are expected.
func (b *browser) noExceptions() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range b.msgs {
		if m.IsException() || (m.Type == chromedp.ConsoleError && m.Source == "") {
			b.t.Errorf("browser console %s (%s:%d)", m, m.URL, m.Line)
		}
	}
}

func css(sel string) chromedp.CSS { return chromedp.CSS(sel) }

// chooseAndSubmit picks value in the form's select and submits the form in one task of the page: a form that
// a live re-render is about to replace cannot take the choice and lose it before the submit.
func chooseAndSubmit(form, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
		const el = document.querySelector(%q);
		el.value = %q;
		if (el.value !== %q) throw new Error('no option ' + %q);
		el.dispatchEvent(new Event('change', {bubbles: true}));
		el.form.querySelector('[data-role="submit"]').click();
	})()`, form+" select", value, value, value))
}

// startPanel starts a browser and a process whose retries come every 10 ms, with one tenant holding credits,
// and returns them with the panel's base URL.
func startPanel(t *testing.T, tenant string, credits int) (*browser, *relaytest.Env, string, relaytest.Tenant) {
	t.Helper()
	b := startBrowser(t)
	env := relaytest.Start(t, func(c *relay.Config) { c.RetryUnit = 10 * time.Millisecond })
	return b, env, panelURL(t, env), env.NewTenant(tenant, relaytest.PlanLimits{Credits: credits})
}

// pressSubmit submits a form from the keyboard: its submit button focused, then Enter. A click goes to the
// button's coordinates, which a live part re-rendered above it (a health card, a list) can move meanwhile.
func pressSubmit(form string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Focus(css(form+` [data-role="submit"]`)),
		chromedp.KeyEvent(kb.Enter))
}

// signIn opens the panel at hash with token pasted into the sign-in form, and waits for sel.
func (b *browser) signIn(base, hash, token, sel string) {
	b.t.Helper()
	b.do("sign in and open "+hash, 30*time.Second,
		chromedp.Navigate(base+"/"+hash),
		chromedp.WaitVisible(css("#token")),
		chromedp.SetValue(css("#token"), token),
		chromedp.Click(css("form.signin-card button[type=submit]")),
		chromedp.WaitVisible(css(sel)))
}

// TestPanelInBrowser drives the panel in headless Chromium against a real process: sign in with the owner's
// token, open the server, open the request it received, see its delivery, and look at the credits.
func TestPanelInBrowser(t *testing.T) {
	b := startBrowser(t)
	env := relaytest.Start(t)
	base := panelURL(t, env)

	tenant := env.NewTenant("acme", relaytest.PlanLimits{Credits: 500})
	target := webhookTarget(t, answering(http.StatusNoContent))
	srv := env.NewServer(tenant, "stripe-webhooks", nil)
	env.NewRecipient(tenant, srv.ID, map[string]any{
		"name": "billing-api", "method": "DIRECT_HTTP", "url": target.URL + "/hooks/stripe", "maxAttempts": 5,
	})
	cliRecipient := env.NewRecipient(tenant, srv.ID, map[string]any{
		"name": "local-dev", "method": "CLI", "retrySchedule": "STEPPED", "maxAttempts": 10,
	})
	busy := env.NewServer(tenant, "github-events", map[string]any{"retentionDays": 3})
	// More than a page of requests on the second server, for the pager.
	const busyCount = 27
	for i := range busyCount {
		resp := env.Post(busy.Key, fmt.Sprintf("/push/%02d", i), []byte(`{"ref":"refs/heads/main"}`))
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("post webhook %d: %d", i, resp.StatusCode)
		}
	}

	var requestID string
	for i, path := range []string{"/v1/events?source=stripe", "/v1/events", "/v1/invoices/in_1PQ/paid"} {
		id := env.Send(srv.Key, path, fmt.Sprintf(`{"id":"evt_%d","type":"invoice.paid","data":{"object":{"amount_paid":4200,"currency":"eur"}}}`, i))
		if id == "" {
			t.Fatalf("the webhook to %s was accepted without a request ID", path)
		}
		if i == 0 {
			requestID = id
		}
	}
	var v struct {
		Viewer struct{ Tenant struct{ CreditBalance int } }
	}
	env.MustGraphQL(tenant.Owner, `{ viewer { tenant { creditBalance } } }`, nil, &v)
	balance := v.Viewer.Tenant.CreditBalance

	// Signed out, any page shows the sign-in form.
	b.do("open the panel", 20*time.Second,
		chromedp.Navigate(base+"/#/servers"),
		chromedp.WaitVisible(css("#token")))
	b.shot("1-sign-in")

	// A bad token is refused with the server's message and code.
	b.do("try a bad token", 15*time.Second,
		chromedp.SetValue(css("#token"), "not-a-token"),
		chromedp.Click(css("form.signin-card button[type=submit]")),
		chromedp.WaitVisible(css(".form-error .alert-danger")))
	if got := b.text(".form-error .alert-code"); got != "UNAUTHENTICATED" {
		t.Errorf("bad token error code = %q", got)
	}

	b.do("sign in", 15*time.Second,
		chromedp.SetValue(css("#token"), tenant.Owner),
		chromedp.Click(css("form.signin-card button[type=submit]")),
		chromedp.WaitVisible(css(`[data-server-id="`+srv.ID+`"]`)))
	if got, want := b.text(`[data-role="balance"]`), fmt.Sprint(balance); got != want {
		t.Errorf("header balance = %q, want %q", got, want)
	}
	if got := b.text(".who-name"); got != "acme" {
		t.Errorf("header tenant = %q", got)
	}
	card := `[data-server-id="` + srv.ID + `"]`
	if got := b.text(card + " .inbound-url"); got != srv.InboundURL {
		t.Errorf("inbound URL shown = %q, want %q", got, srv.InboundURL)
	}
	if got := b.text(card + " .cli-status"); got != "CLI not connected" {
		t.Errorf("CLI status = %q", got)
	}
	if eval[string](b, `localStorage.getItem('adal.token')`) != tenant.Owner {
		t.Error("token not kept in localStorage")
	}
	b.shot("2-servers")

	b.do("open the server", 15*time.Second,
		chromedp.Click(css(card+` [data-role="open-server"]`)),
		chromedp.WaitVisible(css(`tr[data-request-id="`+requestID+`"]`)))
	if n := eval[int](b, `document.querySelectorAll('tr[data-request-id]').length`); n != 3 {
		t.Errorf("requests listed = %d, want 3", n)
	}
	// Newest first: the first request posted is the last row.
	if last := eval[string](b, `[...document.querySelectorAll('tr[data-request-id]')].pop().dataset.requestId`); last != requestID {
		t.Errorf("last row is request %s, want the oldest %s", last, requestID)
	}
	b.shot("3-requests")

	// The status filter is part of the URL and asks the server.
	b.do("filter failed", 15*time.Second,
		chromedp.Click(css(`[data-filter="FAILED"]`)),
		chromedp.WaitVisible(css(".state-empty")))
	b.do("filter all", 15*time.Second,
		chromedp.Click(css(`[data-filter="ALL"]`)),
		chromedp.WaitVisible(css(`tr[data-request-id="`+requestID+`"]`)))

	b.do("open the request", 15*time.Second,
		chromedp.Click(css(`tr[data-request-id="`+requestID+`"] a.row-link`)),
		chromedp.WaitVisible(css(`[data-delivery-id]`)))
	groups := eval[[]string](b, `[...document.querySelectorAll('.recipient-group h3')].map(e => e.textContent)`)
	if strings.Join(groups, ",") != "billing-api,local-dev" {
		t.Errorf("recipient groups = %v, want billing-api, local-dev", groups)
	}
	if got := b.text(`.request-title`); !strings.Contains(got, "/v1/events") || !strings.Contains(got, "source=stripe") {
		t.Errorf("request title = %q", got)
	}
	if body := eval[string](b, `document.querySelector('[data-role="body"]').textContent`); !strings.Contains(body, `"amount_paid": 4200`) {
		t.Errorf("body not pretty-printed: %q", body)
	}
	b.do("expand the headers", 10*time.Second,
		chromedp.Click(css(`[data-section="headers"] summary`)),
		chromedp.WaitVisible(css(`[data-section="headers"] table`)))
	b.shot("4-request")

	// The CLI recipient's delivery waits for a CLI: cancel it.
	cliGroup := `.recipient-group[data-recipient-id="` + cliRecipient + `"]`
	b.do("cancel the pending delivery", 20*time.Second,
		chromedp.Click(css(cliGroup+` .delivery[data-status="PENDING"] [data-role="cancel"]`)),
		chromedp.WaitVisible(css(`dialog[open] [data-role="confirm"]`)),
		chromedp.Click(css(`dialog[open] [data-role="confirm"]`)),
		chromedp.WaitNotPresent(css(`dialog[open]`)),
		chromedp.WaitVisible(css(cliGroup+` .delivery[data-status="CANCELED"] [data-role="retry"]`)))

	b.do("open credits", 15*time.Second,
		chromedp.Click(css(`a.nav-link[href="#/credits"]`)),
		chromedp.WaitVisible(css(`[data-role="credits-balance"]`)),
		chromedp.WaitVisible(css(`tr[data-entry-id]`)))
	if got := b.text(`[data-role="credits-balance"]`); !strings.HasPrefix(got, fmt.Sprint(balance)) {
		t.Errorf("credits page balance = %q, want %d", got, balance)
	}
	b.shot("5-credits")

	// Relay cursors both ways: 25 newest, then the 2 oldest, then back.
	paths := func() []string {
		return eval[[]string](b, `[...document.querySelectorAll('tr[data-request-id] .path-cell .mono')].map(e => e.textContent)`)
	}
	b.do("open the busy server", 15*time.Second,
		chromedp.Navigate(base+"/#/servers/"+busy.ID),
		chromedp.WaitVisible(css(`tr[data-request-id]`)))
	if p := paths(); len(p) != 25 || p[0] != "/push/26" || p[24] != "/push/02" {
		t.Errorf("first page = %d rows %v, want /push/26 … /push/02", len(p), p)
	}
	if got := b.text(".pager .muted"); got != fmt.Sprintf("%d requests", busyCount) {
		t.Errorf("total = %q", got)
	}
	b.do("older page", 15*time.Second,
		chromedp.Click(css(`[data-role="older"]`)),
		chromedp.WaitNotPresent(css(`[data-role="older"]`)),
		chromedp.WaitVisible(css(`[data-role="newer"]`)))
	if p := paths(); strings.Join(p, ",") != "/push/01,/push/00" {
		t.Errorf("second page = %v, want /push/01, /push/00", p)
	}
	b.do("newer page", 15*time.Second,
		chromedp.Click(css(`[data-role="newer"]`)),
		chromedp.WaitNotPresent(css(`[data-role="newer"]`)),
		chromedp.WaitVisible(css(`[data-role="older"]`)))
	if p := paths(); len(p) != 25 || p[0] != "/push/26" {
		t.Errorf("back on the first page = %d rows starting %v", len(p), p[:1])
	}

	// A request that does not exist (or belongs to another tenant) is a clear state, not a blank page.
	b.do("open a missing request", 15*time.Second,
		chromedp.Navigate(base+"/#/requests/999999999"),
		chromedp.WaitVisible(css(".state-empty")))
	if got := b.text(".state h3"); got != "Request not found" {
		t.Errorf("missing request state = %q", got)
	}
	b.shot("6-not-found")

	b.do("sign out", 15*time.Second,
		chromedp.Click(css(`.topbar button[title="Sign out"]`)),
		chromedp.WaitVisible(css("#token")))
	if eval[string](b, `localStorage.getItem('adal.token') || ''`) != "" {
		t.Error("sign out left the token in localStorage")
	}

	// An operator starts on the tenants, sees every tenant's servers and has no balance of their own.
	b.do("sign in as operator", 15*time.Second,
		chromedp.SetValue(css("#token"), env.AdminToken()),
		chromedp.Click(css("form.signin-card button[type=submit]")),
		chromedp.WaitVisible(css(`tr[data-tenant-name="acme"]`)),
		chromedp.Click(css(`a.nav-link[href="#/servers"]`)),
		chromedp.WaitVisible(css(`[data-server-id="`+srv.ID+`"]`)))
	if got := b.text(`[data-server-id="` + srv.ID + `"] .card-sub a`); got != "acme" {
		t.Errorf("operator's server card names tenant %q", got)
	}
	if got := b.text(".who-name"); got != "All tenants" {
		t.Errorf("operator header = %q", got)
	}
	if n := eval[int](b, `document.querySelectorAll('[data-role="balance"]').length`); n != 0 {
		t.Errorf("operator header shows a balance")
	}
	b.do("operator ledger", 15*time.Second,
		chromedp.Click(css(`a.nav-link[href="#/ledger"]`)),
		chromedp.WaitVisible(css(`tr[data-entry-id] [data-role="ledger-tenant"]`)))
	b.shot("7-operator-ledger")
	b.noExceptions()
	t.Logf("screenshots in %s", b.dir)
}

// balanceOf asks the server for the tenant's credit balance.
func balanceOf(env *relaytest.Env, token string) int {
	var v struct {
		Viewer struct{ Tenant struct{ CreditBalance int } }
	}
	env.MustGraphQL(token, `{ viewer { tenant { creditBalance } } }`, nil, &v)
	return v.Viewer.Tenant.CreditBalance
}

// TestPanelRetryFlowInBrowser is the retry flow end to end: sign in, post a webhook to a failing recipient,
// watch its attempt appear live, press Retry, see the new delivery succeed and the balance drop by one; then
// replay the request, and see a retry refused for lack of credits.
func TestPanelRetryFlowInBrowser(t *testing.T) {
	// Three credits: the webhook, the retry and the replay; the last retry then finds none.
	b, env, base, tenant := startPanel(t, "globex", 3)

	var healthy atomic.Bool
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	target := webhookTarget(t, func(w http.ResponseWriter, r *http.Request) {
		if healthy.Load() {
			w.WriteHeader(http.StatusOK)
			return
		}
		<-release // hold the first attempt until the browser is watching
		http.Error(w, "upstream exploded", http.StatusBadGateway)
	})
	srv := env.NewServer(tenant, "orders", nil)
	env.NewRecipient(tenant, srv.ID, map[string]any{
		"name": "fulfilment", "method": "DIRECT_HTTP", "url": target.URL + "/orders", "maxAttempts": 1,
	})

	b.do("sign in", 20*time.Second,
		chromedp.Navigate(base+"/#/servers/"+srv.ID),
		chromedp.WaitVisible(css("#token")),
		chromedp.SetValue(css("#token"), tenant.Owner),
		chromedp.Click(css("form.signin-card button[type=submit]")),
		chromedp.WaitVisible(css(".state-empty")))

	reqID := env.Send(srv.Key, "/orders/created", `{"order":"ord_42","total":{"amount":4200,"currency":"EUR"}}`)

	// The new request shows up in the list without a reload (deliveryUpdated on the server).
	b.do("see the request arrive", 20*time.Second, chromedp.WaitVisible(css(`tr[data-request-id="`+reqID+`"]`)))
	b.do("open the request", 15*time.Second,
		chromedp.Click(css(`tr[data-request-id="`+reqID+`"] a.row-link`)),
		chromedp.WaitVisible(css(`[data-delivery-id]`)),
		chromedp.WaitVisible(css(`.live[data-state="live"]`)))
	first := eval[string](b, `document.querySelector('[data-delivery-id]').dataset.deliveryId`)
	if n := eval[int](b, `document.querySelectorAll('tr[data-attempt]').length`); n != 0 {
		t.Fatalf("attempts shown before the attempt finished: %d", n)
	}
	eval[bool](b, `window.__noReload = true`)

	releaseOnce.Do(func() { close(release) })
	b.do("watch the failed attempt appear live", 30*time.Second,
		chromedp.WaitVisible(css(`[data-delivery-id="`+first+`"][data-status="FAILED"] tr[data-attempt="1"][data-status="FAILED"]`)))
	if !eval[bool](b, `window.__noReload === true`) {
		t.Error("the page reloaded to show the attempt")
	}
	if got := b.text(`[data-delivery-id="` + first + `"] .http-code`); got != "502" {
		t.Errorf("attempt HTTP code = %q, want 502", got)
	}
	b.shot("1-attempt-failed")

	healthy.Store(true)
	before := balanceOf(env, tenant.Owner)
	b.do("press retry", 15*time.Second,
		chromedp.Click(css(`[data-delivery-id="`+first+`"] [data-role="retry"]`)),
		chromedp.WaitVisible(css(`dialog[open] [data-role="confirm"]`)))
	if got := b.text(`dialog[open] .cost`); !strings.Contains(got, "1 credit") || !strings.Contains(got, fmt.Sprintf("%d → %d", before, before-1)) {
		t.Errorf("retry dialog does not state the cost and the balance after: %q", got)
	}
	b.shotViewport("2-retry-confirm")
	b.do("confirm retry", 30*time.Second,
		chromedp.Click(css(`dialog[open] [data-role="confirm"]`)),
		chromedp.WaitNotPresent(css(`dialog[open]`)),
		chromedp.WaitVisible(css(`[data-delivery-id]:not([data-delivery-id="`+first+`"])[data-status="SUCCEEDED"] tr[data-attempt="1"][data-status="SUCCEEDED"]`)))
	if got := balanceOf(env, tenant.Owner); got != before-1 {
		t.Fatalf("server balance after retry = %d, want %d", got, before-1)
	}
	b.waitJS("the header shows the new balance",
		fmt.Sprintf(`document.querySelector('[data-role="balance"]').textContent === '%d'`, before-1), 10*time.Second)
	if got := b.text(".toast"); !strings.Contains(got, fmt.Sprintf("New balance: %d credit", before-1)) {
		t.Errorf("toast after retry = %q", got)
	}
	if !eval[bool](b, `window.__noReload === true`) {
		t.Error("the page reloaded after the retry")
	}
	b.shot("3-retry-succeeded")

	// Replay: a new request, then the panel shows it, pointing back at the original.
	b.do("replay", 30*time.Second,
		chromedp.Click(css(`[data-role="replay"]`)),
		chromedp.WaitVisible(css(`dialog[open] [data-role="confirm"]`)),
		chromedp.Click(css(`dialog[open] [data-role="confirm"]`)),
		chromedp.WaitVisible(css(`.meta-grid a[href="#/requests/`+reqID+`"]`)),
		chromedp.WaitVisible(css(`[data-delivery-id][data-status="SUCCEEDED"]`)))
	if got := balanceOf(env, tenant.Owner); got != before-2 {
		t.Fatalf("server balance after replay = %d, want %d", got, before-2)
	}
	b.waitJS("the header shows the balance after the replay",
		fmt.Sprintf(`document.querySelector('[data-role="balance"]').textContent === '%d'`, before-2), 10*time.Second)
	b.shot("4-replayed")

	// Out of credits: the dialog shows the server's refusal and keeps the page as it was.
	b.do("retry without credits", 30*time.Second,
		chromedp.Click(css(`[data-delivery-id][data-status="SUCCEEDED"] [data-role="retry"]`)),
		chromedp.WaitVisible(css(`dialog[open] [data-role="confirm"]`)),
		chromedp.Click(css(`dialog[open] [data-role="confirm"]`)),
		chromedp.WaitVisible(css(`dialog[open] .dialog-error .alert-danger`)))
	if got := b.text(`dialog[open] .alert-title`); got != "Out of credits" {
		t.Errorf("error title = %q, want Out of credits", got)
	}
	if got := b.text(`dialog[open] .alert-code`); got != "INSUFFICIENT_CREDITS" {
		t.Errorf("error code = %q, want INSUFFICIENT_CREDITS", got)
	}
	b.shotViewport("5-out-of-credits")
	b.do("close the dialog", 10*time.Second,
		chromedp.Click(css(`dialog[open] [data-role="dismiss"]`)),
		chromedp.WaitNotPresent(css(`dialog[open]`)))
	b.noExceptions()
}
