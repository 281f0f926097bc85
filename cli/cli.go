// Package cli is the adal command: `adal login` saves the API URL and a token, `adal listen` attaches to CLI
// recipients and forwards each of their deliveries to a service on the developer's machine, and `adal
// requests`, `retry`, `replay` and `trigger` act on a server's requests from the terminal. cmd/adal only calls
// Main.
package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Exit codes: what a script can act on.
const (
	// exitOK: done; for listen, stopped by Ctrl-C or SIGTERM.
	exitOK = 0
	// exitConfig: the command cannot work as given — a wrong command line, no API URL or token, a token the
	// server refuses, an unknown or unsuitable recipient or server, an operation the server refuses.
	exitConfig = 1
	// exitLost: the server could not be reached (listen: for longer than --give-up-after), or every recipient
	// listen was attached to went away while it ran.
	exitLost = 2
)

// Environment variables the CLI reads.
const (
	envAPI       = "ADAL_API"
	envAPILegacy = "ADAL_SERVER" // the former name of ADAL_API, still read
	envToken     = "ADAL_TOKEN"
	envKeepAlive = "ADAL_KEEPALIVE"
)

// errUsage marks a command line that cannot work; the command's usage has been printed.
var errUsage = errors.New("usage")

// lostError is a failure of the connection to the server rather than of the command: exit status 2.
type lostError struct{ err error }

func (e *lostError) Error() string { return e.err.Error() }
func (e *lostError) Unwrap() error { return e.err }

// exitCode maps a command's error to the process's exit status.
func exitCode(err error) int {
	var lost *lostError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &lost):
		return exitLost
	}
	return exitConfig
}

// command describes one adal subcommand for the manual.
type command struct{ name, synopsis, summary string }

var commands = []command{
	{"login", "adal login   --api URL --token TOKEN",
		"check the API URL and token and save them for the other commands"},
	{"listen", "adal listen  (--recipient ID --forward URL)... | --server SERVER --forward URL  [--format text|json]\n" +
		"  adal listen  (--recipient ID... | --server SERVER) --print-secret",
		"attach to CLI recipients and forward each delivery to a local URL, printing a line per delivery;\n" +
			"    reconnects by itself, and Ctrl-C stops it (local calls in flight are finished and reported first)"},
	{"requests", "adal requests --server SERVER [--status STATUS] [--event-type TYPE] [--limit N] [--format text|json]",
		"list a server's recent requests, newest first, each with its event type (and why its body does not\n" +
			"    follow the type's schema, when accepted anyway) and its deliveries (the IDs retry and replay take);\n" +
			"    a delivery names the transformation version its last attempt ran, and a broker recipient's says\n" +
			"    where it publishes and what the broker answered"},
	{"retry", "adal retry   DELIVERY_ID [--format text|json]",
		"a new delivery of the request to the same recipient (retryDelivery): costs 1 credit"},
	{"replay", "adal replay  REQUEST_ID [--format text|json]",
		"a new request copied from a stored one, delivered to the server's recipients now (replayRequest): costs 1 credit"},
	{"trigger", "adal trigger --server SERVER --data @FILE|JSON [--header K:V]... [--method M] [--path /P] [--format text|json]",
		"send a test webhook to the server's inbound URL and print its request ID (it is accepted and charged like\n" +
			"    any request)"},
}

func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

// Main runs the adal command with args (without the program name) and returns the exit code. Cancelling ctx
// (Ctrl-C) stops `adal listen` cleanly.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	name := ""
	if len(args) > 0 {
		name, args = args[0], args[1:]
	}
	switch name {
	case "", "help", "-h", "-help", "--help":
		if len(args) > 0 {
			if fs := commandFlags(args[0], io.Discard); fs != nil {
				fs.SetOutput(stdout)
				fs.Usage()
				return exitOK
			}
		}
		usage(stdout)
		if name == "" {
			return exitConfig
		}
		return exitOK
	}
	c := lookup(name)
	if c == nil {
		fmt.Fprintf(stderr, "adal: unknown command %q\n\n", name)
		usage(stderr)
		return exitConfig
	}
	run := map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"login": login, "listen": listen, "requests": requests, "retry": retry, "replay": replay, "trigger": trigger,
	}[name]
	err := run(ctx, args, stdout, stderr)
	if err != nil && !errors.Is(err, errUsage) && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(stderr, "adal:", err)
	}
	return exitCode(err)
}

