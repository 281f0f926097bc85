package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

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
