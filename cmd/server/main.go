// Command server runs Adal: `server` (or `server serve`) serves the API, intake and panel; `server migrate`
// applies the database's pending migrations; `server token` prints a JWT signed with this installation's
// secret; `server signin-link` prints a one-time link that signs an operator in to the console.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/adal-relay/adal/egress"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/tracing"
	"github.com/adal-relay/adal/viewer"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "adal server:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serve(args)
	case "migrate":
		return migrate(args)
	case "token":
		return token(args)
	case "signin-link":
		return signinLink(args)
	case "help":
		usage()
		return nil
	}
	usage()
	return fmt.Errorf("unknown command %q", cmd)
}

func usage() {
	fmt.Fprint(os.Stderr, `usage:
  server [serve]                                   run Adal (configured by ADAL_* variables, see README)
  server migrate                                   apply pending database migrations and exit
  server token --admin [--ttl 720h]                print an operator JWT
  server token --tenant ID --role OWNER|MEMBER     print a tenant JWT
  server signin-link                               print a one-time link that signs an operator in to the console
`)
}

// configFromEnv reads ADAL_* variables, and the OTEL_* ones of tracing; bad values are errors, not silent
// defaults.
func configFromEnv() (relay.Config, error) {
	cfg := relay.Config{
		Addr:        os.Getenv("ADAL_ADDR"),
		DataDir:     os.Getenv("ADAL_DATA_DIR"),
		DatabaseURL: os.Getenv("ADAL_DATABASE_URL"),
		JWTSecret:   os.Getenv("ADAL_JWT_SECRET"),
		PublicURL:   os.Getenv("ADAL_PUBLIC_URL"),
		// Validated when the jobs are built (a bad spec fails start-up with the parser's message).
		RetentionSpec: os.Getenv("ADAL_RETENTION_SCHEDULE"),
		BillingSpec:   os.Getenv("ADAL_BILLING_SCHEDULE"),
	}
	var err error
	if cfg.AllowPrivateTargets, err = envBool("ADAL_ALLOW_PRIVATE_TARGETS", false); err != nil {
		return cfg, err
	}
	if cfg.AllowedTargetCIDRs, err = egress.ParseCIDRs(os.Getenv(egress.AllowedCIDRsEnv)); err != nil {
		return cfg, fmt.Errorf("%s: %w", egress.AllowedCIDRsEnv, err)
	}
	if cfg.Dev, err = envBool("ADAL_DEV", false); err != nil {
		return cfg, err
	}
	autoMigrate, err := envBool("ADAL_AUTO_MIGRATE", true)
	if err != nil {
		return cfg, err
	}
	cfg.NoAutoMigrate = !autoMigrate
	if v := os.Getenv("ADAL_CORS_ORIGINS"); v != "" {
		for _, o := range strings.Split(v, ",") {
			if o = strings.TrimSpace(o); o != "" {
				cfg.CORSOrigins = append(cfg.CORSOrigins, o)
			}
		}
	}
	if err := cmp.Or(
		envParsed(&cfg.MaxBodyBytes, "ADAL_MAX_BODY_BYTES", parseInt64, positive, "a positive number of bytes"),
		envParsed(&cfg.IntakeBodyBudget, "ADAL_INTAKE_BODY_BUDGET", parseInt64, positive, "a positive number of bytes"),
		envParsed(&cfg.MaxResponseBytes, "ADAL_GRAPHQL_MAX_RESPONSE_BYTES", strconv.Atoi, positive,
			"a positive number of bytes"),
		envParsed(&cfg.RetryUnit, "ADAL_RETRY_UNIT", time.ParseDuration, positive,
			"a positive duration such as 1m or 100ms"),
		envParsed(&cfg.Workers, "ADAL_WORKERS", strconv.Atoi, positive, "a positive number"),
		envParsed(&cfg.TenantShare, "ADAL_TENANT_WORKER_SHARE", parseFloat64,
			func(f float64) bool { return f > 0 && f <= 1 }, "a fraction above 0 and at most 1 such as 0.5"),
		envParsed(&cfg.IntakeCommitters, "ADAL_INTAKE_COMMITTERS", strconv.Atoi, positive, "a positive number"),
		envParsed(&cfg.RescueInterval, "ADAL_RESCUE_INTERVAL", time.ParseDuration, positive,
			"a positive duration such as 10s"),
		envParsed(&cfg.AlertInterval, "ADAL_ALERT_INTERVAL", time.ParseDuration, positive,
			"a positive duration such as 2s"),
		envParsed(&cfg.Lease, "ADAL_LEASE", time.ParseDuration, func(d time.Duration) bool { return d >= time.Second },
			"a duration of at least 1s such as 60s"),
	); err != nil { // the first variable in this order that is wrong
		return cfg, err
	}
	if cfg.Tracing, err = tracing.FromEnv(); err != nil {
		return cfg, err
	}
	level := slog.LevelInfo
	if v := os.Getenv("ADAL_LOG_LEVEL"); v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			return cfg, fmt.Errorf("ADAL_LOG_LEVEL must be debug, info, warn or error, got %q", v)
		}
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	return cfg, nil
}

