package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// defaultLimit is how many requests `adal requests` lists unless told otherwise.
const defaultLimit = 20

// maxLimit is the API's largest page.
const maxLimit = 500

var requestStatuses = []string{"PENDING", "DELIVERED", "FAILED", "PARTIAL"}

const requestsQuery = `query($server: ID!, $first: Int!, $where: RequestWhereInput) {
  requests(serverId: $server, first: $first, where: $where) {
    totalCount
    edges { node {
      id method path query receivedAt status eventType schemaError replayOf { id }
      deliveries {
        id status trigger attemptCount maxAttempts nextAttemptAt superseded
        recipient { id name method destination { exchange routingKey subject stream topic } }
        attempts { number status httpStatus answer errorKind errorMessage durationMs transformVersion }
      }
    } }
  }
}`

// listedRequest is a request as requestsQuery reads it. SchemaError is set when its server checks bodies in
// shadow mode and this one does not follow its event type's schema.
type listedRequest struct {
	ID          string
	Method      string
	Path        string
	Query       string
	ReceivedAt  time.Time
	Status      string
	EventType   string
	SchemaError string
	ReplayOf    *struct{ ID string }
	Deliveries  []listedDelivery
}

type listedDelivery struct {
	ID            string
	Status        string
	Trigger       string
	AttemptCount  int
	MaxAttempts   int
	NextAttemptAt *time.Time
	Superseded    bool
	Recipient     listedRecipient
	Attempts      []listedAttempt
}

// listedRecipient is a delivery's recipient; Destination is set for broker recipients only.
type listedRecipient struct {
	ID, Name, Method string
	Destination      *destination
}

// destination is where a broker recipient publishes: the settings of its method, the others empty.
type destination struct {
	Exchange   string `json:"exchange,omitempty"`
	RoutingKey string `json:"routingKey,omitempty"`
	Subject    string `json:"subject,omitempty"`
	Stream     string `json:"stream,omitempty"`
	Topic      string `json:"topic,omitempty"`
}

// listedAttempt is an attempt as requestsQuery reads it; Answer is a broker's (its confirmation, stream
// sequence, entry ID or PUBACK), empty for HTTP; TransformVersion is the version of the recipient's
// transformation it ran, nil when none.
type listedAttempt struct {
	Number           int     `json:"number"`
	Status           string  `json:"status"`
	HTTPStatus       *int    `json:"httpStatus"`
	Answer           string  `json:"answer"`
	ErrorKind        *string `json:"errorKind"`
	ErrorMessage     string  `json:"errorMessage"`
	DurationMs       *int    `json:"durationMs"`
	TransformVersion *int    `json:"transformVersion"`
}

// requestEvent is one listed request, for --format json; eventType and schemaError are empty when it has
// none.
type requestEvent struct {
	eventHead
	ID          string          `json:"id"`
	Method      string          `json:"method"`
	Path        string          `json:"path"`
	Query       string          `json:"query"`
	ReceivedAt  time.Time       `json:"receivedAt"`
	Status      string          `json:"status"`
	EventType   string          `json:"eventType"`
	SchemaError string          `json:"schemaError"`
	ReplayOf    *string         `json:"replayOf"`
	Deliveries  []deliveryState `json:"deliveries"`
}

type deliveryState struct {
	ID            string         `json:"id"`
	RecipientID   string         `json:"recipientId"`
	Recipient     string         `json:"recipient"`
	Method        string         `json:"recipientMethod"`
	Destination   *destination   `json:"destination,omitempty"`
	Status        string         `json:"status"`
	Trigger       string         `json:"trigger"`
	AttemptCount  int            `json:"attemptCount"`
	MaxAttempts   int            `json:"maxAttempts"`
	NextAttemptAt *time.Time     `json:"nextAttemptAt"`
	Superseded    bool           `json:"superseded"`
	LastAttempt   *listedAttempt `json:"lastAttempt"`
}

