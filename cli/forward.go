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

	"github.com/adal-relay/adal/webhook"
)

// The local call is the request a direct recipient would get (package webhook: the same headers dropped and
// added, the same path joining), sent the way the server's direct sender sends it: redirects not followed,
// one timeout including the response body.

// localUnreachable starts the message of an attempt whose local service could not be reached.
const localUnreachable = "local service unreachable"

// maxTimeout is the longest a local call may take, response body included: the same bound as a direct
// attempt's.
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
	// SignatureHeaders sign the attempt; the server made them, the CLI only sets them.
	SignatureHeaders []header `json:"signatureHeaders"`
	Verified         *bool    `json:"verified"`
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
	target, err := webhook.JoinTarget(base, j.Path, j.Query)
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
	req.Header = webhook.Forwarded(in)
	req.Header.Set(webhook.HeaderRequestID, j.RequestID)
	req.Header.Set(webhook.HeaderAttempt, strconv.Itoa(j.Attempt))
	if j.IdempotencyKey != nil && *j.IdempotencyKey != "" {
		req.Header.Set(webhook.HeaderIdempotency, *j.IdempotencyKey)
	}
	webhook.SetVerified(req.Header, j.Verified)
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header.Set("User-Agent", webhook.UserAgent)
	}
	// After the received headers were dropped or kept: they replace a sender's headers of the same names.
	for _, h := range j.SignatureHeaders {
		req.Header.Set(h.Name, h.Value)
	}
	resp, err := client.Do(req)
	if err != nil {
		if actx.Err() != nil && ctx.Err() == nil {
			return done(0, "TIMEOUT", fmt.Sprintf("the local service sent no response within %s", timeout))
		}
		return done(0, "CLI_LOCAL", localUnreachable+": "+localError(err))
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch {
	case err != nil && actx.Err() != nil && ctx.Err() == nil:
		return done(resp.StatusCode, "TIMEOUT", fmt.Sprintf("the local service did not finish its response (status %d) within %s", resp.StatusCode, timeout))
	case err != nil:
		return done(resp.StatusCode, "CLI_LOCAL", fmt.Sprintf("the local service broke off its response (status %d): %s", resp.StatusCode, localError(err)))
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		o = done(resp.StatusCode, "HTTP_STATUS", "local service answered "+statusText(resp.StatusCode))
		o.RetryAfterSeconds = webhook.RetryAfterSeconds(resp.StatusCode, resp.Header, o.FinishedAt)
		return o
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
