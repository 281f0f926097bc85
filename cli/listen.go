package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// Reconnect backoff: doubling from the first wait up to the cap, back to the first after a connection that
// got as far as attaching.
const (
	firstBackoff = time.Second
	maxBackoff   = 30 * time.Second
)

// reportTimeout bounds one report round trip.
const reportTimeout = 15 * time.Second

// journalSweep is how often a connected CLI retries reporting journaled results.
const journalSweep = 15 * time.Second

const listenQuery = `subscription($recipientId: ID!) {
  cliListen(recipientId: $recipientId) {
    kind message deliveryId attempt leaseToken method path query headers { name value }
    bodyBase64 requestId idempotencyKey timeoutSeconds verified
  }
}`

// Reports go over HTTP rather than the websocket: gqlgen's websocket transport runs a mutation's response
// handler twice (answer, then end of stream), which entgql.Transactioner does not expect.
const reportMutation = `mutation($input: ReportCliAttemptInput!) { reportCliAttempt(input: $input) }`

func listen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := commandFlags("listen", stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, cfgPath, err := loadConfig()
	if err != nil {
		return err
	}
	server := firstOf(flagValue(fs, "server"), getenv(envServer), cfg.Server)
	token := firstOf(flagValue(fs, "token"), getenv(envToken), cfg.Token)
	recipient := strings.TrimSpace(flagValue(fs, "recipient"))
	forwardTo := strings.TrimSpace(flagValue(fs, "forward"))
	var problems []string
	if recipient == "" {
		problems = append(problems, "--recipient is required")
	} else if strings.Trim(recipient, "0123456789") != "" {
		problems = append(problems, "--recipient must be a recipient ID (a number, as shown by the API or the panel)")
	}
	if u, err := url.Parse(forwardTo); forwardTo == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		problems = append(problems, "--forward must be a URL such as http://localhost:3000/hook")
	}
	if server == "" {
		problems = append(problems, fmt.Sprintf("no server: give --server, set %s, or run adal login (%s)", envServer, cfgPath))
	} else if _, err := wsURL(server); err != nil {
		problems = append(problems, err.Error())
	}
	if token == "" {
		problems = append(problems, fmt.Sprintf("no token: give --token, set %s, or run adal login (%s)", envToken, cfgPath))
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(stderr, "adal listen:", p)
		}
		fmt.Fprintln(stderr)
		fs.Usage()
		return errUsage
	}
	j, err := openJournal(flagValue(fs, "journal-dir"), strings.TrimRight(server, "/"), recipient)
	if err != nil {
		return err
	}
	defer j.Close()
	l := &listener{
		server:    server,
		token:     token,
		recipient: recipient,
		forwardTo: forwardTo,
		journal:   j,
		out:       &printer{w: stdout, now: time.Now},
		http:      newLocalClient(),
		api:       &http.Client{Timeout: reportTimeout},
		now:       time.Now,
		running:   map[jobKey]bool{},
		reporting: map[jobKey]bool{},
	}
	return l.run(ctx)
}

func getenv(name string) string { return strings.TrimSpace(os.Getenv(name)) }

func firstOf(values ...string) string {
	for _, v := range values {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}

// printer writes whole lines, each stamped with the local time, from any goroutine.
type printer struct {
	mu  sync.Mutex
	w   io.Writer
	now func() time.Time
}

const stampLayout = "2006-01-02 15:04:05"

func (p *printer) linef(at time.Time, format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "%s  %s\n", at.Local().Format(stampLayout), fmt.Sprintf(format, args...))
}

func (p *printer) statusf(format string, args ...any) { p.linef(p.now(), format, args...) }

// listener is one `adal listen`: the connection of the moment, and the jobs it is running, which outlive a
// connection. Results are reported over HTTP as soon as they exist; those that could not be wait in the journal
// for the next sweep or connection.
type listener struct {
	server, token, recipient, forwardTo string

	journal *journal
	out     *printer
	http    *http.Client // to the local service
	api     *http.Client // to the server, for reports
	now     func() time.Time

	mu        sync.Mutex
	conn      *wsClient       // nil while disconnected
	running   map[jobKey]bool // local calls in flight
	reporting map[jobKey]bool // reports in flight
	jobs      sync.WaitGroup
}

