package panel_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/adal-relay/adal/relay/relaytest"
)

// setSource puts src into the transformation editor as typing would, in one task of the page.
func setSource(src string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
		const el = document.querySelector('[data-role="transform-source"]');
		el.value = %s;
		el.dispatchEvent(new Event('input', {bubbles: true}));
	})()`, jsString(src)))
}

// click clicks the element at sel from inside the page, as submitForm does.
func click(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).click()`, sel))
}

// TestConsoleShapingInBrowser is the owner naming an event type with a schema, making a server read each
// request's type from its body and enforce the schema, and giving a recipient (subscribed to the type, with an
// API key header) a transformation from the editor: a syntax error is shown with its line and column, a valid
// source is tried on a stored request and previewed, then saved twice; the versions list shows both, an old
// one loads back into the editor, and the next delivery runs the current version.
func TestConsoleShapingInBrowser(t *testing.T) {
	b, env, base, tenant := startPanel(t, "acme", 100)
	srv := env.NewServer(tenant, "shop", nil)
	var mu sync.Mutex
	var got []*http.Request
	var bodies []string
	target := webhookTarget(t, func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, bodies = append(got, r), append(bodies, string(raw))
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	})

	// An event type with a schema; a name the API refuses is refused in its words first.
	b.signIn(base, "#/event-types", tenant.Owner, `[data-role="new-event-type"]`)
	b.do("a name with a space", 15*time.Second,
		chromedp.Click(css(`[data-role="new-event-type"]`)),
		chromedp.WaitVisible(css(`dialog[open] form[data-role="event-type-form"]`)),
		typeInto(dialogField("name"), "order paid"),
		chromedp.Click(css(`dialog[open] [data-role="submit"]`)),
		chromedp.WaitVisible(css(`dialog[open] [data-field="name"] .field-error`)))
	apiMsg := env.GraphQL(tenant.Owner, `mutation { createEventType(input: {name: "order paid"}) { id } }`, nil)
	if got := b.text(`dialog[open] [data-field="name"] .field-error`); apiMsg.Code() != "INVALID_INPUT" || got != apiMsg.Errors[0].Message {
		t.Errorf("the form says %q where the API says %+v", got, apiMsg.Errors)
	}
	const schema = `{"type": "object", "required": ["type", "amount"], "properties": {"amount": {"type": "number", "minimum": 0}}}`
	b.do("create order.paid", 15*time.Second,
		typeInto(dialogField("name"), "order.paid"),
		typeInto(dialogField("description"), "An order was paid"),
		typeInto(dialogField("schema"), schema),
		chromedp.Click(css(`dialog[open] [data-role="submit"]`)),
		chromedp.WaitNotPresent(css(`dialog[open]`)),
		chromedp.WaitVisible(css(`tr[data-event-type-name="order.paid"]`)))
	var types struct {
		EventTypes struct {
			Edges []struct {
				Node struct{ Name, Description, Schema string }
			}
		}
	}
	env.MustGraphQL(tenant.Owner, `{ eventTypes(first: 10) { edges { node { name description schema } } } }`, nil, &types)
	if e := types.EventTypes.Edges; len(e) != 1 || e[0].Node.Description != "An order was paid" || !strings.Contains(e[0].Node.Schema, `"minimum"`) {
		t.Fatalf("event types as the API shows them: %+v", e)
	}
	b.page("shaping-event-types")

	// The server reads the type from the body's "type" and enforces the schema.
	settings := `form[data-role="server-settings"]`
	b.do("read the type from the body, enforced", 20*time.Second,
		chromedp.Navigate(base+"/#/servers/"+srv.ID+"/settings"),
		chromedp.WaitVisible(css(settings)),
		chromedp.Click(css(`main [data-field="eventTypeSource"] input[value="PATH"]`)),
		typeInto(pageField("eventTypePath"), "type"),
		chromedp.Click(css(`main [data-field="schemaValidation"] input[value="ENFORCE"]`)))
	b.page("shaping-server-settings")
	b.do("save the server's settings", 15*time.Second, pressSubmit(settings))
	b.toastSays("Settings of shop saved")
	var server struct {
		Server struct{ EventTypePath, EventTypeHeader, SchemaValidation string }
	}
	env.MustGraphQL(tenant.Owner, `query($id: ID!){ server(id: $id){ eventTypePath eventTypeHeader schemaValidation } }`, map[string]any{"id": srv.ID}, &server)
	if s := server.Server; s.EventTypePath != "type" || s.EventTypeHeader != "" || s.SchemaValidation != "ENFORCE" {
		t.Fatalf("server after saving: %+v", s)
	}
	pollUntil(t, 15*time.Second, 250*time.Millisecond, "a body against the schema refused", func() bool {
		code, _ := postWith(t, env, http.MethodPost, srv.Key, "/orders", `{"type":"order.paid","amount":"ten"}`, nil)
		return code == http.StatusUnprocessableEntity
	})
	stored := env.Send(srv.Key, "/orders", `{"type":"order.paid","amount":42}`)

	// The requests list names each request's type, and filters by it.
	row := `tr[data-request-id="` + stored + `"]`
	b.do("the request's type in the list", 15*time.Second,
		chromedp.Navigate(base+"/#/servers/"+srv.ID),
		chromedp.WaitVisible(css(row+` [data-role="event-type"]`)))
	if got := b.text(row + ` [data-role="event-type"]`); got != "order.paid" {
		t.Errorf("type shown = %q", got)
	}
	b.do("filter by the type", 15*time.Second,
		click(row+` [data-role="event-type"]`),
		chromedp.WaitVisible(css(`[data-role="clear-type"]`)),
		chromedp.WaitVisible(css(row)))
	if h := eval[string](b, `location.hash`); !strings.Contains(h, "type=order.paid") {
		t.Errorf("the filter is not in the address: %s", h)
	}
	if got := eval[string](b, `document.querySelector('[data-role="type-filter"]').value`); got != "order.paid" {
		t.Errorf("type filter holds %q", got)
	}
	b.page("shaping-requests")

	// A recipient of order.* with an API key header.
	create := `form[data-role="recipient-form"]`
	b.do("add the recipient", 20*time.Second,
		chromedp.Navigate(base+"/#/servers/"+srv.ID+"/recipients/new"),
		chromedp.WaitVisible(css(create)),
		typeInto(pageField("name"), "fulfilment"),
		typeInto(pageField("url"), target.URL+"/in"),
		typeInto(pageField("eventTypes"), "order.*"),
		typeInto(pageField("auth.headers"), "X-Api-Key: k-123"),
		pressSubmit(create),
		chromedp.WaitVisible(css(`[data-role="transform-source"]`)))
	recipientID := strings.TrimPrefix(eval[string](b, `location.hash`), "#/recipients/")
	b.waitJS("the template in the editor", `document.querySelector('[data-role="transform-source"]').value.startsWith('function transform(request)')`, 10*time.Second)
	if got := b.text(`[data-heading="auth.headers"] [data-role="auth-now"]`); !strings.Contains(got, "X-Api-Key") {
		t.Errorf("the authentication set = %q", got)
	}
	if got := eval[string](b, `document.querySelector('main [data-field="auth.headers"] textarea').value`); got != "" {
		t.Errorf("the saved header's value is in the form: %q", got)
	}
	if got := eval[string](b, `document.querySelector('main [data-field="eventTypes"] textarea').value`); got != "order.*" {
		t.Errorf("event types field = %q", got)
	}

	// A syntax error is shown under the editor, with its line and column, as the API words it.
	const broken = "function transform(request) {\n  return request +;\n}"
	b.do("save a syntax error", 15*time.Second,
		setSource(broken),
		click(`[data-role="save-transform"]`),
		chromedp.WaitVisible(css(`[data-role="transform-error"]`)))
	apiMsg = env.GraphQL(tenant.Owner, `mutation($id: ID!, $s: String!){ setRecipientTransform(recipientId: $id, source: $s){ id } }`,
		map[string]any{"id": recipientID, "s": broken})
	if got := b.text(`[data-role="transform-error"]`); apiMsg.Code() != "INVALID_INPUT" || got != apiMsg.Errors[0].Message || !strings.Contains(got, "line 2") {
		t.Errorf("the editor says %q where the API says %+v", got, apiMsg.Errors)
	}
	b.page("shaping-transform-error")

	// A valid one, tried on the stored request: the preview shows what would be sent.
	source := func(shop string) string {
		return "function transform(request) {\n" +
			"  request.headers[\"x-shop\"] = \"" + shop + "\";\n" +
			"  request.path = \"/hooks\" + request.path;\n" +
			"  request.body = {event: request.body.type, cents: request.body.amount * 100};\n" +
			"  return request;\n}"
	}
	b.do("try it on the stored request", 20*time.Second,
		setSource(source("north")),
		chromedp.WaitNotVisible(css(`[data-role="transform-error"]`)),
		choose(`[data-role="transform-request"]`, stored),
		click(`[data-role="try-transform"]`),
		chromedp.WaitVisible(css(`[data-role="transform-result"][data-result="ok"]`)))
	if got := b.text(`[data-role="transform-request-line"]`); !strings.Contains(got, "POST") || !strings.Contains(got, "/hooks/orders") {
		t.Errorf("previewed request line = %q", got)
	}
	if got := strings.ToLower(b.text(`[data-role="transform-headers"]`)); !strings.Contains(got, "x-shop") || !strings.Contains(got, "north") {
		t.Errorf("previewed headers = %q", got)
	}
	if got := b.text(`[data-role="transform-body"]`); !strings.Contains(got, `"event": "order.paid"`) || !strings.Contains(got, `"cents": 4200`) {
		t.Errorf("previewed body = %q", got)
	}
	b.page("shaping-transform-try")

	// Saved twice: two versions, the newest current; the first loads back into the editor.
	b.do("save version 1", 15*time.Second,
		click(`[data-role="save-transform"]`),
		chromedp.WaitVisible(css(`tr[data-version="1"][data-current="true"]`)))
	b.toastSays("Transformation version 1")
	b.do("save version 2", 15*time.Second,
		setSource(source("south")),
		click(`[data-role="save-transform"]`),
		chromedp.WaitVisible(css(`tr[data-version="2"][data-current="true"]`)))
	if got := eval[[]string](b, `[...document.querySelectorAll('tr[data-version]')].map((r) => r.dataset.version)`); strings.Join(got, ",") != "2,1" {
		t.Errorf("versions listed = %v, want 2, 1", got)
	}
	if got := b.text(`tr[data-version="2"]`); !strings.Contains(got, "acme-owner") {
		t.Errorf("version 2's row = %q: it should say who saved it", got)
	}
	b.do("load version 1", 10*time.Second, click(`tr[data-version="1"] [data-role="load-version"]`))
	if got := eval[string](b, `document.querySelector('[data-role="transform-source"]').value`); got != source("north") {
		t.Errorf("the editor after loading version 1 holds %q", got)
	}
	if got := eval[string](b, `document.querySelector('[data-role="transform-state"]').dataset.edited`); got != "true" {
		t.Error("a loaded version is not marked as unsaved")
	}
	b.page("shaping-transform-versions")

	// The next order is delivered shaped by version 2, with the key, and its attempt names the version.
	next := env.Send(srv.Key, "/orders", `{"type":"order.paid","amount":7}`)
	relaytest.Eventually(t, 15*time.Second, "the shaped delivery", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 1
	})
	mu.Lock()
	r, body := got[0], bodies[0]
	mu.Unlock()
	if r.URL.Path != "/in/hooks/orders" || r.Header.Get("X-Shop") != "south" || r.Header.Get("X-Api-Key") != "k-123" || !strings.Contains(body, `"cents":700`) {
		t.Errorf("delivered %s with x-shop %q, key %q, body %s", r.URL.Path, r.Header.Get("X-Shop"), r.Header.Get("X-Api-Key"), body)
	}
	b.do("open the request", 20*time.Second,
		chromedp.Navigate(base+"/#/requests/"+next),
		chromedp.WaitVisible(css(`tr[data-attempt="1"] [data-role="transform-version"]`)))
	if got := b.text(`tr[data-attempt="1"] [data-role="transform-version"]`); got != "v2" {
		t.Errorf("attempt's transformation = %q", got)
	}
	if got := b.text(`.meta-card [data-role="event-type"]`); got != "order.paid" {
		t.Errorf("request's type shown = %q", got)
	}
	b.page("shaping-request")
	b.noExceptions()
}