// usage prints the whole manual: every command with every flag.
func usage(w io.Writer) {
	path := "<config dir>/adal/config.json"
	if p, err := configPath(); err == nil {
		path = p
	}
	fmt.Fprintf(w, "adal forwards the deliveries of Adal CLI recipients to services on your machine, and acts on a\nserver's requests from the terminal.\n\nUsage:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %s\n", c.synopsis)
	}
	fmt.Fprintf(w, "  adal help [COMMAND]\n\nSERVER is a server's ID or its exact name.\n\nCommands:\n")
	for _, c := range commands {
		fs := commandFlags(c.name, w)
		fmt.Fprintf(w, "\n  %s — %s\n", c.name, c.summary)
		var b bytes.Buffer
		fs.SetOutput(&b)
		fs.PrintDefaults()
		for _, line := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
			if line != "" {
				fmt.Fprintf(w, "  %s\n", line)
			}
		}
	}
	fmt.Fprintf(w, `
Output:
  text (the default) is for people: coloured when writing to a terminal, unless NO_COLOR is set.
  --format json prints one JSON object per line on standard output, each with a "type"; listen's progress
  messages then go to standard error.

Environment:
  %s      the API URL, when --api is not given (before the saved one); %s is read too
  %s    the API token, when --token is not given (before the saved one)
  %s  how often listen pings the server; a ping unanswered within min(this, 5s) ends the connection
                  (default 15s)
  NO_COLOR        no colours, even on a terminal

Files:
  %s   written by adal login (mode 0600)
  %s   the default journal directory

Exit status:
  0  done; listen: stopped by Ctrl-C or SIGTERM
  1  configuration or authorization: a wrong command line, no API URL or token, a refused token, an unknown
     recipient or server, an operation the server refuses (not found, conflict, no credits), a journal in use
  2  lost: the server could not be reached (listen: for longer than --give-up-after), or every recipient
     listen was attached to was deleted while it ran
`, envAPI, envAPILegacy, envToken, envKeepAlive, path, defaultJournalDir())
}

// listFlag is a flag that may be given several times, in order.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// commandFlags describes the flags of a command; nil for an unknown command.
func commandFlags(name string, out io.Writer) *flag.FlagSet {
	c := lookup(name)
	if c == nil {
		return nil
	}
	fs := flag.NewFlagSet("adal "+name, flag.ContinueOnError)
	fs.SetOutput(out)
	apiFlags := func() {
		fs.String("api", "", "`URL` of the Adal API, e.g. http://localhost:8080 (default: "+envAPI+", else the one saved by adal login)")
		fs.String("token", "", "API `TOKEN` (default: "+envToken+", else the one saved by adal login)")
	}
	formatFlag := func() {
		fs.String("format", "text", "`FORMAT` of the output: text, or json (one object per line)")
	}
	switch name {
	case "login":
		fs.String("api", "", "`URL` of the Adal API, e.g. http://localhost:8080 (required)")
		fs.String("token", "", "API `TOKEN`: a JWT from the server operator (\"server token --tenant ID --role MEMBER\") or from\nthe issueToken mutation (required)")
		fs.String("server", "", "the former name of --api (a `URL`)")
	case "listen":
		fs.Var(new(listFlag), "recipient", "`ID` of a CLI recipient to listen for; repeat it (each followed by its --forward) to listen\nfor several in one process")
		fs.Var(new(listFlag), "forward", "local `URL` to forward to, e.g. http://localhost:3000/hook; the path received after /in/{key}\nand the query string are appended. One per --recipient, or one for all")
		fs.String("server", "", "listen for every CLI recipient of this `SERVER` (ID or name) instead of naming them with\n--recipient")
		apiFlags()
		formatFlag()
		fs.String("journal-dir", defaultJournalDir(), "`DIR` of the local journal: jobs in flight survive a crash there and are\nreported, never run twice; keep it between runs")
		fs.Duration("check-local", defaultCheckLocal, "`DURATION` between checks that each local service accepts connections (a TCP\nconnect); a third of it while one is down; 0 turns the checks off")
		fs.Duration("give-up-after", 0, "stop with exit status 2 once the server has been unreachable for `DURATION` (0: never give up)")
		fs.Duration("refresh", defaultRefresh, "with --server, how often to look for CLI recipients added to the server while listening\n(`DURATION`; 0: only those there at the start)")
		fs.Bool("print-secret", false, "print the signing secret of each recipient (to verify signatures locally) and exit; needs an\nowner's or admin's token")
	case "requests":
		fs.String("server", "", "the `SERVER` (ID or name) whose requests to list (required)")
		fs.String("status", "", "only requests with this `STATUS`: PENDING, DELIVERED, FAILED or PARTIAL")
		fs.String("event-type", "", "only requests of this event `TYPE`, as the server read it, e.g. order.paid")
		fs.Int("limit", defaultLimit, "at most `N` requests (1 to 500)")
		apiFlags()
		formatFlag()
	case "retry", "replay":
		apiFlags()
		formatFlag()
	case "trigger":
		fs.String("server", "", "the `SERVER` (ID or name) to send to (required)")
		fs.String("data", "", "the `BODY`: JSON or any text, @FILE to read it from a file, @- from standard input (required)")
		fs.Var(new(listFlag), "header", "a header to send, `NAME:VALUE`; repeat for several (Content-Type defaults to\napplication/json when the body is JSON)")
		fs.String("method", "POST", "HTTP `METHOD`")
		fs.String("path", "", "`PATH` appended to the inbound URL, e.g. /stripe/events?live=1")
		apiFlags()
		formatFlag()
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s\n\n%s\n\n", c.synopsis, c.summary)
		fs.PrintDefaults()
	}
	return fs
}