// run connects, reconnecting with backoff, until ctx ends or the server refuses for good.
func (l *listener) run(ctx context.Context) error {
	l.out.statusf("forwarding deliveries of recipient %s to %s (journal: %s)", l.recipient, l.forwardTo, l.journal.dir)
	backoff := firstBackoff
	var fatal error
	for {
		l.out.statusf("connecting to %s …", l.server)
		attached, err := l.session(ctx)
		if ctx.Err() != nil {
			break
		}
		if permanent(err) {
			fatal = err
			break
		}
		what := "cannot connect"
		if attached {
			what, backoff = "disconnected", firstBackoff
		}
		l.out.statusf("%s: %v; retrying in %s", what, err, backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		if ctx.Err() != nil {
			break
		}
		backoff = min(backoff*2, maxBackoff)
	}
	l.drain()
	if fatal != nil {
		return explain(fatal, l.recipient)
	}
	l.out.statusf("stopped")
	return nil
}

// explain adds what to do about a permanent error.
func explain(err error, recipient string) error {
	var gql gqlErrors
	if !errors.As(err, &gql) || len(gql) == 0 {
		return err
	}
	switch gql[0].code() {
	case "NOT_FOUND":
		return fmt.Errorf("cannot listen to recipient %s: %w; check --recipient, and that the token belongs to the recipient's tenant", recipient, err)
	case "UNAUTHENTICATED":
		return fmt.Errorf("%w; get a fresh token and run adal login", err)
	}
	return fmt.Errorf("cannot listen to recipient %s: %w", recipient, err)
}

// permanent tells errors that retrying cannot fix.
func permanent(err error) bool {
	var auth *authError
	var gql gqlErrors
	return errors.As(err, &auth) || (errors.As(err, &gql) && gql.permanent())
}

// session is one connection: report what the journal holds, then attach and run jobs until the connection
// ends (an error) or ctx does (nil; the connection is then kept for drain to report the last results).
func (l *listener) session(ctx context.Context) (attached bool, err error) {
	c, err := dialWS(ctx, l.server, l.token)
	if err != nil {
		return false, err
	}
	keep := false
	defer func() {
		if !keep {
			l.setConn(c, false)
			c.Close()
		}
	}()
	l.setConn(c, true)
	if err := l.reportJournal(ctx); err != nil {
		return false, err
	}
	id, ch, err := c.start(ctx, listenQuery, map[string]any{"recipientId": l.recipient})
	if err != nil {
		return false, err
	}
	// Results whose report failed while the connection stayed up are retried now and then.
	sweep := time.NewTicker(journalSweep)
	defer sweep.Stop()
	for {
		select {
		case <-sweep.C:
			if err := l.reportJournal(ctx); err != nil {
				if permanent(err) {
					return attached, err
				}
				l.out.statusf("reporting from the journal: %v (will retry)", err)
			}
		case <-ctx.Done():
			c.stop(id)
			keep = true
			return attached, nil
		case m, ok := <-ch:
			if !ok {
				return attached, c.Err()
			}
			switch m.Type {
			case "complete":
				return attached, errors.New("the server ended the subscription (it may be restarting)")
			case "error":
				var errs gqlErrors
				_ = json.Unmarshal(m.Payload, &errs)
				return attached, errs
			case "next":
				var res struct {
					Data   struct{ CliListen *job }
					Errors gqlErrors
				}
				if err := json.Unmarshal(m.Payload, &res); err != nil {
					return attached, fmt.Errorf("undecodable message: %w", err)
				}
				if len(res.Errors) > 0 {
					return attached, res.Errors
				}
				j := res.Data.CliListen
				switch {
				case j == nil:
				case j.Kind == "CONNECTED":
					attached = true
					l.out.statusf("connected: %s", j.Message)
					l.out.statusf("ready — waiting for deliveries (Ctrl-C to stop)")
				case j.Kind == "JOB":
					l.accept(j)
				}
			}
		}
	}
}

func (l *listener) setConn(c *wsClient, on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if on {
		l.conn = c
	} else if l.conn == c {
		l.conn = nil
	}
}

func (l *listener) currentConn() *wsClient {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conn
}

// reportJournal reports every journaled result; a job with no result whose local call is not running in
// this process was interrupted by the CLI's death, and is reported as such, not run again.
func (l *listener) reportJournal(ctx context.Context) error {
	entries, err := l.journal.list()
	if err != nil {
		return err
	}
	for _, listed := range entries {
		// Re-read under the lock: a local call that finished since the listing wrote its result before it
		// stopped counting as running.
		l.mu.Lock()
		busy := l.running[listed.key()]
		var e *entry
		if !busy {
			e, err = l.journal.get(listed.key())
		}
		l.mu.Unlock()
		if err != nil {
			return err
		}
		if busy || e == nil {
			continue // its goroutine reports it, or it is already reported
		}
		if e.Result == nil {
			now := l.now()
			e.Result = &outcome{StartedAt: now, FinishedAt: now, ErrorKind: "CLI_LOCAL", ErrorMessage: interruptedMessage}
			if err := l.journal.put(e); err != nil {
				return err
			}
			l.out.linef(e.ReceivedAt, "%s %s → %s  attempt %d  (from the journal)", e.Method, displayPath(e.Path, ""), interruptedMessage, e.Attempt)
		}
		if err := l.report(ctx, e, true); err != nil {
			return err
		}
	}
	return nil
}

// report sends e's result and forgets e once the server has it (or can never take it).
func (l *listener) report(ctx context.Context, e *entry, fromJournal bool) error {
	k := e.key()
	l.mu.Lock()
	if l.reporting[k] {
		l.mu.Unlock()
		return nil
	}
	l.reporting[k] = true
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.reporting, k)
		l.mu.Unlock()
	}()
	in := map[string]any{
		"deliveryId": e.DeliveryID, "attempt": e.Attempt, "leaseToken": e.LeaseToken,
		"startedAt": e.Result.StartedAt.UTC().Format(time.RFC3339Nano), "finishedAt": e.Result.FinishedAt.UTC().Format(time.RFC3339Nano),
	}
	if e.Result.HTTPStatus != 0 {
		in["httpStatus"] = e.Result.HTTPStatus
	}
	if e.Result.ErrorKind != "" {
		in["errorKind"] = e.Result.ErrorKind
		in["errorMessage"] = e.Result.ErrorMessage
	}
	data, err := l.post(context.WithoutCancel(ctx), reportMutation, map[string]any{"input": in})
	var gql gqlErrors
	switch {
	case errors.As(err, &gql) && gql.rejects():
		l.out.statusf("the server refused the result of %s: %v; dropped from the journal", k, err)
	case err != nil:
		return err // kept in the journal for the next try
	default:
		var res struct{ ReportCliAttempt bool }
		_ = json.Unmarshal(data, &res)
		switch {
		case !res.ReportCliAttempt:
			l.out.statusf("%s was already settled by the server (its lease ran out); result dropped", k)
		case fromJournal:
			l.out.statusf("reported %s from the journal", k)
		}
	}
	return l.journal.remove(k)
}

