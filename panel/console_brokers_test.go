package panel_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/adal-relay/adal/internal/brokertest"
	"github.com/adal-relay/adal/relay/relaytest"
)

type brokerRecipient struct {
	URL            string
	MaxConcurrency *int
	Destination    struct {
		RoutingKey, Stream *string
		MaxLen             *int
		TLS, HasPassword   bool
	}
}

func readBrokerRecipient(env *relaytest.Env, token, id string) brokerRecipient {
	var out struct{ Node brokerRecipient }
	env.MustGraphQL(token, `query($id: ID!){ node(id: $id){ ... on Recipient { url maxConcurrency destination { routingKey stream maxLen tls hasPassword } } } }`,
		map[string]any{"id": id}, &out)
	return out.Node
}

// TestConsoleBrokerRecipientsInBrowser is the owner adding broker recipients from the form, against the brokers
// running beside the tests: a RabbitMQ queue, its URL with a password, and a Redis stream. The form shows each
// method's settings and refuses a URL of another scheme in the API's words; the recipient page shows the URL
// without its password, and the settings; a request's page shows each attempt's broker answer; and saving the
// settings with the URL left empty keeps the URL, password included.
func TestConsoleBrokerRecipientsInBrowser(t *testing.T) {
	b := startBrowser(t)
	env := relaytest.Start(t)
	base := panelURL(t, env)
	tenant := env.NewTenant("acme", relaytest.PlanLimits{Credits: 100})
	srv := env.NewServer(tenant, "orders", nil)
	queue := brokertest.RabbitMQ(t)
	stream := brokertest.Redis(t)
	routingKey := queue.Settings["routingKey"].(string)
	streamName := stream.Settings["stream"].(string)
	visible := func(field string) bool {
		return eval[bool](b, `!document.querySelector('main [data-field="`+field+`"]').hidden`)
	}

	// RabbitMQ: its settings, and a URL of another scheme refused as the API refuses it.
	create := `form[data-role="recipient-form"]`
	b.signIn(base, "#/servers/"+srv.ID+"/recipients/new", tenant.Owner, create)
	b.do("choose RabbitMQ with an https URL", 15*time.Second,
		chromedp.Click(css(`main [data-field="method"] input[value="RABBITMQ"]`)),
		chromedp.WaitVisible(css(`main [data-field="routingKey"]`)),
		typeInto(pageField("name"), "orders-queue"),
		typeInto(pageField("url"), "https://rabbit.example.com/"),
		typeInto(pageField("routingKey"), routingKey),
		submitForm(),
		chromedp.WaitVisible(css(`[data-field="url"] .field-error`)))
	apiMsg := env.GraphQL(tenant.Owner, `mutation($s: ID!){ createRecipient(input: {serverId: $s, name: "x", method: RABBITMQ, url: "https://rabbit.example.com/", destination: {routingKey: "q"}}) { id } }`,
		map[string]any{"s": srv.ID})
	if got := b.text(`[data-field="url"] .field-error`); apiMsg.Code() != "INVALID_INPUT" || got != apiMsg.Errors[0].Message {
		t.Errorf("the form says %q where the API says %+v", got, apiMsg.Errors)
	}
	if got := b.text(`[data-field="url"] .field-hint`); !strings.Contains(got, "amqp://") || !strings.Contains(got, "amqps://") || !strings.Contains(got, "write-only") {
		t.Errorf("RabbitMQ URL hint = %q: it should name the schemes and say the password is write-only", got)
	}
	for field, want := range map[string]bool{"exchange": true, "routingKey": true, "subject": false, "stream": false, "topic": false, "caCertificate": false} {
		if visible(field) != want {
			t.Errorf("with RabbitMQ chosen, the %s field visible = %v", field, !want)
		}
	}
	b.page("broker-form-rabbitmq")
	b.do("add the RabbitMQ recipient", 15*time.Second,
		typeInto(pageField("url"), brokertest.RabbitMQURL),
		submitForm(),
		chromedp.WaitVisible(css(`[data-role="broker-url"]`)))
	rabbitID := strings.TrimPrefix(eval[string](b, `location.hash`), "#/recipients/")
	rabbit := readBrokerRecipient(env, tenant.Owner, rabbitID)
	if !rabbit.Destination.HasPassword || rabbit.Destination.RoutingKey == nil || *rabbit.Destination.RoutingKey != routingKey || strings.Contains(rabbit.URL, "guest:guest") {
		t.Fatalf("the RabbitMQ recipient as the API shows it: %+v", rabbit)
	}
	if got := b.text(`[data-role="broker-url"]`); got != rabbit.URL {
		t.Errorf("the page shows the URL %q, the API %q", got, rabbit.URL)
	}
	if got := b.text(`[data-role="health"] [data-setting="routingKey"]`); got != routingKey {
		t.Errorf("routing key shown = %q, want %q", got, routingKey)
	}
	if got := b.text(`[data-role="health"] [data-setting="exchange"]`); got != "The default exchange" {
		t.Errorf("exchange shown = %q", got)
	}
	if got := b.text(`[data-role="broker-password"]`); !strings.Contains(got, "password set") {
		t.Errorf("password note = %q", got)
	}
	if got := b.text(`.page-head [data-method]`); got != "RabbitMQ" {
		t.Errorf("method shown = %q", got)
	}
	if got := eval[string](b, `document.querySelector('main [data-field="url"] input').value`); got != "" {
		t.Errorf("the settings form holds the URL %q: it should be empty, to keep the stored one", got)
	}
	if body := eval[string](b, `document.body.innerHTML`); strings.Contains(body, "guest:guest") {
		t.Error("the password is on the recipient's page")
	}
	b.page("broker-recipient-rabbitmq")

	// Redis: a TLS URL offers a CA certificate, a plain one does not.
	b.do("choose a Redis stream over TLS", 15*time.Second,
		chromedp.Navigate(base+"/#/servers/"+srv.ID+"/recipients/new"),
		chromedp.WaitVisible(css(create)),
		chromedp.Click(css(`main [data-field="method"] input[value="REDIS_STREAM"]`)),
		chromedp.WaitVisible(css(`main [data-field="stream"]`)),
		typeInto(pageField("url"), "rediss://127.0.0.1:6379/0"),
		chromedp.WaitVisible(css(`main [data-field="caCertificate"]`)))
	if got := b.text(`[data-field="url"] .field-hint`); !strings.Contains(got, "rediss://") {
		t.Errorf("Redis URL hint = %q", got)
	}
	b.do("add the Redis recipient", 15*time.Second,
		typeInto(pageField("url"), brokertest.RedisURL),
		chromedp.WaitNotVisible(css(`main [data-field="caCertificate"]`)),
		typeInto(pageField("name"), "orders-stream"),
		typeInto(pageField("stream"), streamName),
		typeInto(pageField("maxLen"), "5000"),
		submitForm(),
		chromedp.WaitVisible(css(`[data-role="broker-url"]`)))
	redisID := strings.TrimPrefix(eval[string](b, `location.hash`), "#/recipients/")
	redis := readBrokerRecipient(env, tenant.Owner, redisID)
	if redis.Destination.Stream == nil || *redis.Destination.Stream != streamName || redis.Destination.MaxLen == nil || *redis.Destination.MaxLen != 5000 || redis.Destination.HasPassword {
		t.Fatalf("the Redis recipient as the API shows it: %+v", redis)
	}
	if got := b.text(`[data-role="broker-url"]`); got != redis.URL {
		t.Errorf("the page shows the URL %q, the API %q", got, redis.URL)
	}
	if got := b.text(`[data-role="health"] [data-setting="stream"]`); got != streamName {
		t.Errorf("stream shown = %q, want %q", got, streamName)
	}
	if got := strings.NewReplacer(",", "", " ", "", "\u202f", "", "\u00a0", "").Replace(b.text(`[data-role="health"] [data-setting="maxLen"]`)); !strings.Contains(got, "5000") {
		t.Errorf("length shown = %q", got)
	}
	if got := b.text(`[data-role="health"] [data-setting="tls"]`); got != "No" {
		t.Errorf("TLS shown = %q", got)
	}
	b.page("broker-recipient-redis")

	// A request goes to both brokers, and to a queue that does not exist; its page shows what each answered.
	const noQueue = "adal-test-no-such-queue"
	nowhereID := env.NewRecipient(tenant, srv.ID, map[string]any{"name": "nowhere", "method": "RABBITMQ",
		"url": brokertest.RabbitMQURL, "destination": map[string]any{"routingKey": noQueue}, "maxAttempts": 1})
	reqID := env.Send(srv.Key, "/orders/42", `{"id":42}`)
	queue.Next(15 * time.Second)
	stream.Next(15 * time.Second)
	attempt := func(recipient string) string {
		return `.recipient-group[data-recipient-id="` + recipient + `"] tr[data-attempt="1"][data-status="SUCCEEDED"] [data-role="answer"]`
	}
	b.do("open the request", 20*time.Second,
		chromedp.Navigate(base+"/#/requests/"+reqID),
		chromedp.WaitVisible(css(attempt(rabbitID))),
		chromedp.WaitVisible(css(attempt(redisID))),
		chromedp.WaitVisible(css(`.recipient-group[data-recipient-id="`+nowhereID+`"] tr[data-attempt="1"][data-status="FAILED"]`)))
	if got := b.text(attempt(rabbitID)); !strings.Contains(got, "RabbitMQ") || !strings.Contains(got, routingKey) {
		t.Errorf("RabbitMQ's answer shown = %q", got)
	}
	if got := b.text(attempt(redisID)); !strings.HasPrefix(got, "entry ") || !strings.Contains(got, streamName) {
		t.Errorf("Redis's answer shown = %q", got)
	}
	if got := strings.ToLower(b.text(`.recipient-group[data-recipient-id="` + redisID + `"] table.attempts thead`)); !strings.Contains(got, "broker answer") || strings.Contains(got, "http") {
		t.Errorf("a broker's attempts table heads %q", got)
	}
	refused := `.recipient-group[data-recipient-id="` + nowhereID + `"] tr[data-attempt="1"] `
	if got := b.text(refused + `.error-kind`); got != "Refused by the broker" {
		t.Errorf("a refusal's kind shown = %q", got)
	}
	if got := b.text(refused + `.error-message`); !strings.Contains(got, noQueue) {
		t.Errorf("a refusal's message shown = %q", got)
	}
	b.page("broker-request")

	// Saving with the URL left empty keeps it, password included: the next request still reaches the queue.
	settings := `form[data-role="recipient-settings"]`
	b.do("cap the RabbitMQ recipient", 20*time.Second,
		chromedp.Navigate(base+"/#/recipients/"+rabbitID),
		chromedp.WaitVisible(css(settings)),
		typeInto(pageField("maxConcurrency"), "2"),
		pressSubmit(settings))
	b.toastSays("Settings of orders-queue saved")
	after := readBrokerRecipient(env, tenant.Owner, rabbitID)
	if after.URL != rabbit.URL || !after.Destination.HasPassword || after.MaxConcurrency == nil || *after.MaxConcurrency != 2 ||
		after.Destination.RoutingKey == nil || *after.Destination.RoutingKey != routingKey {
		t.Fatalf("after saving with the URL empty: %+v", after)
	}
	env.Send(srv.Key, "/orders/43", `{"id":43}`)
	queue.Next(15 * time.Second)
	b.noExceptions()
}
