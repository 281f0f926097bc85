package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The local call follows the server's direct sender (delivery/sender.go) rule for rule: the same headers
// dropped and added, the same path joining, redirects not followed, one timeout including the response
// body. The CLI does not import the server's packages, which would pull the database drivers into it;
// forward_test.go checks that the two stay the same.

const (
	headerRequestID   = "X-Adal-Request-Id"
	headerAttempt     = "X-Adal-Attempt"
	headerIdempotency = "X-Adal-Idempotency"
	headerPrefix      = "X-Adal-"
	userAgent         = "Adal-Webhook-Relay"
)

// maxTimeout is the longest a local call may take, response body included (DESIGN §4).
const maxTimeout = 30 * time.Second

// job is one cliListen JOB message.
type job struct {
	Kind           string   `json:"kind"`
	Message        string   `json:"message"`
	DeliveryID     string   `json:"deliveryId"`
	Attempt        int      `json:"attempt"`
	LeaseToken     string   `json:"leaseToken"`
	Method         string   `json:"method"`
	Path           string   `json:"path"`
	Query          string   `json:"query"`
	Headers        []header `json:"headers"`
	BodyBase64     string   `json:"bodyBase64"`
	RequestID      string   `json:"requestId"`
	IdempotencyKey *string  `json:"idempotencyKey"`
	TimeoutSeconds int      `json:"timeoutSeconds"`
}

type header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

func (j *job) key() jobKey { return jobKey{DeliveryID: j.DeliveryID, Attempt: j.Attempt} }

// newLocalClient returns the client for local calls: no proxy (the target is on this machine), no
// redirects followed (a redirect is an answer).
func newLocalClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 8,
			IdleConnTimeout:     60 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// forward runs j against the local service at base and reports how it went. It never fails: every
// failure is an outcome.
func forward(ctx context.Context, client *http.Client, base string, j *job, body []byte, now func() time.Time) outcome {
	timeout := maxTimeout
	if j.TimeoutSeconds > 0 && time.Duration(j.TimeoutSeconds)*time.Second < timeout {
		timeout = time.Duration(j.TimeoutSeconds) * time.Second
	}
	o := outcome{StartedAt: now()}
	done := func(status int, kind, msg string) outcome {
		o.FinishedAt = now()
		o.HTTPStatus, o.ErrorKind, o.ErrorMessage = status, kind, msg
		return o
	}
	target, err := joinTarget(base, j.Path, j.Query)
	if err != nil {
		return done(0, "CLI_LOCAL", "cannot build the local URL: "+err.Error())
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, j.Method, target, bytes.NewReader(body))
	if err != nil {
		return done(0, "CLI_LOCAL", "cannot build the local request: "+err.Error())
	}
	in := http.Header{}
	for _, h := range j.Headers {
		in.Add(h.Name, h.Value)
	}
	req.Header = forwardHeader(in)
	req.Header.Set(headerRequestID, j.RequestID)
	req.Header.Set(headerAttempt, strconv.Itoa(j.Attempt))
	if j.IdempotencyKey != nil && *j.IdempotencyKey != "" {
		req.Header.Set(headerIdempotency, *j.IdempotencyKey)
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header.Set("User-Agent", userAgent)
	}
	resp, err := client.Do(req)
	if err != nil {
		if actx.Err() != nil && ctx.Err() == nil {
			return done(0, "TIMEOUT", fmt.Sprintf("the local service sent no response within %s", timeout))
		}
		return done(0, "CLI_LOCAL", "local service unreachable: "+localError(err))
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch {
	case err != nil && actx.Err() != nil && ctx.Err() == nil:
		return done(resp.StatusCode, "TIMEOUT", fmt.Sprintf("the local service did not finish its response (status %d) within %s", resp.StatusCode, timeout))
	case err != nil:
		return done(resp.StatusCode, "CLI_LOCAL", fmt.Sprintf("the local service broke off its response (status %d): %s", resp.StatusCode, localError(err)))
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return done(resp.StatusCode, "HTTP_STATUS", "local service answered "+statusText(resp.StatusCode))
	}
	return done(resp.StatusCode, "", "")
}

func statusText(code int) string {
	return strings.TrimSpace(strconv.Itoa(code) + " " + http.StatusText(code))
}

// localError keeps the transport's own wording without the method and URL that url.Error adds.
func localError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return fmt.Sprintf("%s %s: %s", op.Op, op.Addr, op.Err)
	}
	return err.Error()
}

// hopByHop are the headers that describe one connection rather than the message, plus those the transport
// computes itself (as in delivery/sender.go).
var hopByHop = map[string]bool{
	"Connection":          true,
	"Keep-Alive":          true,
	"Proxy-Authenticate":  true,
	"Proxy-Authorization": true,
	"Proxy-Connection":    true,
	"Te":                  true,
	"Trailer":             true,
	"Trailers":            true,
	"Transfer-Encoding":   true,
	"Upgrade":             true,
	"Host":                true,
	"Content-Length":      true,
	"Expect":              true,
}

// forwardHeader copies the received headers that are meant for the recipient.
func forwardHeader(in http.Header) http.Header {
	drop := map[string]bool{}
	for _, v := range in.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				drop[http.CanonicalHeaderKey(name)] = true
			}
		}
	}
	out := make(http.Header, len(in)+3)
	for name, values := range in {
		canon := http.CanonicalHeaderKey(name)
		if hopByHop[canon] || drop[canon] || strings.HasPrefix(canon, headerPrefix) {
			continue
		}
		out[canon] = append(out[canon], values...)
	}
	return out
}

// joinTarget is delivery.JoinTarget: the --forward URL, then the path received after /in/{key} (dot
// segments resolved within it, so it cannot climb above the base path), then the query.
func joinTarget(base, pathSuffix, rawQuery string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("forward URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("forward URL: scheme must be http or https, got %q", u.Scheme)
	}
	if u.Host == "" {
		return "", errors.New("forward URL: missing host")
	}
	suffix, err := cleanSuffix(pathSuffix)
	if err != nil {
		return "", err
	}
	joined := u.EscapedPath()
	if suffix != "" {
		joined = strings.TrimSuffix(joined, "/") + "/" + suffix
	}
	if joined != "" {
		if u.Path, err = url.PathUnescape(joined); err != nil {
			return "", fmt.Errorf("path: %w", err)
		}
		u.RawPath = joined
	}
	switch {
	case rawQuery == "":
	case u.RawQuery == "":
		u.RawQuery = rawQuery
	default:
		u.RawQuery += "&" + rawQuery
	}
	u.ForceQuery = false
	u.Fragment, u.RawFragment = "", ""
	return u.String(), nil
}

// cleanSuffix resolves dot segments of an escaped path suffix and returns it without its leading slash; a
// trailing slash is kept.
func cleanSuffix(suffix string) (string, error) {
	suffix = strings.TrimLeft(suffix, "/")
	if suffix == "" {
		return "", nil
	}
	segments := strings.Split(suffix, "/")
	kept := make([]string, 0, len(segments))
	trailing := false
	for i, seg := range segments {
		decoded, err := url.PathUnescape(seg)
		if err != nil {
			return "", fmt.Errorf("path suffix: %w", err)
		}
		last := i == len(segments)-1
		switch decoded {
		case ".":
			trailing = last
		case "..":
			if len(kept) > 0 {
				kept = kept[:len(kept)-1]
			}
			trailing = last
		default:
			kept = append(kept, seg)
			trailing = false
		}
	}
	out := strings.Join(kept, "/")
	if trailing && out != "" {
		out += "/"
	}
	return out, nil
}