func envBool(name string, unset bool) (bool, error) {
	v := os.Getenv(name)
	if v == "" {
		return unset, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s must be true or false, got %q", name, v)
	}
	return b, nil
}

// envParsed sets *dst to the variable name's value as parse reads it, if it is set. A value parse refuses, or
// valid does not allow, is an error that says what it must be (want).
func envParsed[T any](dst *T, name string, parse func(string) (T, error), valid func(T) bool, want string) error {
	v := os.Getenv(name)
	if v == "" {
		return nil
	}
	x, err := parse(v)
	if err != nil || !valid(x) {
		return fmt.Errorf("%s must be %s, got %q", name, want, v)
	}
	*dst = x
	return nil
}

func positive[T int | int64 | time.Duration](x T) bool { return x > 0 }

func parseInt64(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }

func parseFloat64(s string) (float64, error) { return strconv.ParseFloat(s, 64) }

// configWithoutFlags reads the configuration for command name, which takes no flags: it still answers -h, and
// refuses a flag it does not know.
func configWithoutFlags(name string, args []string) (relay.Config, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return relay.Config{}, err
	}
	return configFromEnv()
}

func serve(args []string) error {
	cfg, err := configWithoutFlags("serve", args)
	if err != nil {
		return err
	}
	relay.SetGCPercent()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r, err := relay.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer r.Close()
	// The scheduler, rescuer and cron jobs: without them nothing accepted would ever be delivered. Stop runs
	// after Serve returns, so attempts in flight finish and are recorded before the database closes.
	if err := r.Start(ctx); err != nil {
		return err
	}
	defer r.Stop()
	addr := cfg.Addr
	if addr == "" {
		addr = ":8080"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return r.Serve(ctx, ln)
}

// migrate applies the pending migrations, for deployments that start servers with ADAL_AUTO_MIGRATE=false.
func migrate(args []string) error {
	cfg, err := configWithoutFlags("migrate", args)
	if err != nil {
		return err
	}
	n, err := relay.Migrate(context.Background(), cfg)
	if err != nil {
		return err
	}
	fmt.Printf("applied %d migrations\n", n)
	return nil
}

// openQuiet opens the relay the environment configures for a one-off command, logging only warnings and
// errors, so that what the command prints stands alone.
func openQuiet() (*relay.Relay, error) {
	cfg, err := configFromEnv()
	if err != nil {
		return nil, err
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return relay.Open(context.Background(), cfg)
}

func token(args []string) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	admin := fs.Bool("admin", false, "issue an operator (ADMIN) token")
	tenant := fs.Int("tenant", 0, "tenant ID for an OWNER or MEMBER token")
	role := fs.String("role", "OWNER", "OWNER or MEMBER (with --tenant)")
	subject := fs.String("subject", "", "who the token is for (free text)")
	ttl := fs.Duration("ttl", 30*24*time.Hour, "lifetime")
	if err := fs.Parse(args); err != nil {
		return err
	}
	v := viewer.Viewer{Role: viewer.Role(strings.ToUpper(*role)), TenantID: *tenant, Subject: *subject}
	switch {
	case *admin && *tenant != 0:
		return errors.New("--admin and --tenant exclude each other")
	case *admin:
		v = viewer.Viewer{Role: viewer.Admin, Subject: *subject}
	case *tenant == 0:
		return errors.New("give --admin, or --tenant ID with --role OWNER|MEMBER")
	}
	if v.Subject == "" {
		v.Subject = "cli-" + strings.ToLower(string(v.Role))
	}
	r, err := openQuiet()
	if err != nil {
		return err
	}
	defer r.Close()
	// The row makes the token listable and revocable like any the API mints.
	tok, _, err := r.Tokens.Mint(viewer.SystemContext(context.Background()), r.DB.Client, v, *ttl)
	if err != nil {
		return err
	}
	fmt.Println(tok)
	return nil
}

// signinLink prints a one-time console sign-in link for an operator: the way in without pasting a token,
// whenever the first-run link has been used or has expired.
func signinLink(args []string) error {
	fs := flag.NewFlagSet("signin-link", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	r, err := openQuiet()
	if err != nil {
		return err
	}
	defer r.Close()
	link, exp, err := r.SignInLink(context.Background())
	if err != nil {
		return err
	}
	fmt.Println(link)
	fmt.Fprintf(os.Stderr, "works once, until %s\n", exp.Local().Format(time.Kitchen))
	return nil
}
