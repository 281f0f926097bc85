package panel_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
)

// signOut signs out from the top bar.
func (b *browser) signOut() {
	b.t.Helper()
	b.do("sign out", 20*time.Second,
		chromedp.Click(css(`.topbar button[title="Sign out"]`)),
		chromedp.WaitVisible(css("#token")))
}

// toastSays waits for a toast that contains text.
func (b *browser) toastSays(text string) {
	b.t.Helper()
	b.waitJS("a toast saying "+text, fmt.Sprintf(`[...document.querySelectorAll('.toast')].some(e => e.textContent.includes(%q))`, text), 20*time.Second)
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// postWith sends a webhook to key+suffix with the given method and headers, and returns the status and body.
func postWith(t *testing.T, env *relaytest.Env, method, key, suffix, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, env.Server.URL+"/in/"+key+suffix, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := env.Server.Client().Do(req)
	if err != nil {
		t.Fatalf("%s webhook: %v", method, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// pollUntil checks cond every interval until it holds, failing the test after timeout: for what intake applies
// within its cache's lifetime, polled gently since every accepted request is stored and charged.
func pollUntil(t *testing.T, timeout, interval time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

type recipientSettings struct {
	MaxConcurrency          *int
	SignatureHeaders        string
	SigningSecret           *string
	PreviousSecretExpiresAt *time.Time
	Filter                  json.RawMessage
}

func readRecipient(env *relaytest.Env, token, id string) recipientSettings {
	var out struct{ Node recipientSettings }
	env.MustGraphQL(token, `query($id: ID!){ node(id: $id){ ... on Recipient { maxConcurrency signatureHeaders signingSecret previousSecretExpiresAt filter } } }`,
		map[string]any{"id": id}, &out)
	return out.Node
}

// TestConsoleRecipientSettings is the owner tuning a recipient from its page: a concurrency cap and the
// signature headers, a routing filter with its live "would match" preview against requests the server
// received (the API's refusal shown under the field), and the signing secret revealed, copied and rotated. A
// member sees the recipient without its secret.
func TestConsoleRecipientSettings(t *testing.T) {
	b := startBrowser(t)
	env := relaytest.Start(t)
	base := panelURL(t, env)
	target := webhookTarget(t, answering(http.StatusNoContent))
	tenant := env.NewTenant("acme", relaytest.PlanLimits{Credits: 500})
	srv := env.NewServer(tenant, "github", nil)
	rid := env.NewRecipient(tenant, srv.ID, map[string]any{"name": "ci", "method": "DIRECT_HTTP", "url": target.URL + "/hooks"})
	mainReq := env.Send(srv.Key, "/push", `{"ref":"refs/heads/main","commits":3}`)
	devReq := env.Send(srv.Key, "/push", `{"ref":"refs/heads/dev","commits":1}`)

	// A new recipient with a cap, Standard Webhooks headers and a filter, previewed before it exists.
	create := `form[data-role="recipient-form"]`
	b.signIn(base, "#/servers/"+srv.ID+"/recipients/new", tenant.Owner, create)
	b.do("fill the new recipient", 15*time.Second,
		typeInto(pageField("name"), "posts-only"),
		typeInto(pageField("url"), target.URL+"/posts"),
		typeInto(pageField("maxConcurrency"), "3"),
		chromedp.Click(css(`main [data-field="signatureHeaders"] input[value="STANDARD_WEBHOOKS"]`)),
		typeInto(pageField("filter"), `{"method": "POST"}`))
	b.waitJS("the new recipient's filter previewed", `document.querySelector('[data-role="filter-result"]').dataset.result === 'match'`, 15*time.Second)
	if got := b.text(`[data-role="filter-result"]`); !strings.Contains(got, "Matches request #"+devReq) {
		t.Errorf("preview on the new recipient = %q, want a match with the latest request #%s", got, devReq)
	}
	b.page("recipient-new")
	b.do("add it", 15*time.Second,
		pressSubmit(create),
		chromedp.WaitVisible(css(`[data-role="health"]`)))
	newID := strings.TrimPrefix(eval[string](b, `location.hash`), "#/recipients/")
	if r := readRecipient(env, tenant.Owner, newID); r.MaxConcurrency == nil || *r.MaxConcurrency != 3 || r.SignatureHeaders != "STANDARD_WEBHOOKS" || string(r.Filter) != `{"method":"POST"}` {
		t.Errorf("new recipient = cap %v, headers %s, filter %s", r.MaxConcurrency, r.SignatureHeaders, r.Filter)
	}

	settings := `form[data-role="recipient-settings"]`
	b.do("open the recipient", 20*time.Second,
		chromedp.Navigate(base+"/#/recipients/"+rid),
		chromedp.WaitVisible(css(settings)))

	// The concurrency cap: refused as the API refuses it, then saved with the signature headers.
	apiMsg := env.GraphQL(tenant.Owner, `mutation($id: ID!){ updateRecipient(id: $id, input: {maxConcurrency: 0}) { id } }`, map[string]any{"id": rid})
	if apiMsg.Code() != "INVALID_INPUT" {
		t.Fatalf("API accepted maxConcurrency 0: %+v", apiMsg)
	}
	b.do("a cap of 0", 15*time.Second,
		typeInto(pageField("maxConcurrency"), "0"),
		pressSubmit(settings),
		chromedp.WaitVisible(css(`[data-field="maxConcurrency"] .field-error`)))
	if got := b.text(`[data-field="maxConcurrency"] .field-error`); got != apiMsg.Errors[0].Message {
		t.Errorf("the form says %q where the API says %q", got, apiMsg.Errors[0].Message)
	}
	if got := b.text(`[data-field="maxConcurrency"] .field-hint`); !strings.Contains(got, "in flight at once across all processes") {
		t.Errorf("concurrency hint = %q", got)
	}
	if got := b.text(`[data-field="signatureHeaders"]`); !strings.Contains(got, "replacing a sender\u2019s headers") {
		t.Errorf("signature headers field = %q: it should say Standard Webhooks replaces a sender's webhook-* headers", got)
	}
	b.do("a cap of 2, Standard Webhooks headers", 15*time.Second,
		typeInto(pageField("maxConcurrency"), "2"),
		chromedp.Click(css(`main [data-field="signatureHeaders"] input[value="STANDARD_WEBHOOKS"]`)),
		pressSubmit(settings))
	b.toastSays("Settings of ci saved")
	got := readRecipient(env, tenant.Owner, rid)
	if got.MaxConcurrency == nil || *got.MaxConcurrency != 2 || got.SignatureHeaders != "STANDARD_WEBHOOKS" {
		t.Fatalf("recipient after saving = cap %v, headers %s", got.MaxConcurrency, got.SignatureHeaders)
	}

	// The routing filter: a mistake is shown by the preview and, on saving, under the field in the API's words.
	const badRule = `{"bdy.ref": "refs/heads/main"}`
	b.do("type a rule with a mistake", 15*time.Second, typeInto(pageField("filter"), badRule))
	b.waitJS("the preview shows the refusal", `document.querySelector('[data-role="filter-result"]').dataset.result === 'error'`, 15*time.Second)
	if got := b.text(`[data-role="filter-result"]`); !strings.Contains(got, `unknown field "bdy"`) {
		t.Errorf("preview of a bad rule = %q", got)
	}
	apiMsg = env.GraphQL(tenant.Owner, `mutation($id: ID!, $f: JSON){ updateRecipient(id: $id, input: {filter: $f}) { id } }`,
		map[string]any{"id": rid, "f": json.RawMessage(badRule)})
	if apiMsg.Code() != "INVALID_INPUT" || !strings.HasPrefix(apiMsg.Errors[0].Message, "filter: $.bdy.ref") {
		t.Fatalf("API on a bad rule: %+v", apiMsg)
	}
	b.do("save the bad rule", 15*time.Second,
		pressSubmit(settings),
		chromedp.WaitVisible(css(`[data-field="filter"] .field-error`)))
	if got := b.text(`[data-field="filter"] .field-error`); got != apiMsg.Errors[0].Message {
		t.Errorf("the filter field says %q where the API says %q", got, apiMsg.Errors[0].Message)
	}
	b.do("a rule that is not JSON", 15*time.Second, typeInto(pageField("filter"), `{"body.ref": `))
	b.waitJS("the preview says it is not JSON", `document.querySelector('[data-role="filter-result"]').textContent.includes('not valid JSON')`, 15*time.Second)
	b.page("recipient-filter-invalid")

	// A valid rule, tested against the latest request (which it does not match), then one picked by ID.
	const rule = `{"body.ref": "refs/heads/main"}`
	b.do("type a valid rule", 15*time.Second, typeInto(pageField("filter"), rule))
	b.waitJS("the preview against the latest request", `document.querySelector('[data-role="filter-result"]').dataset.result === 'no-match'`, 15*time.Second)
	if got := b.text(`[data-role="filter-result"]`); !strings.Contains(got, "Doesn\u2019t match request #"+devReq) {
		t.Errorf("preview against the latest request = %q, want it not to match #%s", got, devReq)
	}
	b.do("pick the other request", 15*time.Second, typeInto(`[data-role="filter-request"]`, mainReq))
	b.waitJS("the preview against the picked request", `document.querySelector('[data-role="filter-result"]').dataset.result === 'match'`, 15*time.Second)
	if got := b.text(`[data-role="filter-result"]`); !strings.Contains(got, "Matches request #"+mainReq) {
		t.Errorf("preview against #%s = %q", mainReq, got)
	}
	b.page("recipient-filter-preview")
	b.do("save the rule", 15*time.Second, pressSubmit(settings))
	b.toastSays("Settings of ci saved")
	relaytest.Eventually(t, 10*time.Second, "the filter saved", func() bool {
		var f map[string]any
		_ = json.Unmarshal(readRecipient(env, tenant.Owner, rid).Filter, &f)
		return f["body.ref"] == "refs/heads/main"
	})
	// It routes: a request on dev gets no delivery to ci.
	var routed struct {
		Request struct {
			Deliveries  []struct{ Recipient struct{ ID string } }
			FilteredOut []struct{ ID string }
		}
	}
	later := env.Send(srv.Key, "/push", `{"ref":"refs/heads/dev"}`)
	env.MustGraphQL(tenant.Owner, `query($id: ID!){ request(id: $id){ deliveries { recipient { id } } filteredOut { id } } }`, map[string]any{"id": later}, &routed)
	if d := routed.Request.Deliveries; len(d) != 1 || d[0].Recipient.ID != newID || len(routed.Request.FilteredOut) != 1 || routed.Request.FilteredOut[0].ID != rid {
		t.Errorf("a request ci's saved filter does not match: %+v", routed.Request)
	}

	// The signing secret: hidden, revealed, copied (and selected when the clipboard refuses), rotated.
	secret := *readRecipient(env, tenant.Owner, rid).SigningSecret
	value := `[data-role="secret-value"]`
	if got := b.text(value); strings.Contains(got, secret[6:]) || !strings.HasPrefix(got, "whsec_") {
		t.Errorf("the secret before revealing shows %q", got)
	}
	b.do("reveal the secret", 15*time.Second, chromedp.Click(css(`[data-role="reveal-secret"]`)))
	if got := b.text(value); got != secret {
		t.Errorf("revealed secret = %q, want %q", got, secret)
	}
	b.do("hide it again", 15*time.Second, chromedp.Click(css(`[data-role="reveal-secret"]`)))
	if got := b.text(value); got == secret {
		t.Error("the secret stays shown after Hide")
	}
	eval[chromedp.Void](b, `navigator.clipboard.writeText = async (text) => { window.__copied = text; }`)
	b.do("copy the secret", 15*time.Second, chromedp.Click(css(`[data-role="copy-secret"]`)))
	b.waitJS("the secret copied", `window.__copied === `+jsString(secret)+` && document.querySelector('[data-role="copy-secret"]').textContent.includes('Copied')`, 10*time.Second)
	eval[chromedp.Void](b, `navigator.clipboard.writeText = async () => { throw new DOMException('denied', 'NotAllowedError'); }`)
	b.do("copy without a clipboard", 15*time.Second, chromedp.Click(css(`[data-role="copy-secret"]`)))
	b.waitJS("the secret selected instead", `window.getSelection().toString() === `+jsString(secret), 10*time.Second)
	if got := b.text(`[data-role="copy-secret"]`); !strings.Contains(got, "Ctrl+C") {
		t.Errorf("copy button without a clipboard says %q", got)
	}

	b.do("ask to rotate", 15*time.Second,
		chromedp.Click(css(`[data-role="rotate-secret"]`)),
		chromedp.WaitVisible(css(`dialog[open] [data-role="secret-grace-seconds"]`)))
	if got := b.text(`dialog[open] .dialog-body`); !strings.Contains(got, "both signatures") {
		t.Errorf("rotation dialog = %q: it should say both signatures are sent during the grace", got)
	}
	if got := eval[string](b, `document.querySelector('dialog[open] [data-role="secret-grace-seconds"]').value`); got != "86400" {
		t.Errorf("default grace = %s, want 24 h", got)
	}
	b.shotViewport("recipient-rotate-secret")
	b.do("rotate with a grace of an hour", 20*time.Second,
		choose(`dialog[open] [data-role="secret-grace-seconds"]`, "3600"),
		chromedp.Click(css(`dialog[open] [data-role="confirm"]`)),
		chromedp.WaitNotPresent(css(`dialog[open]`)))
	b.waitJS("the new secret shown", `(() => { const v = document.querySelector('[data-role="secret-value"]'); return v.dataset.revealed === 'true' && v.textContent !== `+jsString(secret)+`; })()`, 15*time.Second)
	shown := b.text(value)
	after := readRecipient(env, tenant.Owner, rid)
	if !strings.HasPrefix(shown, "whsec_") || shown == secret || after.SigningSecret == nil || *after.SigningSecret != shown {
		t.Errorf("after rotation the page shows %q; the API has %v (old %q)", shown, after.SigningSecret, secret)
	}
	if p := after.PreviousSecretExpiresAt; p == nil || time.Until(*p) < 50*time.Minute || time.Until(*p) > 70*time.Minute {
		t.Errorf("previous secret expires at %v, want in an hour", p)
	}
	if got := b.text(`[data-role="secret-grace"]`); !strings.Contains(got, "previous secret") {
		t.Errorf("grace note = %q", got)
	}
	b.page("recipient-settings")

	// A member sees the recipient, not its secret.
	b.signOut()
	if s := readRecipient(env, tenant.Member, rid).SigningSecret; s != nil {
		t.Fatalf("the API shows a member the secret")
	}
	b.signIn(base, "#/recipients/"+rid, tenant.Member, `[data-role="secret-hidden"]`)
	if eval[bool](b, `!!document.querySelector('[data-role="secret-value"], [data-role="rotate-secret"], form[data-role="recipient-settings"]')`) {
		t.Error("a member is shown the secret or the settings form")
	}
	if body := eval[string](b, `document.body.textContent`); strings.Contains(body, shown[6:]) {
		t.Error("the secret is on a member's page")
	}
	if got := b.text(`[data-section="settings"]`); !strings.Contains(got, "At most 2 attempts at once") || !strings.Contains(got, "refs/heads/main") {
		t.Errorf("a member's settings = %q", got)
	}
	b.page("recipient-member")
	b.noExceptions()
}

// TestConsoleServerSettings is the owner setting what a server's senders meet: API key verification,
// enforced, with a forged request then seen among the rejections; the methods it accepts and its own answer;
// a rate limit; and a rotation of the inbound key whose old URL stops working.
func TestConsoleServerSettings(t *testing.T) {
	b := startBrowser(t)
	env := relaytest.Start(t)
	base := panelURL(t, env)
	tenant := env.NewTenant("acme", relaytest.PlanLimits{Credits: 500})
	srv := env.NewServer(tenant, "payments", nil)

	verification := `form[data-role="verification-form"]`
	b.signIn(base, "#/servers/"+srv.ID+"/settings", tenant.Owner, verification)
	if got := b.text(`[data-role="verification-status"]`); !strings.Contains(got, "nothing is checked") {
		t.Errorf("verification status at first = %q", got)
	}

	// API_KEY without a key is refused as the API refuses it.
	apiMsg := env.GraphQL(tenant.Owner, `mutation($id: ID!){ updateServer(id: $id, input: {verification: {kind: API_KEY, header: "X-Api-Key"}}) { id } }`, map[string]any{"id": srv.ID})
	if apiMsg.Code() != "INVALID_INPUT" {
		t.Fatalf("API accepted API_KEY without a key: %+v", apiMsg)
	}
	b.do("API_KEY without a key", 15*time.Second,
		choose(pageField("verification.kind"), "API_KEY"),
		chromedp.WaitVisible(css(pageField("verification.header"))),
		typeInto(pageField("verification.header"), "X-Api-Key"),
		pressSubmit(verification),
		chromedp.WaitVisible(css(`[data-field="verification.secrets"] .field-error`)))
	if got := b.text(`[data-field="verification.secrets"] .field-error`); got != apiMsg.Errors[0].Message {
		t.Errorf("the form says %q where the API says %q", got, apiMsg.Errors[0].Message)
	}
	for _, hidden := range []string{"verification.algorithm", "verification.toleranceSeconds", "verification.username", "verification.queryParameter"} {
		if eval[bool](b, fmt.Sprintf(`!document.querySelector('main [data-field=%q]').hidden`, hidden)) {
			t.Errorf("API_KEY shows %s", hidden)
		}
	}
	const key = "k3y-of-the-sender"
	b.do("save API_KEY, enforced", 15*time.Second,
		typeInto(pageField("verification.secrets"), key),
		pressSubmit(verification))
	b.toastSays("payments now verifies an API key")
	b.waitJS("the status shows API_KEY", `(() => { const e = document.querySelector('[data-role="verification-status"]'); return e && e.dataset.kind === 'API_KEY' && e.dataset.enforce === 'true'; })()`, 15*time.Second)
	var sv struct {
		Server struct {
			Verification struct {
				Kind, Header string
				Enforce      bool
				SecretCount  int
			}
			AllowedMethods []string
			Response       *struct {
				Status            int
				ContentType, Body string
			}
			MaxRequestsPerSecond *int
			RejectedCount        int
			InboundURL           string
		}
	}
	readServer := func() {
		env.MustGraphQL(tenant.Owner, `query($id: ID!){ server(id: $id){ verification { kind header enforce secretCount } allowedMethods response { status contentType body } maxRequestsPerSecond rejectedCount inboundUrl } }`,
			map[string]any{"id": srv.ID}, &sv)
	}
	readServer()
	if v := sv.Server.Verification; v.Kind != "API_KEY" || v.Header != "X-Api-Key" || !v.Enforce || v.SecretCount != 1 {
		t.Fatalf("verification stored = %+v", v)
	}
	if got := b.text(`[data-role="secret-count"]`); got != "1 secret set" {
		t.Errorf("secret count shown = %q", got)
	}
	if eval[string](b, `document.querySelector('main [data-field="verification.secrets"] input').value`) != "" ||
		strings.Contains(eval[string](b, `document.body.textContent`), key) {
		t.Error("the key is shown back after saving")
	}

	// A forged request is refused and listed; the sender's own passes.
	if code, body := postWith(t, env, http.MethodPost, srv.Key, "/forged", `{}`, map[string]string{"X-Api-Key": "guess"}); code != http.StatusUnauthorized {
		t.Fatalf("forged request: %d %s", code, body)
	}
	if code, body := postWith(t, env, http.MethodPost, srv.Key, "/genuine", `{}`, map[string]string{"X-Api-Key": key}); code != http.StatusAccepted {
		t.Fatalf("genuine request: %d %s", code, body)
	}
	row := `[data-section="rejections"] tr[data-rejection-id][data-reason="MISMATCH"]`
	b.do("see the rejection", 30*time.Second, chromedp.WaitVisible(css(row)))
	if got := b.text(row); !strings.Contains(got, "POST") || !strings.Contains(got, "/forged") || !strings.Contains(got, "Mismatch") || !strings.Contains(got, "127.0.0.1") {
		t.Errorf("rejection row = %q", got)
	}
	if got := b.text(`[data-role="rejected-count"]`); !strings.HasPrefix(got, "1 request refused") {
		t.Errorf("rejection count = %q", got)
	}
	b.page("server-verification")

	// Shadow mode, saved without typing the key again: the key set is kept, and a forged request passes.
	b.do("switch to shadow mode", 15*time.Second,
		chromedp.Click(css(`main [data-field="verification.enforce"] input[value="false"]`)),
		pressSubmit(verification))
	b.toastSays("in shadow mode")
	b.waitJS("the status shows shadow mode", `document.querySelector('[data-role="verification-status"]').dataset.enforce === 'false'`, 15*time.Second)
	readServer()
	if v := sv.Server.Verification; v.Kind != "API_KEY" || v.Enforce || v.SecretCount != 1 {
		t.Fatalf("verification after shadow mode = %+v, want the key kept", v)
	}
	pollUntil(t, 20*time.Second, 500*time.Millisecond, "a forged request accepted in shadow mode", func() bool {
		code, _ := postWith(t, env, http.MethodPost, srv.Key, "/shadow", `{}`, map[string]string{"X-Api-Key": "guess"})
		return code == http.StatusAccepted
	})

	// Methods and the answer.
	intake := `form[data-role="intake-form"]`
	b.do("a method that is not one", 15*time.Second,
		typeInto(pageField("allowedMethods"), "post, put, get!"),
		pressSubmit(intake),
		chromedp.WaitVisible(css(`[data-field="allowedMethods"] .field-error`)))
	if got := b.text(`[data-field="allowedMethods"] .field-error`); got != `allowedMethods: "GET!" is not an HTTP method` {
		t.Errorf("allowedMethods error = %q", got)
	}
	b.do("POST and PUT, answered 200 JSON", 15*time.Second,
		typeInto(pageField("allowedMethods"), "post, put"),
		chromedp.Click(css(pageField("customResponse"))),
		chromedp.WaitVisible(css(pageField("response.status"))),
		typeInto(pageField("response.contentType"), "application/json"),
		typeInto(pageField("response.body"), `{"ok":true}`),
		pressSubmit(intake))
	b.toastSays("What payments accepts and answers is saved")
	readServer()
	if got := strings.Join(sv.Server.AllowedMethods, ","); got != "POST,PUT" || sv.Server.Response == nil || sv.Server.Response.Status != 200 || sv.Server.Response.Body != `{"ok":true}` {
		t.Fatalf("methods %q, answer %+v", got, sv.Server.Response)
	}
	// Intake reads a server's settings again within seconds.
	pollUntil(t, 20*time.Second, 500*time.Millisecond, "GET refused with 405", func() bool {
		code, _ := postWith(t, env, http.MethodGet, srv.Key, "/x", "", map[string]string{"X-Api-Key": key})
		return code == http.StatusMethodNotAllowed
	})
	if code, body := postWith(t, env, http.MethodPut, srv.Key, "/x", `{}`, map[string]string{"X-Api-Key": key}); code != http.StatusOK || body != `{"ok":true}` {
		t.Errorf("PUT = %d %q, want the server's own answer", code, body)
	}

	// A rate limit, saved while the methods form holds a change not saved yet: the tab is rebuilt from the saved
	// server, and the unsaved change is still there, still unsaved.
	b.do("a rate limit, with methods edited and not saved", 15*time.Second,
		typeInto(pageField("allowedMethods"), "post, put, patch"),
		chromedp.Evaluate[chromedp.Void](`window.beforeSave = document.querySelector('main form[data-role="intake-form"]')`),
		typeInto(pageField("maxRequestsPerSecond"), "5"),
		pressSubmit(`form[data-role="server-settings"]`))
	b.toastSays("Settings of payments saved")
	b.waitJS("the tab rebuilt", `(() => { const f = document.querySelector('main form[data-role="intake-form"]'); return f && f !== window.beforeSave; })()`, 15*time.Second)
	if got := eval[string](b, `document.querySelector('main [data-field="allowedMethods"] input').value`); got != "post, put, patch" {
		t.Errorf("the unsaved methods after saving the rate limit = %q, want the change kept", got)
	}
	if got := eval[string](b, `document.querySelector('main [data-field="maxRequestsPerSecond"] input').value`); got != "5" {
		t.Errorf("the rate limit shown after saving = %q", got)
	}
	readServer()
	if got := strings.Join(sv.Server.AllowedMethods, ","); got != "POST,PUT" {
		t.Errorf("methods stored = %q: the unsaved change was saved", got)
	}
	relaytest.Eventually(t, 10*time.Second, "the rate limit saved", func() bool {
		readServer()
		return sv.Server.MaxRequestsPerSecond != nil && *sv.Server.MaxRequestsPerSecond == 5
	})

	// Rotating the inbound key: the dialog says the old URL stops working, and it does.
	b.do("rotate the inbound key", 20*time.Second,
		chromedp.WaitVisible(css(`form[data-role="rotate-key"]`)),
		chooseAndSubmit(`form[data-role="rotate-key"]`, "0"),
		chromedp.WaitVisible(css(`dialog[open] [data-role="confirm"]`)))
	if got := b.text(`dialog[open] .dialog-body`); !strings.Contains(got, "stops working") {
		t.Errorf("rotation dialog = %q", got)
	}
	b.shotViewport("server-rotate-key")
	b.do("confirm the rotation", 20*time.Second,
		chromedp.Click(css(`dialog[open] [data-role="confirm"]`)),
		chromedp.WaitNotPresent(css(`dialog[open]`)))
	b.toastSays("the old one is refused")
	readServer()
	newKey := strings.TrimPrefix(sv.Server.InboundURL, env.Server.URL+"/in/")
	b.waitJS("the new inbound URL shown", `document.querySelector('.inbound-url').textContent === `+jsString(sv.Server.InboundURL), 15*time.Second)
	pollUntil(t, 20*time.Second, 500*time.Millisecond, "the old URL refused with 404", func() bool {
		code, _ := postWith(t, env, http.MethodPost, srv.Key, "/old", `{}`, map[string]string{"X-Api-Key": key})
		return code == http.StatusNotFound
	})
	if code, _ := postWith(t, env, http.MethodPost, newKey, "/new", `{}`, map[string]string{"X-Api-Key": key}); code != http.StatusOK {
		t.Errorf("the new URL answers %d", code)
	}
	b.page("server-settings")
	b.noExceptions()
}

// alertSink is an endpoint that records the alerts it receives.
type alertSink struct {
	URL    string
	mu     sync.Mutex
	alerts []receivedAlert
}

type receivedAlert struct {
	Type string
	Body map[string]any
}

func newAlertSink(t *testing.T) *alertSink {
	s := &alertSink{}
	s.URL = webhookTarget(t, func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		s.mu.Lock()
		s.alerts = append(s.alerts, receivedAlert{Type: r.Header.Get("Adal-Alert-Type"), Body: body})
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}).URL
	return s
}

func (s *alertSink) received(typ string) (receivedAlert, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.alerts {
		if a.Type == typ {
			return a, true
		}
	}
	return receivedAlert{}, false
}

// TestConsoleAlertsInBrowser: the owner subscribes an endpoint to alerts on the Alerts page (the form refuses
// what the API refuses), sets a low-credit threshold above the balance, sees the credits.low alert arrive at
// the endpoint and in the history (free of charge), opens it like any request, and deletes the subscription;
// a request a recipient's routing filter left out says so on its page.
func TestConsoleAlertsInBrowser(t *testing.T) {
	b := startBrowser(t)
	env := relaytest.Start(t, func(c *relay.Config) {
		c.RetryUnit = 10 * time.Millisecond
		c.AlertInterval = 100 * time.Millisecond
	})
	base := panelURL(t, env)
	tenant := env.NewTenant("umbrella", relaytest.PlanLimits{Credits: 40})
	sink := newAlertSink(t)
	target := webhookTarget(t, answering(http.StatusOK))
	srv := env.NewServer(tenant, "payments", nil)
	env.NewRecipient(tenant, srv.ID, map[string]any{"name": "ledger", "method": "DIRECT_HTTP", "url": target.URL + "/all"})
	bigOrders := env.NewRecipient(tenant, srv.ID, map[string]any{
		"name": "big-orders", "method": "DIRECT_HTTP", "url": target.URL + "/big",
		"filter": map[string]any{"body.amount": map[string]any{"$gte": 100}},
	})
	small := env.Send(srv.Key, "/pay", `{"amount": 5}`)

	b.signIn(base, "#/alerts", tenant.Owner, `[data-role="new-alert-subscription"]`)
	if !eval[bool](b, `!!document.querySelector('a.nav-link[href="#/alerts"][aria-current="page"]')`) {
		t.Error("the Alerts page is not in the nav")
	}
	if got := b.text("main .page-sub"); !strings.Contains(got, "Alerts cost no credits") {
		t.Errorf("the page does not say alerts are free: %q", got)
	}
	b.page("alerts-01-empty")

	// The form refuses what the API refuses, in its words.
	apiMsg := env.GraphQL(tenant.Owner, `mutation { createAlertSubscription(input: {url: "https://example.com/x", events: []}) { id } }`, nil)
	if apiMsg.Code() != "INVALID_INPUT" {
		t.Fatalf("API accepted no events: %+v", apiMsg)
	}
	b.do("open the subscription form", 15*time.Second,
		chromedp.Click(css(`[data-role="new-alert-subscription"]`)),
		chromedp.WaitVisible(css(`dialog[open] form[data-role="alert-form"]`)),
		typeInto(dialogField("url"), "https://hooks.slack.com/services/T0/B0/x"),
		chromedp.WaitVisible(css(`dialog[open] [data-field="url"] .field-preview`)))
	if got := b.text(`dialog[open] [data-field="url"] .field-preview`); !strings.Contains(got, "Slack") {
		t.Errorf("a Slack URL's preview = %q", got)
	}
	b.do("submit without events", 15*time.Second,
		typeInto(dialogField("url"), sink.URL+"/adal"),
		chromedp.Click(css(`dialog[open] [data-role="submit"]`)),
		chromedp.WaitVisible(css(`dialog[open] [data-field="RECIPIENT_DISABLED"] .field-error`)))
	if got := b.text(`dialog[open] [data-field="RECIPIENT_DISABLED"] .field-error`); got != apiMsg.Errors[0].Message {
		t.Errorf("the form says %q where the API says %q", got, apiMsg.Errors[0].Message)
	}
	if got := b.text(`dialog[open] [data-role="cost"]`); !strings.Contains(got, "no credits") {
		t.Errorf("subscription cost = %q", got)
	}
	b.shotViewport("alerts-02-form")
	b.do("subscribe to credits.low and recipient.disabled", 15*time.Second,
		chromedp.Click(css(dialogField("CREDITS_LOW"))),
		chromedp.Click(css(dialogField("RECIPIENT_DISABLED"))),
		chromedp.Click(css(`dialog[open] [data-role="submit"]`)),
		chromedp.WaitNotPresent(css(`dialog[open]`)),
		chromedp.WaitVisible(css(`tr[data-subscription-id]`)))
	if got := b.text(`tr[data-subscription-id] [data-role="alert-url"]`); got != sink.URL+"/adal" {
		t.Errorf("subscription URL = %q", got)
	}
	if got := b.text(`tr[data-subscription-id] [data-role="alert-format"]`); got != "JSON" {
		t.Errorf("subscription format = %q", got)
	}
	events := eval[[]string](b, `[...document.querySelectorAll('tr[data-subscription-id] [data-event]')].map((e) => e.dataset.event)`)
	if !sameSet(events, []string{"RECIPIENT_DISABLED", "CREDITS_LOW"}) {
		t.Errorf("events shown = %v", events)
	}
	var subs struct {
		AlertSubscriptions []struct {
			ID, URL, Format string
			Events          []string
		}
	}
	env.MustGraphQL(tenant.Owner, `{ alertSubscriptions { id url format events } }`, nil, &subs)
	if len(subs.AlertSubscriptions) != 1 || subs.AlertSubscriptions[0].URL != sink.URL+"/adal" || subs.AlertSubscriptions[0].Format != "JSON" ||
		!sameSet(subs.AlertSubscriptions[0].Events, []string{"RECIPIENT_DISABLED", "CREDITS_LOW"}) {
		t.Fatalf("subscriptions stored = %+v", subs.AlertSubscriptions)
	}

	// A threshold above the balance raises credits.low at once.
	balance := balanceOf(env, tenant.Owner)
	b.do("a threshold of 0 is refused", 15*time.Second,
		typeInto(pageField("threshold"), "0"),
		chromedp.Click(css(`form[data-role="threshold-form"] [data-role="submit"]`)),
		chromedp.WaitVisible(css(`[data-field="threshold"] .field-error`)))
	b.do("set the threshold above the balance", 15*time.Second,
		typeInto(pageField("threshold"), fmt.Sprint(balance+10)),
		chromedp.Click(css(`form[data-role="threshold-form"] [data-role="submit"]`)))
	b.waitJS("the threshold shown", fmt.Sprintf(`document.querySelector('[data-role="threshold-now"]').textContent.includes('under %d')`, balance+10), 15*time.Second)
	var tn struct {
		Viewer struct {
			Tenant struct{ LowCreditThreshold *int }
		}
	}
	env.MustGraphQL(tenant.Owner, `{ viewer { tenant { lowCreditThreshold } } }`, nil, &tn)
	if th := tn.Viewer.Tenant.LowCreditThreshold; th == nil || *th != balance+10 {
		t.Errorf("threshold stored = %v, want %d", th, balance+10)
	}
	relaytest.Eventually(t, 30*time.Second, "the credits.low alert at the endpoint", func() bool {
		_, ok := sink.received("credits.low")
		return ok
	})
	a, _ := sink.received("credits.low")
	if a.Body["type"] != "credits.low" {
		t.Errorf("alert body = %v", a.Body)
	}
	if data, _ := a.Body["data"].(map[string]any); data == nil || fmt.Sprint(data["balance"]) != fmt.Sprint(balance) {
		t.Errorf("alert data = %v, want balance %d", a.Body["data"], balance)
	}
	b.waitJS("the alert in the history, delivered", `!!document.querySelector('tr[data-alert-id][data-type="credits.low"] [data-status="SUCCEEDED"]')`, 30*time.Second)
	if got := b.text(`tr[data-alert-id][data-type="credits.low"] [data-role="alert-summary"]`); !strings.Contains(got, "Credits low") {
		t.Errorf("history summary = %q", got)
	}
	if got := balanceOf(env, tenant.Owner); got != balance {
		t.Errorf("balance after the alert = %d, want %d: alerts are free", got, balance)
	}
	b.page("alerts-03-history")

	// The alert is a request like any other: its page shows its delivery.
	alertID := eval[string](b, `document.querySelector('tr[data-alert-id][data-type="credits.low"]').dataset.alertId`)
	b.do("open the alert", 15*time.Second,
		chromedp.Click(css(`tr[data-alert-id="`+alertID+`"] a.row-link`)),
		chromedp.WaitVisible(css(`[data-delivery-id][data-status="SUCCEEDED"]`)))
	if got := eval[string](b, `location.hash`); got != "#/requests/"+alertID {
		t.Errorf("the alert opened %s", got)
	}
	if got := b.text(".crumbs"); !strings.HasPrefix(got, "Alerts") {
		t.Errorf("an alert's breadcrumb = %q, want it under Alerts", got)
	}
	b.shot("alerts-04-alert-request")
	// Retrying an alert is free too.
	b.do("retry the alert", 20*time.Second,
		chromedp.Click(css(`[data-delivery-id][data-status="SUCCEEDED"] [data-role="retry"]`)),
		chromedp.WaitVisible(css(`dialog[open] [data-role="cost"]`)))
	if got := b.text(`dialog[open] [data-role="cost"]`); !strings.Contains(got, "no credits") {
		t.Errorf("an alert's retry cost = %q, want free", got)
	}
	b.do("confirm the alert's retry", 30*time.Second,
		chromedp.Click(css(`dialog[open] [data-role="confirm"]`)),
		chromedp.WaitNotPresent(css(`dialog[open]`)))
	b.waitJS("the retried alert delivered", `document.querySelectorAll('[data-delivery-id][data-status="SUCCEEDED"]').length === 2`, 30*time.Second)
	if got := balanceOf(env, tenant.Owner); got != balance {
		t.Errorf("balance after retrying an alert = %d, want %d", got, balance)
	}

	// Deleting says what happens, then the subscription is gone.
	b.do("delete the subscription", 20*time.Second,
		chromedp.Navigate(base+"/#/alerts"),
		chromedp.WaitVisible(css(`[data-role="delete-alert-subscription"]`)),
		chromedp.Click(css(`[data-role="delete-alert-subscription"]`)),
		chromedp.WaitVisible(css(`dialog[open] .consequences`)))
	if got := b.text(`dialog[open] .dialog-body`); !strings.Contains(got, sink.URL) || !strings.Contains(got, "no credits") {
		t.Errorf("delete dialog = %q", got)
	}
	b.do("confirm the deletion", 15*time.Second,
		chromedp.Click(css(`dialog[open] [data-role="confirm"]`)),
		chromedp.WaitNotPresent(css(`dialog[open]`)),
		chromedp.WaitVisible(css(`[data-role="empty-new-alert-subscription"]`)))
	env.MustGraphQL(tenant.Owner, `{ alertSubscriptions { id url format events } }`, nil, &subs)
	if len(subs.AlertSubscriptions) != 0 {
		t.Errorf("subscriptions after deletion = %+v", subs.AlertSubscriptions)
	}
	if !eval[bool](b, `!!document.querySelector('tr[data-alert-id][data-type="credits.low"]')`) {
		t.Error("the history lost the alert sent before the deletion")
	}

	// A request the filter of big-orders left out says so on its page, naming it.
	b.do("open the small payment", 15*time.Second,
		chromedp.Navigate(base+"/#/requests/"+small),
		chromedp.WaitVisible(css(`[data-section="filtered-out"]`)))
	if got := b.text(`[data-section="filtered-out"] [data-role="filtered-out"][data-recipient-id="` + bigOrders + `"]`); !strings.Contains(got, "big-orders") {
		t.Errorf("filtered-out recipient = %q", got)
	}
	if n := eval[int](b, `document.querySelectorAll('[data-role="filtered-out"]').length`); n != 1 {
		t.Errorf("filtered-out recipients shown = %d, want 1", n)
	}
	groups := eval[[]string](b, `[...document.querySelectorAll('.recipient-group h3')].map((e) => e.textContent)`)
	if strings.Join(groups, ",") != "ledger" {
		t.Errorf("deliveries shown for %v, want ledger only", groups)
	}
	b.page("alerts-05-filtered-out")

	b.narrow("alerts", base+"/#/alerts", "alerts-06-narrow", `[data-section="alert-history"] tr[data-alert-id]`)
	b.wide()
	b.noExceptions()
	t.Logf("screenshots in %s", b.dir)
}