func requests(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	in, err := begin("requests", args, 0, stderr)
	if err != nil {
		return err
	}
	server := flagValue(in.fs, "server")
	if server == "" {
		in.problemf("--server is required")
	}
	status := strings.ToUpper(flagValue(in.fs, "status"))
	if status != "" && !contains(requestStatuses, status) {
		in.problemf("--status must be one of %s", strings.Join(requestStatuses, ", "))
	}
	eventType := flagValue(in.fs, "event-type")
	limit := in.fs.Lookup("limit").Value.(flag.Getter).Get().(int)
	if limit < 1 || limit > maxLimit {
		in.problemf("--limit must be between 1 and %d", maxLimit)
	}
	client, out, s, err := in.finishOnServer(ctx, stdout, stderr, server, "")
	if err != nil {
		return err
	}
	vars := map[string]any{"server": s.ID, "first": limit}
	where := map[string]any{}
	if status != "" {
		where["status"] = status
	}
	if eventType != "" {
		where["eventType"] = eventType
	}
	if len(where) > 0 {
		vars["where"] = where
	}
	var res struct {
		Requests struct {
			TotalCount int
			Edges      []struct{ Node listedRequest }
		}
	}
	if err := client.do(ctx, requestsQuery, vars, &res); err != nil {
		return out.fail(explainAuth(err))
	}
	list := make([]listedRequest, len(res.Requests.Edges))
	for i, e := range res.Requests.Edges {
		list[i] = e.Node
	}
	if out.json {
		for _, r := range list {
			out.record(requestJSON(r), "")
		}
		return nil
	}
	out.record(nil, requestTable(out, s, status, eventType, list, res.Requests.TotalCount))
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func requestJSON(r listedRequest) requestEvent {
	ev := requestEvent{eventHead: head("request", time.Time{}), ID: r.ID, Method: r.Method, Path: r.Path, Query: r.Query,
		ReceivedAt: r.ReceivedAt, Status: r.Status, EventType: r.EventType, SchemaError: r.SchemaError, Deliveries: []deliveryState{}}
	if r.ReplayOf != nil {
		ev.ReplayOf = &r.ReplayOf.ID
	}
	for _, d := range r.Deliveries {
		ds := deliveryState{ID: d.ID, RecipientID: d.Recipient.ID, Recipient: d.Recipient.Name, Method: d.Recipient.Method,
			Destination: d.Recipient.Destination, Status: d.Status,
			Trigger: d.Trigger, AttemptCount: d.AttemptCount, MaxAttempts: d.MaxAttempts, NextAttemptAt: d.NextAttemptAt,
			Superseded: d.Superseded}
		if n := len(d.Attempts); n > 0 {
			ds.LastAttempt = &d.Attempts[n-1]
		}
		ev.Deliveries = append(ev.Deliveries, ds)
	}
	return ev
}

// requestTable renders requests for people: a row per request, with its event type when any has one, and
// under it why its body does not follow the type's schema, then a line per current delivery (a retried
// delivery gives way to its retry).
func requestTable(o *output, s *serverInfo, status, eventType string, list []listedRequest, total int) string {
	var b strings.Builder
	what := "requests"
	if status != "" {
		what = status + " requests"
	}
	if eventType != "" {
		what += fmt.Sprintf(" of type %q", eventType)
	}
	if len(list) == 0 {
		fmt.Fprintf(&b, "No %s on server %q.\n", what, s.Name)
		return b.String()
	}
	typed := slices.ContainsFunc(list, func(r listedRequest) bool { return r.EventType != "" })
	head := []string{"REQUEST", "RECEIVED", "METHOD", "PATH", "STATUS"}
	if typed {
		head = []string{"REQUEST", "RECEIVED", "METHOD", "PATH", "TYPE", "STATUS"}
	}
	rows := [][]string{head}
	for _, r := range list {
		row := []string{r.ID, r.ReceivedAt.Local().Format(stampLayout), r.Method, truncate(displayPath(r.Path, r.Query), 60)}
		if typed {
			row = append(row, cmp.Or(truncate(r.EventType, 40), "-"))
		}
		rows = append(rows, append(row, r.Status))
	}
	widths := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, cell := range row {
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
		}
	}
	pad := func(s string, w int) string { return s + strings.Repeat(" ", w-utf8.RuneCountInString(s)) }
	for i, row := range rows {
		var cells []string
		for c, cell := range row {
			text := cell
			if c < len(row)-1 {
				text = pad(cell, widths[c])
			}
			switch {
			case i == 0:
				text = o.paint(bold, text)
			case c == len(row)-1:
				text = o.paint(statusTone(cell), text)
			}
			cells = append(cells, text)
		}
		b.WriteString(strings.TrimRight(strings.Join(cells, "  "), " ") + "\n")
		if i == 0 {
			continue
		}
		r := list[i-1]
		if r.ReplayOf != nil {
			fmt.Fprintf(&b, "%s  %s\n", strings.Repeat(" ", widths[0]), o.paint(dim, "replay of request "+r.ReplayOf.ID))
		}
		if r.SchemaError != "" {
			fmt.Fprintf(&b, "%s  %s\n", strings.Repeat(" ", widths[0]),
				o.paint(yellow, fmt.Sprintf("does not follow the schema of %s: %s", r.EventType, truncate(r.SchemaError, 100))))
		}
		for _, d := range r.Deliveries {
			if !d.Superseded {
				fmt.Fprintf(&b, "%s  %s\n", strings.Repeat(" ", widths[0]), deliveryLine(o, d))
			}
		}
	}
	if total > len(list) {
		fmt.Fprintf(&b, "%d of %d %s; --limit N shows more.\n", len(list), total, what)
	}
	return b.String()
}

