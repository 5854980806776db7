// Package components proves Kubernetes spaces and the Helm component catalog end to end
// through a real Groundwork server on a real kube-apiserver (kubeenv): a cluster registered as
// a space, components installed, upgraded and uninstalled through the API, values refused
// before anything is installed, an unreachable cluster failing a job as transient, and a
// SIGKILL of Groundwork in the middle of a Helm install. Most tests run the server in-process
// (app.Run); the SIGKILL test re-executes the test binary as the server so it can kill it.
package components

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/testenv/serverproc"
)

// TestMain makes a child process the server of the SIGKILL test.
func TestMain(m *testing.M) {
	serverproc.Main(m, func(o *app.Options) error {
		o.Workers, o.Components = 2, componentOptions()
		return nil
	})
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
