package local_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/job"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/provider/drivertest"
	"github.com/groundworkhq/groundwork/internal/provider/local"
	"github.com/groundworkhq/groundwork/internal/provider/local/localtest"
)

// The local module's datastore driver passes the conformance suite every cloud's drivers do,
// against real PostgreSQL, MariaDB and Redis servers.
func TestDatastoreDriverConformance(t *testing.T) {
	t.Parallel()
	for _, e := range datastore.Engines {
		t.Run(string(e), func(t *testing.T) {
			t.Parallel()
			localtest.RequireEngine(t, e)
			drivertest.Datastore(t, drivertest.Harness[dspipe.Driver, drivertest.DatastoreRequest]{
				Provider: local.Name,
				Open: func(t *testing.T) (dspipe.Driver, drivertest.Observer) {
					dir := localtest.DataDir(t)
					p, err := local.New(local.Options{DataDir: dir})
					if err != nil {
						t.Fatal(err)
					}
					return p.Driver(), observeLocal(filepath.Join(dir, "datastores"))
				},
				Config: drivertest.DatastoreRequest{Engine: e},
				Refusal: drivertest.Refusal[dspipe.Driver]{
					Class: job.ClassUserAction,
					Call: func(ctx context.Context, d dspipe.Driver, _ *job.Job) error {
						_, err := d.Servers.Check(ctx, dspipe.CheckParams{Engine: e, Version: "1.0"})
						return err
					},
				},
			})
		})
	}
}

// observeLocal lists the local module's resources under root: a directory per job's server
// (named for the job) and the server process working in one of them, so that a server left
// running after its directory went shows up. A server's own children (PostgreSQL's backends
// and workers, which come and go) are part of it, not resources of their own.
func observeLocal(root string) drivertest.Observer {
	return func(context.Context) ([]drivertest.Resource, error) {
		// The kernel reports a process's directory with symlinks resolved.
		root, err := filepath.EvalSymlinks(root)
		if err != nil {
			return nil, err
		}
		var out []drivertest.Resource
		entries, err := os.ReadDir(root)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if e.IsDir() {
				out = append(out, drivertest.Resource{Kind: "server-dir", ID: e.Name(), JobID: e.Name()})
			}
		}
		procs, err := os.ReadDir("/proc")
		if err != nil {
			return nil, err
		}
		jobOf := map[string]string{} // pid → job of the directory it works in
		for _, p := range procs {
			cwd, err := os.Readlink(filepath.Join("/proc", p.Name(), "cwd"))
			if err != nil || !strings.HasPrefix(cwd, root+string(filepath.Separator)) {
				continue
			}
			jobID, _, _ := strings.Cut(strings.TrimPrefix(cwd, root+string(filepath.Separator)), string(filepath.Separator))
			jobOf[p.Name()] = jobID
		}
		for pid, jobID := range jobOf {
			if _, child := jobOf[parentOf(pid)]; !child {
				out = append(out, drivertest.Resource{Kind: "process", ID: pid, JobID: jobID})
			}
		}
		return out, nil
	}
}

// parentOf reads a process's parent pid from /proc/PID/stat ("pid (comm) state ppid ..."; comm
// may hold spaces, so the fields are counted from its closing parenthesis).
func parentOf(pid string) string {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return ""
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 2 {
		return ""
	}
	return fields[1]
}