// post runs one GraphQL operation over HTTP.
func (l *listener) post(ctx context.Context, query string, vars map[string]any) (json.RawMessage, error) {
	endpoint, err := httpURL(l.server)
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	ctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+l.token)
	resp, err := l.api.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var res result
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("HTTP %d from the server: %w", resp.StatusCode, err)
	}
	if len(res.Errors) > 0 {
		return nil, res.Errors
	}
	return res.Data, nil
}

// accept runs a job, unless the journal shows it ran already: then its journaled result is reported.
func (l *listener) accept(j *job) {
	k := j.key()
	l.mu.Lock()
	if l.running[k] {
		l.mu.Unlock()
		return
	}
	e, err := l.journal.get(k)
	if err != nil {
		l.mu.Unlock()
		l.out.statusf("journal: %v", err)
		return
	}
	if e != nil {
		l.mu.Unlock()
		if e.Result == nil {
			now := l.now()
			e.Result = &outcome{StartedAt: now, FinishedAt: now, ErrorKind: "CLI_LOCAL", ErrorMessage: interruptedMessage}
		}
		e.LeaseToken = j.LeaseToken
		if err := l.journal.put(e); err != nil {
			l.out.statusf("journal: %v", err)
			return
		}
		l.out.statusf("%s is in the journal already: reporting its result instead of running it again", k)
		l.reportLater(e)
		return
	}
	l.running[k] = true
	l.mu.Unlock()
	e = &entry{
		Server: strings.TrimRight(l.server, "/"), RecipientID: l.recipient, DeliveryID: j.DeliveryID, Attempt: j.Attempt,
		LeaseToken: j.LeaseToken, Method: j.Method, Path: displayPath(j.Path, j.Query), ReceivedAt: l.now(),
	}
	l.jobs.Add(1)
	go func() {
		defer l.jobs.Done()
		var o outcome
		body, err := base64.StdEncoding.DecodeString(j.BodyBase64)
		switch {
		case err != nil:
			now := l.now()
			o = outcome{StartedAt: now, FinishedAt: now, ErrorKind: "CLI_LOCAL", ErrorMessage: "undecodable body from the server"}
		default:
			if err := l.journal.put(e); err != nil {
				// Without the journal entry a crash could run the job twice: do not run it.
				now := l.now()
				o = outcome{StartedAt: now, FinishedAt: now, ErrorKind: "CLI_LOCAL", ErrorMessage: "the CLI could not write its journal: " + err.Error()}
				break
			}
			o = forward(context.Background(), l.http, l.forwardTo, j, body, l.now)
		}
		e.Result = &o
		if err := l.journal.put(e); err != nil {
			l.out.statusf("journal: %v", err)
		}
		l.mu.Lock()
		delete(l.running, k)
		l.mu.Unlock()
		l.out.linef(o.StartedAt, "%s %s → %s  %s  attempt %d", j.Method, e.Path, describe(o), formatDuration(o.FinishedAt.Sub(o.StartedAt)), j.Attempt)
		if err := l.report(context.Background(), e, false); err != nil {
			l.out.statusf("could not report %s yet (%v); it stays in the journal", k, err)
		}
	}()
}

