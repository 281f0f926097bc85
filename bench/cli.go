package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// cli measures the adal CLI, the real binary, as a developer runs it: CLIBacklog requests accepted while no CLI
// is connected (the server delivers them on connect), drained through one `adal listen` to the receiver, then
// an open-model load at CLIRate through it while it stays connected. The CLI's peak RSS is judged against its
// 30 MiB budget, the server's cost per request beside it; the ledger must balance as in the latency scenario:
// every request answered 202 reaches the receiver through the CLI, and nothing else does.
func (b *Runner) cli(ctx context.Context) error {
	bin, err := b.adalBinary(ctx)
	if err != nil {
		return err
	}
	s, err := b.startStage("cli", Refusal{}, nil, layout{tenants: 1})
	if err != nil {
		return err
	}
	defer s.Close()
	tr, p, srv := s.tr, s.p, s.fx.Servers[0]
	recipientID, token, err := p.setupCLIRecipient(srv)
	if err != nil {
		return err
	}
	if err := p.Start(); err != nil {
		return err
	}
	body := body1K()
	// The server's cost covers every request, from its accept to its delivery through the CLI.
	cost := b.startCosts(ctx, p.admin)
	// The backlog: accepted while the recipient has no CLI, so every delivery waits, PENDING, for one.
	backlogRate := 1000.0
	backlog, err := tr.Run(ctx, Load{Rate: backlogRate, Duration: time.Duration(float64(b.cfg.CLIBacklog) / backlogRate * float64(time.Second)),
		Targets: []string{srv.InboundURL}, Body: body, KeepIDs: true})
	if err != nil {
		return err
	}
	queuedIDs := backlog.published()
	queued := int64(len(queuedIDs))
	if got, err := tr.Received(ctx); err != nil || got != 0 {
		return fmt.Errorf("cli: the receiver saw %d deliveries before any CLI connected (%v)", got, err)
	}
	b.startMeasure()
	dir, err := os.MkdirTemp("", "adal-bench-cli-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	c, err := startCLI(bin, dir, "listen", "--server", p.URL, "--token", token, "--recipient", strconv.FormatInt(recipientID, 10),
		"--forward", tr.ReceiverURL()+"/hook", "--journal-dir", filepath.Join(dir, "journal"))
	if err != nil {
		return err
	}
	defer c.stop()
	start := time.Now()
	if err := c.awaitReceived(ctx, tr, queued, 5*time.Minute); err != nil {
		return err
	}
	drained := time.Since(start)
	drainRate := float64(queued) / drained.Seconds()
	b.logf("cli: backlog of %d drained through the CLI in %v (%.0f/s)", queued, drained.Round(time.Millisecond), drainRate)
	arrivals, err := tr.Arrivals(ctx)
	if err != nil {
		return err
	}
	drain := matchArrivals(queuedIDs, arrivals)
	if err := tr.Reset(ctx); err != nil {
		return err
	}
	live, err := tr.Run(ctx, Load{Rate: b.cfg.CLIRate, Duration: b.cfg.Duration, Targets: []string{srv.InboundURL}, Body: body, KeepIDs: true})
	if err != nil {
		return err
	}
	published := live.published()
	if err := c.awaitReceived(ctx, tr, int64(len(published)), time.Minute); err != nil {
		return err
	}
	spent := cost.stop(ctx, queued+int64(len(published)), "request")
	if arrivals, err = tr.Arrivals(ctx); err != nil {
		return err
	}
	m := matchArrivals(published, arrivals)
	cliRSS, cliCPU := c.peakRSS(), c.cpu()
	elapsed := time.Since(start)
	rss := peakRSS()
	lat := m.latencies(published)
	p50, p99 := Percentile(lat, 0.5), Percentile(lat, 0.99)
	row := Row{
		Scenario: "cli",
		Figure:   fmt.Sprintf("CLI peak RSS %s", mib(cliRSS)),
		Detail: fmt.Sprintf("backlog of %d drained in %v (%.0f deliveries/s, connecting included; %s); live at %.0f/s: accept → local service p50 %s, p99 %s; ledger: %s; non-202 %d, unanswered %d; the CLI's CPU %.2f cores",
			queued, drained.Round(time.Millisecond), drainRate, drain.ledger(queuedIDs), b.cfg.CLIRate, ms(p50), ms(p99),
			m.ledger(published), live.Others()+backlog.Others(), live.Failed()+backlog.Failed(), cliCPU.Seconds()/elapsed.Seconds()),
		Target: fmt.Sprintf("CLI ≤ 30 MiB: %s", met(cliRSS > 0 && cliRSS <= 30<<20)),
		Settings: fmt.Sprintf("one `adal listen` (the real binary) forwarding to the loopback receiver; %d requests accepted at %.0f/s before it connects (deliverPendingOnConnect on), then %.0f/s for %v; 1 KiB bodies; peak RSS* and cost§ are the server's, the cost per request from its accept to its delivery through the CLI",
			b.cfg.CLIBacklog, backlogRate, b.cfg.CLIRate, b.cfg.Duration),
		PeakRSS: rss,
		Cost:    spent,
	}
	void := append(drain.voids(queuedIDs), m.voids(published)...)
	if cliRSS == 0 {
		void = append(void, errors.New("the CLI's peak RSS could not be read"))
	}
	if err := p.checkLedger(queued + int64(len(published))); err != nil {
		void = append(void, err)
	}
	if err := errors.Join(void...); err != nil {
		row.Void = err.Error()
	}
	b.add(row)
	return nil
}

