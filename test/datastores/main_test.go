// Package datastores proves the datastore family end to end through a real Groundwork server:
// the test binary re-executes itself as the server (app.Run), which runs real PostgreSQL,
// MariaDB and Redis processes through the local provider; the tests drive it over HTTP, kill
// it with SIGKILL at chosen points, and scan everything it wrote for the passwords it made.
package datastores

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/job"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/testenv/childserver"
	"github.com/groundworkhq/groundwork/internal/testenv/serverproc"
)

// Environment of a child server, beside what serverproc passes.
const (
	// envStopAt names the point where the child stops (and waits to be killed), writing a
	// marker file per job into envMarkers first: "create_server" (after the server process
	// started, before the step's checkpoint), "database_ready" (after CREATE DATABASE and
	// CREATE USER ran, before the record says ready) or "rotate_password" (SIGKILL after a
	// rotation changed the server's password, before the checkpoint).
	envStopAt  = "GW_DS_STOP_AT"
	envMarkers = "GW_DS_MARKERS"
)

const bootstrapToken = "gw_test_datastores_0123456789abcdef"

func TestMain(m *testing.M) {
	serverproc.Main(m, configure)
}

// configure makes the child a server that runs datastores, stopping where envStopAt says.
func configure(o *app.Options) error {
	opts := app.DatastoreOptions{Poll: 100 * time.Millisecond, LeaseTTL: 3 * time.Second}
	markers := os.Getenv(envMarkers)
	switch os.Getenv(envStopAt) {
	case "create_server":
		opts.WrapDriver = func(d dspipe.Driver) dspipe.Driver {
			d.Servers = stopAfterCreate{Servers: d.Servers, markers: markers}
			return d
		}
	case "rotate_password":
		// SIGKILL after the server's password changed, before the step's checkpoint: the
		// first call of rotate_password for each job (the count survives the restarts).
		crash := childserver.CrashAfter(markers, dspipe.StepRotatePassword+"#1")
		opts.AfterDo = func(ctx context.Context, j *job.Job, step string) {
			if step == dspipe.StepRotatePassword {
				crash(ctx, j, step)
			}
		}
	case "database_ready":
		opts.WrapRecords = func(r datastore.Records) datastore.Records {
			return stopBeforeReady{Records: r, markers: markers}
		}
	}
	o.Workers, o.Datastores = 4, opts
	// Debug level and JSON: the leak scan reads the most a server logs, as an operator keeps it.
	o.Logger = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return nil
}

// park writes the marker and blocks until the process is killed (or shut down).
func park(ctx context.Context, markers, name string) error {
	_ = os.WriteFile(markers+"/"+name, nil, 0o644)
	<-ctx.Done()
	return ctx.Err()
}

type stopAfterCreate struct {
	dspipe.Servers
	markers string
}

func (s stopAfterCreate) Create(ctx context.Context, p dspipe.CreateParams) (dspipe.ServerInfo, error) {
	if _, err := s.Servers.Create(ctx, p); err != nil {
		return dspipe.ServerInfo{}, err
	}
	return dspipe.ServerInfo{}, park(ctx, s.markers, p.JobID)
}

type stopBeforeReady struct {
	datastore.Records
	markers string
}

func (s stopBeforeReady) UpdateDatabaseStatus(ctx context.Context, jobID, id, status string, now time.Time) error {
	if status == datastore.StatusReady {
		return park(ctx, s.markers, jobID)
	}
	return s.Records.UpdateDatabaseStatus(ctx, jobID, id, status, now)
}
