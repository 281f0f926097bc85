// Package cli is the adal command: `adal login` saves a server URL and token, `adal listen` attaches to a CLI
// recipient and forwards each of its deliveries to a service on the developer's machine, printing a line per
// delivery. cmd/adal only calls Main.
package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// Environment variables the CLI reads.
const (
	envServer = "ADAL_SERVER"
	envToken  = "ADAL_TOKEN"
)

// errUsage marks a command line that cannot work; the command's usage has been printed.
var errUsage = errors.New("usage")

// Main runs the adal command with args (without the program name) and returns the exit code. Cancelling ctx
// (Ctrl-C) stops `adal listen` cleanly.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := ""
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "", "help", "-h", "-help", "--help":
		if len(args) > 0 {
			if fs := commandFlags(args[0], io.Discard); fs != nil {
				fs.SetOutput(stdout)
				fs.Usage()
				return exitOK
			}
		}
		usage(stdout)
		if cmd == "" {
			return exitUsage
		}
		return exitOK
	case "login":
		err = login(ctx, args, stdout, stderr)
	case "listen":
		err = listen(ctx, args, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "adal: unknown command %q\n\n", cmd)
		usage(stderr)
		return exitUsage
	}
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errUsage):
		return exitUsage
	}
	fmt.Fprintln(stderr, "adal:", err)
	return exitError
}

// usage prints the whole manual: every command with every flag.
func usage(w io.Writer) {
	path := "<config dir>/adal/config.json"
	if p, err := configPath(); err == nil {
		path = p
	}
	fmt.Fprintf(w, `adal forwards the deliveries of an Adal CLI recipient to a service on your machine.

Usage:
  adal login  --server URL --token TOKEN
  adal listen --recipient ID --forward URL [--server URL] [--token TOKEN] [--journal-dir DIR]
  adal help [COMMAND]

Commands:
`)
	for _, name := range []string{"login", "listen"} {
		fs := commandFlags(name, w)
		fmt.Fprintf(w, "\n  %s — %s\n", name, summaries[name])
		var b bytes.Buffer
		fs.SetOutput(&b)
		fs.PrintDefaults()
		for _, line := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}
	fmt.Fprintf(w, `
Environment:
  %s   the server URL, when --server is not given (before the saved one)
  %s    the API token, when --token is not given (before the saved one)

Files:
  %s   written by adal login (mode 0600)
  %s   the default journal directory

Exit status: 0 on success and on Ctrl-C, 1 on errors, 2 on a wrong command line.
`, envServer, envToken, path, defaultJournalDir())
}

var summaries = map[string]string{
	"login": "check a server URL and API token and save them for later commands",
	"listen": "attach to a CLI recipient and forward each delivery to a local URL, printing a line per delivery;\n" +
		"    reconnects by itself, and Ctrl-C stops it (local calls in flight are finished and reported first)",
}

// commandFlags describes the flags of a command; nil for an unknown command.
func commandFlags(name string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("adal "+name, flag.ContinueOnError)
	fs.SetOutput(out)
	switch name {
	case "login":
		fs.String("server", "", "`URL` of the Adal server, e.g. http://localhost:8080 (required)")
		fs.String("token", "", "API `TOKEN`: a JWT from the server operator (\"server token --tenant ID --role MEMBER\") or from\nthe issueToken mutation (required)")
	case "listen":
		fs.String("recipient", "", "`ID` of the CLI recipient to listen for (required)")
		fs.String("forward", "", "local `URL` to forward to, e.g. http://localhost:3000/hook; the path received after\n/in/{key} and the query string are appended (required)")
		fs.String("server", "", "`URL` of the Adal server (default: "+envServer+", else the one saved by adal login)")
		fs.String("token", "", "API `TOKEN` (default: "+envToken+", else the one saved by adal login)")
		fs.String("journal-dir", defaultJournalDir(), "`DIR` of the local journal: jobs in flight survive a crash there and are\nreported, never run twice; keep it between runs")
	default:
		return nil
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage of adal %s: %s\n\n", name, summaries[name])
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

// parse parses args into fs; a wrong command line has already been explained by fs.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	return nil
}

func flagValue(fs *flag.FlagSet, name string) string { return fs.Lookup(name).Value.String() }

func login(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := commandFlags("login", stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	c := Config{Server: strings.TrimRight(strings.TrimSpace(flagValue(fs, "server")), "/"), Token: strings.TrimSpace(flagValue(fs, "token"))}
	if c.Server == "" || c.Token == "" {
		fmt.Fprintln(stderr, "adal login needs --server and --token")
		fs.Usage()
		return errUsage
	}
	who, err := whoAmI(ctx, c.Server, c.Token)
	if err != nil {
		return err
	}
	path, err := saveConfig(c)
	if err != nil {
		return fmt.Errorf("save config: %w", err)
	}
	fmt.Fprintf(stdout, "Logged in to %s as %s.\nSaved to %s\n", c.Server, who, path)
	return nil
}

// whoAmI checks the token against the server and describes its holder.
func whoAmI(ctx context.Context, server, token string) (string, error) {
	endpoint, err := httpURL(server)
	if err != nil {
		return "", err
	}
	body, _ := json.Marshal(map[string]string{"query": "{ viewer { role subject tenant { name } } }"})
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("cannot reach the server at %s: %w", server, err)
	}
	defer resp.Body.Close()
	var out struct {
		Data struct {
			Viewer struct {
				Role    string
				Subject string
				Tenant  *struct{ Name string }
			}
		}
		Errors gqlErrors
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err := json.Unmarshal(raw, &out); err != nil {
		return "", fmt.Errorf("%s does not look like an Adal server (HTTP %d)", server, resp.StatusCode)
	}
	if len(out.Errors) > 0 {
		return "", fmt.Errorf("the server refused the token: %w", out.Errors)
	}
	v := out.Data.Viewer
	if v.Tenant != nil {
		return fmt.Sprintf("%s (%s of tenant %q)", v.Subject, v.Role, v.Tenant.Name), nil
	}
	return fmt.Sprintf("%s (%s)", v.Subject, v.Role), nil
}

// httpURL is the server's GraphQL HTTP endpoint.
func httpURL(server string) (string, error) {
	u, err := wsURL(server)
	if err != nil {
		return "", err
	}
	p, _ := url.Parse(u)
	p.Scheme = map[string]string{"ws": "http", "wss": "https"}[p.Scheme]
	return p.String(), nil
}