// adalBinary is the adal CLI to run: the configured one, or one built from this module.
func (b *Runner) adalBinary(ctx context.Context) (string, error) {
	return b.binary(ctx, &b.cfg.AdalBinary, "adal", "-adal-binary")
}

// binary is the command cmd/<name> of this module as an executable: *given when set, else one built into the
// temporary directory (the bench runs from the module, as `go run ./cmd/bench` does) and kept in *given, so it
// is built once per run. flag names the option that gives one.
func (b *Runner) binary(ctx context.Context, given *string, name, flag string) (string, error) {
	if *given != "" {
		return *given, nil
	}
	dir, err := os.MkdirTemp("", "adal-bench-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, name)
	b.logf("building cmd/%s", name)
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/adal-relay/adal/cmd/"+name)
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build cmd/%s (or give %s): %w: %s", name, flag, err, strings.TrimSpace(string(out)))
	}
	*given = bin
	return bin, nil
}

// setupCLIRecipient gives the server deliverPendingOnConnect and a CLI recipient, and issues a MEMBER token of
// the server's tenant, which is what `adal listen` needs.
func (p *Process) setupCLIRecipient(srv FixtureServer) (recipientID int64, token string, err error) {
	if err := p.graphQL(`mutation($id: ID!){ updateServer(id: $id, input: {deliverPendingOnConnect: true}){ id } }`,
		map[string]any{"id": strconv.FormatInt(srv.ID, 10)}, nil); err != nil {
		return 0, "", fmt.Errorf("update server: %w", err)
	}
	var rc struct{ CreateRecipient struct{ ID string } }
	if err := p.graphQL(`mutation($in: CreateRecipientInput!){ createRecipient(input: $in){ id } }`, map[string]any{
		"in": map[string]any{"serverId": strconv.FormatInt(srv.ID, 10), "name": "laptop", "method": "CLI"},
	}, &rc); err != nil {
		return 0, "", fmt.Errorf("create CLI recipient: %w", err)
	}
	var tok struct{ IssueToken struct{ Token string } }
	if err := p.graphQL(`mutation($in: IssueTokenInput!){ issueToken(input: $in){ token } }`, map[string]any{
		"in": map[string]any{"role": "MEMBER", "tenantId": strconv.FormatInt(srv.TenantID, 10), "subject": "bench-cli"},
	}, &tok); err != nil {
		return 0, "", fmt.Errorf("issue token: %w", err)
	}
	recipientID, _ = strconv.ParseInt(rc.CreateRecipient.ID, 10, 64)
	return recipientID, tok.IssueToken.Token, nil
}

// child is a program the bench runs beside itself (the adal CLI, cmd/server); its output is kept only as its
// last lines, for an error to show, and echoed to stderr when it has a name to prefix.
type child struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when it exited
	echo string        // prefix of its lines on stderr; empty: not echoed
	mu   sync.Mutex
	tail []string
}

// startCLI runs the adal binary with args, its configuration home in dir (never the user's).
func startCLI(bin, dir string, args ...string) (*child, error) {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "ADAL_") || strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "XDG_CONFIG_HOME=")
	})
	cmd := exec.Command(bin, args...)
	cmd.Env = append(env, "HOME="+dir, "XDG_CONFIG_HOME="+filepath.Join(dir, ".config"))
	c, err := startChild(cmd, "")
	if err != nil {
		return nil, fmt.Errorf("start the adal CLI: %w", err)
	}
	return c, nil
}

// startChild starts cmd, its output kept and, when echo is set, echoed to stderr after that prefix.
func startChild(cmd *exec.Cmd, echo string) (*child, error) {
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, done: make(chan struct{}), echo: echo}
	go func() {
		defer close(c.done)
		c.keepTail(out)
		_ = cmd.Wait()
	}()
	return c, nil
}

// keepTail reads the program's output to its end (the CLI's is a line per delivery), keeping the last few lines.
func (c *child) keepTail(r io.Reader) {
	const keep = 10
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if c.echo != "" {
			fmt.Fprintf(os.Stderr, "%s: %s\n", c.echo, sc.Text())
		}
		c.mu.Lock()
		c.tail = append(c.tail, sc.Text())
		if len(c.tail) > 2*keep {
			c.tail = append(c.tail[:0], c.tail[len(c.tail)-keep:]...)
		}
		c.mu.Unlock()
	}
}

func (c *child) lastLines() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.tail, "\n")
}

// awaitReceived waits until the receiver has seen n attempts, failing with the CLI's last words if it exits or
// they do not come within the time given.
func (c *child) awaitReceived(ctx context.Context, tr *Traffic, n int64, within time.Duration) error {
	got, err := tr.awaitReceivedUnless(ctx, n, within, c.done)
	switch {
	case err != nil:
		return err
	case got >= n:
		return nil
	}
	select {
	case <-c.done:
		return fmt.Errorf("cli: the CLI exited with %d of %d delivered; it said:\n%s", got, n, c.lastLines())
	default:
		return fmt.Errorf("cli: the receiver saw %d of %d deliveries within %v; the CLI said:\n%s", got, n, within, c.lastLines())
	}
}

// peakRSS is the program's VmHWM, 0 if it cannot be read.
func (c *child) peakRSS() int64 {
	return statusField("/proc/"+strconv.Itoa(c.cmd.Process.Pid)+"/status", "VmHWM:")
}

// cpu is the CPU time the program has spent.
func (c *child) cpu() time.Duration {
	d, _ := processCPU(c.cmd.Process.Pid)
	return d
}

// stop interrupts the program, as Ctrl-C does, and waits for it to finish its work; it kills it after 10 s.
func (c *child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}