// deliveryLine describes one delivery: `delivery 12 → "my laptop": FAILED after 3/3 attempts, last 500 …`,
// and where a broker recipient publishes: `delivery 13 → "orders" (REDIS_STREAM stream "orders"): …`.
func deliveryLine(o *output, d listedDelivery) string {
	to := fmt.Sprintf("%q", d.Recipient.Name)
	if where := destinationText(d.Recipient); where != "" {
		to += " (" + where + ")"
	}
	s := fmt.Sprintf("delivery %s → %s: %s", d.ID, to, o.paint(statusTone(d.Status), d.Status))
	if d.Trigger == "MANUAL_RETRY" {
		s += " (manual retry)"
	}
	s += fmt.Sprintf(", %d/%d attempts", d.AttemptCount, d.MaxAttempts)
	if n := len(d.Attempts); n > 0 {
		last := d.Attempts[n-1]
		s += ", last: " + attemptText(last)
		if last.TransformVersion != nil {
			s += fmt.Sprintf(" (transformation v%d)", *last.TransformVersion)
		}
	}
	if d.NextAttemptAt != nil && d.Status == "PENDING" {
		s += ", next at " + d.NextAttemptAt.Local().Format(stampLayout)
	}
	return s
}

// destinationText is a broker recipient's method and settings, `RABBITMQ routing key "orders"`; empty for the
// others.
func destinationText(r listedRecipient) string {
	d := r.Destination
	if d == nil {
		return ""
	}
	parts := []string{r.Method}
	for _, s := range []struct{ name, value string }{
		{"exchange", d.Exchange}, {"routing key", d.RoutingKey}, {"subject", d.Subject}, {"stream", d.Stream}, {"topic", d.Topic},
	} {
		if s.value != "" {
			parts = append(parts, fmt.Sprintf("%s %q", s.name, s.value))
		}
	}
	return strings.Join(parts, " ")
}

// attemptText is what an attempt got: an HTTP status, what went wrong, or a broker's answer.
func attemptText(a listedAttempt) string {
	switch {
	case a.HTTPStatus != nil && (a.ErrorKind == nil || *a.ErrorKind == "HTTP_STATUS"):
		return statusText(*a.HTTPStatus)
	case a.ErrorMessage != "":
		return truncate(a.ErrorMessage, 80)
	case a.ErrorKind != nil:
		return *a.ErrorKind
	case a.Answer != "":
		return truncate(a.Answer, 80)
	}
	return a.Status
}

