// Package components proves Kubernetes spaces and the Helm component catalog end to end
// through a real Groundwork server on a real kube-apiserver (kubeenv): a cluster registered as
// a space, components installed, upgraded and uninstalled through the API, values refused
// before anything is installed, an unreachable cluster failing a job as transient, and a
// SIGKILL of Groundwork in the middle of a Helm install. Most tests run the server in-process
// (app.Run); the SIGKILL test re-executes the test binary as the server so it can kill it.
package components

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/testenv/pgtest"
)

// Environment of a child server.
const (
	envServe    = "GW_COMP_SERVE"
	envAddrFile = "GW_COMP_ADDR_FILE"
	envDataDir  = "GW_COMP_DATA_DIR"
)

const childToken = "components-test-token"

func TestMain(m *testing.M) {
	if os.Getenv(envServe) == "1" {
		os.Exit(serve())
	}
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// componentOptions is how every test server runs the component family: the test catalog and
// charts, fast readiness polls and reachability checks.
func componentOptions() app.ComponentOptions {
	wd, _ := os.Getwd()
	return app.ComponentOptions{
		ChartDir:      filepath.Join(wd, "testdata", "charts"),
		CatalogFile:   filepath.Join(wd, "testdata", "catalog.yaml"),
		ReadyPoll:     200 * time.Millisecond,
		CheckInterval: 300 * time.Millisecond,
		// A restarted server must claim a killed one's job in seconds, not minutes.
		LeaseTTL:    3 * time.Second,
		HookTimeout: 2 * time.Minute,
	}
}

// serve is the child server of the SIGKILL test.
func serve() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := app.Run(ctx, app.Options{
		Addr: "127.0.0.1:0", DataDir: os.Getenv(envDataDir), BootstrapToken: childToken,
		Workers: 2, PollInterval: 50 * time.Millisecond, Components: componentOptions(),
		Logger: slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Listening: func(addr string) {
			f := os.Getenv(envAddrFile)
			_ = os.WriteFile(f+".tmp", []byte(addr), 0o644)
			_ = os.Rename(f+".tmp", f)
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	return 0
}
