// Command groundwork is the Groundwork server (serve, migrate) and its CLI client.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/groundworkhq/groundwork/internal/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRoot().ExecuteContext(ctx); err != nil {
		var apiErr *client.Error
		if errors.As(err, &apiErr) {
			fmt.Fprintln(os.Stderr, "error:", apiErr.Error())
		} else if !errors.Is(err, errSilent) {
			fmt.Fprintln(os.Stderr, "error:", err)
		}
		os.Exit(1)
	}
}

// errSilent exits non-zero after the command has already said why.
var errSilent = errors.New("")