func statusTone(status string) tone {
	switch status {
	case "DELIVERED", "SUCCEEDED":
		return green
	case "FAILED":
		return red
	case "PARTIAL", "CANCELED":
		return yellow
	}
	return plain
}

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// triggerTimeout bounds the test webhook's round trip.
const triggerTimeout = 30 * time.Second

// triggerEvent is the result of adal trigger.
type triggerEvent struct {
	eventHead
	ServerID string `json:"serverId"`
	Server   string `json:"server"`
	URL      string `json:"url"`
	Method   string `json:"method"`
	Status   int    `json:"status"`
	// RequestID is empty when the server's answer does not carry it.
	RequestID string `json:"requestId"`
}

func trigger(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	in, err := begin("trigger", args, 0, stderr)
	if err != nil {
		return err
	}
	fs := in.fs
	server, data, method, path := flagValue(fs, "server"), flagValue(fs, "data"), strings.ToUpper(flagValue(fs, "method")), flagValue(fs, "path")
	if server == "" {
		in.problemf("--server is required")
	}
	if data == "" {
		in.problemf("--data is required: JSON, @FILE or @-")
	}
	if method == "" || strings.ContainsAny(method, " \t\r\n") {
		in.problemf("--method %q is not an HTTP method", method)
	}
	if path != "" && !strings.HasPrefix(path, "/") {
		in.problemf("--path %q must start with /", path)
	}
	header := http.Header{}
	for _, h := range flagList(fs, "header") {
		name, value, ok := strings.Cut(h, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			in.problemf("--header %q must be NAME:VALUE", h)
			continue
		}
		header.Add(name, strings.TrimSpace(value))
	}
	var body []byte
	if data != "" {
		if body, err = readData(data); err != nil {
			in.problemf("%v", err)
		}
	}
	if header.Get("Content-Type") == "" && json.Valid(body) {
		header.Set("Content-Type", "application/json")
	}
	_, out, s, err := in.finishOnServer(ctx, stdout, stderr, server, "inboundUrl")
	if err != nil {
		return err
	}
	target := s.InboundURL + path
	ctx, cancel := context.WithTimeout(ctx, triggerTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return out.fail(fmt.Errorf("cannot build the request to %s: %w", target, err))
	}
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return out.fail(&lostError{fmt.Errorf("cannot reach the inbound URL %s: %s", target, localError(err))})
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return out.fail(fmt.Errorf("the server refused the webhook: %s %s", resp.Status, strings.TrimSpace(string(raw))))
	}
	var answer struct {
		RequestID string `json:"requestId"`
	}
	_ = json.Unmarshal(raw, &answer)
	text := fmt.Sprintf("Sent %s %s to server %q: request %s (%s).\n", method, displayPath(path, ""), s.Name, answer.RequestID, resp.Status)
	if answer.RequestID == "" {
		text = fmt.Sprintf("Sent %s %s to server %q: accepted (%s); the answer does not carry the request ID.\n", method, displayPath(path, ""), s.Name, resp.Status)
	}
	out.record(triggerEvent{eventHead: head("trigger", time.Time{}), ServerID: s.ID, Server: s.Name, URL: target, Method: method,
		Status: resp.StatusCode, RequestID: answer.RequestID}, text)
	return nil
}

// readData is the body --data names: @- standard input, @FILE a file, anything else itself.
func readData(data string) ([]byte, error) {
	switch {
	case data == "@-":
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return nil, fmt.Errorf("--data @-: %w", err)
		}
		return b, nil
	case strings.HasPrefix(data, "@"):
		b, err := os.ReadFile(data[1:])
		if err != nil {
			return nil, fmt.Errorf("--data: %w", err)
		}
		return b, nil
	}
	return []byte(data), nil
}