func defaultJournalDir() string {
	dir, err := configDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "adal", "journal")
	}
	return filepath.Join(dir, "journal")
}

// parse parses args into fs, flags and arguments in any order, and returns the arguments; a wrong command
// line has already been explained by fs.
func parse(fs *flag.FlagSet, args []string, positional int) ([]string, error) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, errUsage
		}
		if fs.NArg() == 0 {
			break
		}
		rest = append(rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(rest) != positional {
		switch {
		case len(rest) > positional:
			fmt.Fprintf(fs.Output(), "unexpected argument %q\n\n", rest[positional])
		default:
			fmt.Fprintf(fs.Output(), "missing argument\n\n")
		}
		fs.Usage()
		return nil, errUsage
	}
	return rest, nil
}

func flagValue(fs *flag.FlagSet, name string) string {
	return strings.TrimSpace(fs.Lookup(name).Value.String())
}

func flagList(fs *flag.FlagSet, name string) []string { return *fs.Lookup(name).Value.(*listFlag) }

// refuse explains what is wrong with a command line, then the command's usage.
func refuse(fs *flag.FlagSet, problems []string) error {
	for _, p := range problems {
		fmt.Fprintf(fs.Output(), "%s: %s\n", fs.Name(), p)
	}
	fmt.Fprintln(fs.Output())
	fs.Usage()
	return errUsage
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

// looksLikeURL tells a URL from a server's ID or name.
func looksLikeURL(s string) bool { return strings.Contains(s, "://") }

// connection works out the API URL and token of a command from its flags, the environment and the saved
// config, and returns what is missing. A --server that is a URL is the former spelling of --api.
func connection(fs *flag.FlagSet, stderr io.Writer) (api, token string, problems []string) {
	cfg, cfgPath, err := loadConfig()
	if err != nil {
		problems = append(problems, err.Error())
	}
	flagAPI := flagValue(fs, "api")
	if s := fs.Lookup("server"); s != nil && looksLikeURL(s.Value.String()) {
		if flagAPI == "" {
			flagAPI = s.Value.String()
		}
		_ = s.Value.Set("")
		fmt.Fprintf(stderr, "%s: --server URL is now --api URL (--server names one of your servers)\n", fs.Name())
	}
	legacyEnv := getenv(envAPILegacy)
	if !looksLikeURL(legacyEnv) {
		legacyEnv = ""
	}
	api = strings.TrimRight(firstOf(flagAPI, getenv(envAPI), legacyEnv, cfg.API), "/")
	token = firstOf(flagValue(fs, "token"), getenv(envToken), cfg.Token)
	if api == "" {
		problems = append(problems, fmt.Sprintf("no API URL: give --api, set %s, or run adal login (%s)", envAPI, cfgPath))
	} else if _, err := wsURL(api); err != nil {
		problems = append(problems, err.Error())
	}
	if token == "" {
		problems = append(problems, fmt.Sprintf("no token: give --token, set %s, or run adal login (%s)", envToken, cfgPath))
	}
	return api, token, problems
}

// outputFormat reads --format: json or text.
func outputFormat(fs *flag.FlagSet) (json bool, problem string) {
	switch strings.ToLower(flagValue(fs, "format")) {
	case "", "text":
		return false, ""
	case "json":
		return true, ""
	}
	return false, fmt.Sprintf("--format must be text or json, not %q", flagValue(fs, "format"))
}

// invocation is a command's command line, parsed, with what is wrong with it so far.
type invocation struct {
	fs       *flag.FlagSet
	args     []string // the positional arguments
	api      string
	token    string
	json     bool
	problems []string
}

// begin parses the command line of a command that talks to the API: its flags, positional arguments, the
// API URL and token, and --format.
func begin(name string, args []string, positional int, stderr io.Writer) (*invocation, error) {
	fs := commandFlags(name, stderr)
	rest, err := parse(fs, args, positional)
	if err != nil {
		return nil, err
	}
	in := &invocation{fs: fs, args: rest}
	in.api, in.token, in.problems = connection(fs, stderr)
	var p string
	if in.json, p = outputFormat(fs); p != "" {
		in.problems = append(in.problems, p)
	}
	return in, nil
}

func (in *invocation) problemf(format string, args ...any) {
	in.problems = append(in.problems, fmt.Sprintf(format, args...))
}

// finish refuses the command line if anything is wrong with it, else returns the API client and the output.
func (in *invocation) finish(stdout, stderr io.Writer) (*apiClient, *output, error) {
	if len(in.problems) > 0 {
		return nil, nil, refuse(in.fs, in.problems)
	}
	client, err := newAPIClient(in.api, in.token)
	if err != nil {
		return nil, nil, refuse(in.fs, []string{err.Error()})
	}
	return client, newOutput(stdout, stderr, in.json), nil
}

// finishOnServer is finish for a command about one server, given by ID or name: it looks the server up too,
// with fields beyond its ID and name.
func (in *invocation) finishOnServer(ctx context.Context, stdout, stderr io.Writer, server, fields string) (*apiClient, *output, *serverInfo, error) {
	client, out, err := in.finish(stdout, stderr)
	if err != nil {
		return nil, nil, nil, err
	}
	s, err := findServer(ctx, client, server, fields)
	if err != nil {
		return nil, nil, nil, out.fail(err)
	}
	return client, out, s, nil
}

func login(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := commandFlags("login", stderr)
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	api := firstOf(flagValue(fs, "api"), flagValue(fs, "server"))
	if flagValue(fs, "server") != "" {
		fmt.Fprintln(stderr, "adal login: --server is now --api")
	}
	c := Config{API: strings.TrimRight(api, "/"), Token: flagValue(fs, "token")}
	if c.API == "" || c.Token == "" {
		return refuse(fs, []string{"needs --api and --token"})
	}
	client, err := newAPIClient(c.API, c.Token)
	if err != nil {
		return refuse(fs, []string{err.Error()})
	}
	who, err := whoAmI(ctx, client)
	if err != nil {
		return err
	}
	path, err := saveConfig(c)
	if err != nil {
		return fmt.Errorf("save config: %w", err)
	}
	fmt.Fprintf(stdout, "Logged in to %s as %s.\nSaved to %s\n", c.API, who, path)
	return nil
}

// whoAmI checks the token against the server and describes its holder.
func whoAmI(ctx context.Context, api *apiClient) (string, error) {
	var out struct {
		Viewer struct {
			Role    string
			Subject string
			Tenant  *struct{ Name string }
		}
	}
	if err := api.do(ctx, "{ viewer { role subject tenant { name } } }", nil, &out); err != nil {
		return "", explainAuth(err)
	}
	v := out.Viewer
	if v.Tenant != nil {
		return fmt.Sprintf("%s (%s of tenant %q)", v.Subject, v.Role, v.Tenant.Name), nil
	}
	return fmt.Sprintf("%s (%s)", v.Subject, v.Role), nil
}
