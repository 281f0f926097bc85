// Command adal is the Adal CLI: it forwards the deliveries of a CLI recipient to a service on the developer's
// machine. Run `adal help` for its commands; the logic lives in package cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/adal-relay/adal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first Ctrl-C the CLI winds down gracefully; restoring the default handling lets a second
		// one end it at once (the journal keeps what was in flight).
		<-ctx.Done()
		stop()
	}()
	os.Exit(cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr))
}
