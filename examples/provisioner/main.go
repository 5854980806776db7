// Command provisioner is an example provisioner for Groundwork, written against the
// provisioner protocol alone (docs/provisioner-protocol.md) with the Go standard library. It
// handles one pair, managed-resource/bucket: a bucket is a directory per application under
// -root. Copy it as the start of your own.
//
// What it shows:
//   - plan is a dry run; apply is idempotent on the request's key;
//   - apply answers 202 with an operation and does the work in the background (-work-delay
//     stands in for a slow cloud call);
//   - operations and applied state are saved to a JSON file, so a provisioner killed mid-work
//     finishes the operation when it starts again;
//   - inspect compares the directory with what was applied and reports drift.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "address to listen on (port 0 picks a free one)")
	root := flag.String("root", "./buckets", "directory holding one directory per bucket")
	state := flag.String("state", "", "state file (default <root>/../provisioner-state.json)")
	delay := flag.Duration("work-delay", 2*time.Second, "how long the simulated slow work takes")
	flag.Parse()

	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if *state == "" {
		*state = filepath.Join(filepath.Dir(filepath.Clean(*root)), "provisioner-state.json")
	}
	if err := run(*addr, *root, *state, *delay, log); err != nil {
		log.Error("provisioner stopped", "err", err)
		os.Exit(1)
	}
}

func run(addr, root, statePath string, delay time.Duration, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	p, err := newProvisioner(root, statePath, delay, log)
	if err != nil {
		return err
	}
	p.resume(ctx)

	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// Tests and scripts read this line to learn the port when -addr ends in :0.
	fmt.Printf("listening on http://%s\n", l.Addr())

	srv := &http.Server{Handler: p.routes(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	p.wait()
	return nil
}
