package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"
)

// maxRecipients is how many recipients one adal listen serves: the server allows this many subscriptions on
// one websocket.
const maxRecipients = 32

// defaultCheckLocal is how often listen checks that a local service accepts connections while it is up.
const defaultCheckLocal = 15 * time.Second

// defaultRefresh is how often listen --server looks for CLI recipients added to the server.
const defaultRefresh = 10 * time.Second

// target is one recipient to listen for and where its deliveries go.
type target struct {
	RecipientID string
	Name        string
	Server      string
	ServerID    string // set for the recipients of --server
	Forward     string
	// Secret is the recipient's signing secret, asked for by --print-secret only; nil when the token may not
	// read it (a MEMBER's).
	Secret *string
}

func listen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	in, err := begin("listen", args, 0, stderr)
	if err != nil {
		return err
	}
	fs := in.fs
	recipients, forwards, server := flagList(fs, "recipient"), flagList(fs, "forward"), flagValue(fs, "server")
	printSecret := fs.Lookup("print-secret").Value.(flag.Getter).Get().(bool)
	in.problems = append(in.problems, checkTargets(recipients, forwards, server, printSecret)...)
	checkLocal := fs.Lookup("check-local").Value.(flag.Getter).Get().(time.Duration)
	giveUp := fs.Lookup("give-up-after").Value.(flag.Getter).Get().(time.Duration)
	refresh := fs.Lookup("refresh").Value.(flag.Getter).Get().(time.Duration)
	if checkLocal < 0 || giveUp < 0 || refresh < 0 {
		in.problemf("--check-local, --give-up-after and --refresh cannot be negative")
	}
	keepAlive, err := keepAliveFromEnv()
	if err != nil {
		in.problemf("%v", err)
	}
	client, out, err := in.finish(stdout, stderr)
	if err != nil {
		return err
	}
	l := newListener(client, out, keepAlive, checkLocal, giveUp)
	if printSecret && len(forwards) == 0 {
		forwards = []string{""}
	}
	targets, err := l.resolve(ctx, recipients, forwards, server, printSecret)
	if err != nil || targets == nil {
		return out.fail(err) // nil: stopped while waiting for the server
	}
	if printSecret {
		return out.fail(printSecrets(out, targets))
	}
	if err := l.open(targets, flagValue(fs, "journal-dir")); err != nil {
		return out.fail(err)
	}
	if server != "" && refresh > 0 {
		l.refresh = &refresher{serverID: targets[0].ServerID, forward: forwards[0], every: refresh, skip: map[string]bool{}}
	}
	defer l.close()
	return out.fail(l.run(ctx))
}

// checkTargets checks the recipient, forward and server flags of listen.
func checkTargets(recipients, forwards []string, server string, printSecret bool) []string {
	var problems []string
	switch {
	case printSecret && len(forwards) > 0:
		problems = append(problems, "--print-secret prints the signing secrets and exits: give it without --forward")
	case server != "" && len(recipients) > 0:
		problems = append(problems, "give --recipient or --server, not both")
	case server == "" && len(recipients) == 0:
		problems = append(problems, "--recipient (or --server) is required")
	case len(forwards) == 0 && !printSecret:
		problems = append(problems, "--forward is required")
	case server != "" && len(forwards) > 1:
		problems = append(problems, "with --server, give one --forward: every recipient of the server forwards there")
	case len(recipients) > 0 && !printSecret && len(forwards) != 1 && len(forwards) != len(recipients):
		problems = append(problems, fmt.Sprintf("%d --recipient but %d --forward: give one --forward per --recipient, or one for all", len(recipients), len(forwards)))
	case len(recipients) > maxRecipients:
		problems = append(problems, fmt.Sprintf("at most %d recipients per adal listen; run another for the rest", maxRecipients))
	}
	seen := map[string]bool{}
	for _, r := range recipients {
		switch {
		case !isID(r):
			problems = append(problems, fmt.Sprintf("--recipient %q must be a recipient ID (a number, as shown by the API or the panel)", r))
		case seen[r]:
			problems = append(problems, fmt.Sprintf("--recipient %s is given twice", r))
		}
		seen[r] = true
	}
	for _, f := range forwards {
		if u, err := url.Parse(f); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			problems = append(problems, fmt.Sprintf("--forward %q must be a URL such as http://localhost:3000/hook", f))
		}
	}
	return problems
}