// reportLater reports e in the background on the current connection, if any.
func (l *listener) reportLater(e *entry) {
	l.jobs.Add(1)
	go func() {
		defer l.jobs.Done()
		if err := l.report(context.Background(), e, true); err != nil {
			l.out.statusf("could not report %s yet (%v); it stays in the journal", e.key(), err)
		}
	}()
}

// drain lets the local calls in flight finish and report, then closes the connection. A second Ctrl-C
// kills the process; the journal then has the rest.
func (l *listener) drain() {
	l.mu.Lock()
	n := len(l.running)
	l.mu.Unlock()
	if n > 0 {
		l.out.statusf("finishing %d local call(s) in flight (Ctrl-C again to quit now; the journal keeps them)", n)
	}
	l.jobs.Wait()
	if c := l.currentConn(); c != nil {
		l.setConn(c, false)
		c.Close()
	}
}

func displayPath(path, query string) string {
	if path == "" {
		path = "/"
	}
	if query != "" {
		path += "?" + query
	}
	return path
}

// describe is the "→ …" part of a delivery line.
func describe(o outcome) string {
	switch o.ErrorKind {
	case "":
		return statusText(o.HTTPStatus)
	case "HTTP_STATUS":
		return statusText(o.HTTPStatus)
	}
	return o.ErrorMessage
}

func formatDuration(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}