func isID(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }

// resolve finds the recipients to listen for, waiting for the server if it cannot be reached yet. It returns
// nil, nil when ctx ends meanwhile.
func (l *listener) resolve(ctx context.Context, recipients, forwards []string, server string, withSecret bool) ([]target, error) {
	backoff, since := firstBackoff, l.now()
	for {
		var ts []target
		var err error
		if server != "" {
			ts, err = serverTargets(ctx, l.api, server, forwards[0], withSecret)
		} else {
			ts, err = recipientTargets(ctx, l.api, recipients, forwards, withSecret)
		}
		var lost *lostError
		if !errors.As(err, &lost) {
			return ts, err
		}
		if ctx.Err() != nil {
			return nil, nil
		}
		if l.giveUp > 0 && l.now().Sub(since) >= l.giveUp {
			return nil, &lostError{fmt.Errorf("gave up after %s: %w", l.giveUp, err)}
		}
		l.disconnected(err, backoff, "cannot connect", "")
		if !sleepCtx(ctx, backoff) {
			return nil, nil
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// recipientFields is what listen needs to know of a recipient, with its signing secret when withSecret.
func recipientFields(withSecret bool) string {
	if withSecret {
		return `id name method deletedAt server { name } signingSecret`
	}
	return `id name method deletedAt server { name }`
}

type recipientInfo struct {
	ID            string
	Name          string
	Method        string
	DeletedAt     *time.Time
	Server        *struct{ Name string }
	SigningSecret *string
}

// recipientTargets looks the recipients up, so that a wrong one is refused before anything starts and each
// delivery line can name its recipient.
func recipientTargets(ctx context.Context, api *apiClient, ids, forwards []string, withSecret bool) ([]target, error) {
	var q strings.Builder
	vars := map[string]any{}
	q.WriteString("query(")
	for i := range ids {
		fmt.Fprintf(&q, "$r%d: ID! ", i)
	}
	q.WriteString(") {")
	for i, id := range ids {
		vars[fmt.Sprintf("r%d", i)] = id
		fmt.Fprintf(&q, " r%d: node(id: $r%d) { ... on Recipient { %s } }", i, i, recipientFields(withSecret))
	}
	q.WriteString(" }")
	var out map[string]*recipientInfo
	if err := api.do(ctx, q.String(), vars, &out); err != nil {
		return nil, explainAuth(err)
	}
	ts := make([]target, len(ids))
	for i, id := range ids {
		r := out[fmt.Sprintf("r%d", i)]
		if r == nil || r.ID == "" || r.DeletedAt != nil {
			return nil, fmt.Errorf("recipient %s not found (NOT_FOUND): check --recipient, and that the token belongs to the recipient's tenant", id)
		}
		if r.Method != "CLI" {
			return nil, fmt.Errorf("recipient %s (%q) delivers by %s; only CLI recipients can be listened to (INVALID_INPUT)", id, r.Name, r.Method)
		}
		ts[i] = target{RecipientID: id, Name: r.Name, Forward: forwards[min(i, len(forwards)-1)], Secret: r.SigningSecret}
		if r.Server != nil {
			ts[i].Server = r.Server.Name
		}
	}
	return ts, nil
}

// serverTargets is every CLI recipient of a server, all forwarding to forward.
func serverTargets(ctx context.Context, api *apiClient, server, forward string, withSecret bool) ([]target, error) {
	s, ts, err := serverRecipients(ctx, api, server, forward, withSecret)
	if err != nil {
		return nil, err
	}
	switch {
	case len(ts) == 0:
		return nil, fmt.Errorf("server %q has no CLI recipient; create one with createRecipient(input: {serverId: %q, name: …, method: CLI})", s.Name, s.ID)
	case len(ts) > maxRecipients:
		return nil, fmt.Errorf("server %q has %d CLI recipients; one adal listen serves at most %d: name them with --recipient and run several", s.Name, len(ts), maxRecipients)
	}
	return ts, nil
}

// serverRecipients is the server and its CLI recipients, as targets forwarding to forward.
func serverRecipients(ctx context.Context, api *apiClient, server, forward string, withSecret bool) (*serverInfo, []target, error) {
	s, err := findServer(ctx, api, server, "recipients { "+recipientFields(withSecret)+" }")
	if err != nil {
		return nil, nil, err
	}
	var ts []target
	for _, r := range s.Recipients {
		if r.Method == "CLI" && r.DeletedAt == nil {
			ts = append(ts, target{RecipientID: r.ID, Name: r.Name, Server: s.Name, ServerID: s.ID, Forward: forward, Secret: r.SigningSecret})
		}
	}
	return s, ts, nil
}

// serverInfo is a server as the commands need it.
type serverInfo struct {
	ID         string
	Name       string
	InboundURL string
	Recipients []recipientInfo
}

// findServer looks a server up by ID, or else by its exact name, asking for fields besides id and name.
func findServer(ctx context.Context, api *apiClient, server, fields string) (*serverInfo, error) {
	if isID(server) {
		var out struct{ Server *serverInfo }
		err := api.do(ctx, `query($id: ID!) { server(id: $id) { id name `+fields+` } }`, map[string]any{"id": server}, &out)
		var gql gqlErrors
		switch {
		case errors.As(err, &gql) && gql.has("NOT_FOUND"):
		case err != nil:
			return nil, explainAuth(err)
		case out.Server != nil:
			return out.Server, nil
		}
	}
	var out struct {
		Servers struct{ Edges []struct{ Node serverInfo } }
	}
	err := api.do(ctx, `query($name: String!) { servers(first: 2, where: {name: $name}) { edges { node { id name `+fields+` } } } }`,
		map[string]any{"name": server}, &out)
	if err != nil {
		return nil, explainAuth(err)
	}
	switch len(out.Servers.Edges) {
	case 0:
		return nil, fmt.Errorf("no server %q (NOT_FOUND): give a server's ID or exact name, of the token's tenant", server)
	case 1:
		return &out.Servers.Edges[0].Node, nil
	}
	return nil, fmt.Errorf("several servers are named %q: give the server's ID", server)
}

// sleepCtx waits d, or less if ctx ends; it reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// secretEvent is one recipient's signing secret, printed by listen --print-secret.
type secretEvent struct {
	eventHead
	RecipientID string `json:"recipientId"`
	Recipient   string `json:"recipient"`
	Secret      string `json:"secret"`
}

// printSecrets prints each target's signing secret: alone on its line for one recipient (so that
// $(adal listen --recipient R --print-secret) is the secret), after the recipient's ID and name for several.
// A token that may not read a secret (a MEMBER's) is refused before anything is printed.
func printSecrets(out *output, targets []target) error {
	for _, t := range targets {
		if t.Secret == nil {
			return fmt.Errorf("recipient %s (%q): this token may not read its signing secret (FORBIDDEN); a MEMBER's cannot: use an owner's or admin's token", t.RecipientID, t.Name)
		}
	}
	for _, t := range targets {
		text := *t.Secret + "\n"
		if len(targets) > 1 {
			text = fmt.Sprintf("%s\t%s\t%s\n", t.RecipientID, t.Name, *t.Secret)
		}
		out.record(secretEvent{eventHead: head("secret", time.Time{}), RecipientID: t.RecipientID, Recipient: t.Name, Secret: *t.Secret}, text)
	}
	return nil
}
