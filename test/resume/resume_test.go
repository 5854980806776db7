// Package resume proves that a ledger written by an earlier build resumes under this one: the
// step names and infra keys stored in job rows are a contract with every database in the field.
//
// testdata/ holds a data directory (SQLite ledger, secret key, local secret store) written by
// the build named in its name, with jobs stopped mid-pipeline as a crash or an upgrade leaves
// them: two datastores stopped in create_server with validate, network and credentials
// checkpointed, and one in its teardown stopped in the undo of create_server. This build opens
// it and must finish every one. Regenerate (with the build whose ledger it should hold) by
// running: go test ./test/resume -make-fixture
package resume

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/client"
	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/job"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/provider/local"
	"github.com/groundworkhq/groundwork/internal/provider/local/localtest"
)

// fixture is the data directory under testdata, named for the build that wrote it.
const fixture = "ledger-52f0db0"

// token is the fixture's bootstrap admin token. It opens nothing but the fixture.
const token = "gw_fixture_0123456789abcdef0123456789abcdef"

var makeFixture = flag.Bool("make-fixture", false, "write testdata/"+fixture+" with this build instead of testing")

// The jobs of the fixture, by name.
const (
	resumePG    = "resume-pg"
	resumeRedis = "resume-redis"
	teardownPG  = "teardown-pg"
)

func TestLedgerOfAnEarlierBuildResumes(t *testing.T) {
	if *makeFixture {
		writeFixture(t)
		return
	}
	t.Parallel()
	localtest.RequireEngine(t, datastore.EnginePostgres)
	localtest.RequireEngine(t, datastore.EngineRedis)

	dir := localtest.DataDir(t)
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", fixture))); err != nil {
		t.Fatalf("copy the fixture: %v", err)
	}
	srv := apptest.Start(t, app.Options{DataDir: dir, BootstrapToken: token,
		Datastores: app.DatastoreOptions{Poll: 100 * time.Millisecond, LeaseTTL: 2 * time.Second}})
	t.Cleanup(func() { deleteServers(t, dir) })

	byName := jobsByName(t, srv.Client)
	for _, name := range []string{resumePG, resumeRedis, teardownPG} {
		if byName[name] == nil {
			t.Fatalf("the fixture has no job %s (jobs: %v)", name, keys(byName))
		}
	}
	// What the fixture froze: the forward jobs with their first steps checkpointed and
	// create_server not; the teardown in its undo. Only the checkpointed steps are checked:
	// the server's engine runs from its start, and a Redis server can be made before this
	// reads the jobs.
	for _, name := range []string{resumePG, resumeRedis} {
		j := byName[name]
		// The names as the earlier build stored them, not this build's constants.
		for _, s := range []string{"validate", "network", "credentials"} {
			if st := stepOf(j, s); st.Status != job.StepDone {
				t.Fatalf("fixture job %s: step %s is %q, want done", name, s, st.Status)
			}
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	want := map[string]job.Status{resumePG: job.StatusCompleted, resumeRedis: job.StatusCompleted, teardownPG: job.StatusDeleted}
	var wg sync.WaitGroup
	for name, status := range want {
		wg.Add(1)
		go func() {
			defer wg.Done()
			before := byName[name]
			final, err := srv.Client.Watch(ctx, before.ID, func(*job.Job) {})
			switch {
			case err != nil:
				t.Errorf("job %s: %v", name, err)
			case final.Status != status:
				t.Errorf("job %s ended %s (%+v), want %s", name, final.Status, final.Failure, status)
			default:
				// The resumed job ran the rest of its steps under the names it was stored with.
				if got, was := stepNames(final), stepNames(before); got != was {
					t.Errorf("job %s: steps %s after the resume, %s in the stored job", name, got, was)
				}
				for _, s := range final.Steps {
					if status == job.StatusCompleted && !s.Status.Completed() {
						t.Errorf("job %s: step %s ended %s", name, s.Name, s.Status)
					}
				}
				// What the checkpointed steps recorded was read back, not made again (a
				// second admin password, a second network).
				if status == job.StatusCompleted {
					var was, got map[string]json.RawMessage
					if err := json.Unmarshal(before.Infra, &was); err != nil || len(was) == 0 {
						t.Errorf("job %s: stored infra %s: %v", name, before.Infra, err)
					}
					_ = json.Unmarshal(final.Infra, &got)
					for k, v := range was {
						if string(got[k]) != string(v) {
							t.Errorf("job %s: infra %s was %s before the resume, %s after", name, k, v, got[k])
						}
					}
				}
			}
		}()
	}
	wg.Wait()
}

// writeFixture writes testdata/<fixture> with this build (with -make-fixture, instead of the
// test: a generator that skipped in every ordinary run would show as a skip in CI).
func writeFixture(t *testing.T) {
	dir := localtest.DataDir(t)
	gate := &gate{entered: make(chan string, 8)}
	ctx, stop := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, app.Options{DataDir: dir, Addr: "127.0.0.1:0", BootstrapToken: token, PollInterval: 100 * time.Millisecond,
			ShutdownGrace: time.Second, Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
			Listening:  func(a string) { addr <- a },
			Datastores: app.DatastoreOptions{Poll: 100 * time.Millisecond, WrapDriver: gate.wrap}})
	}()
	c := client.New("http://"+<-addr, token)
	var sp struct{ ID string }
	if err := c.Do(ctx, http.MethodPost, "/api/spaces", map[string]string{"name": "fixture", "provider": "local", "region": "local"}, &sp); err != nil {
		t.Fatal(err)
	}
	create := func(name string, engine datastore.Engine) string {
		var j job.Job
		if err := c.Do(ctx, http.MethodPost, "/api/provisioning-jobs", map[string]any{"spaceID": sp.ID, "kind": "datastore", "name": name,
			"config": map[string]any{"engine": engine}}, &j); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		return j.ID
	}
	// The teardown job first runs to completion, then its deletion is stopped in the undo of
	// create_server, as are the creates of the other two.
	td := create(teardownPG, datastore.EnginePostgres)
	if final, err := c.Watch(ctx, td, func(*job.Job) {}); err != nil || final.Status != job.StatusCompleted {
		t.Fatalf("%s: %v %v", teardownPG, final, err)
	}
	gate.close()
	create(resumePG, datastore.EnginePostgres)
	create(resumeRedis, datastore.EngineRedis)
	if err := c.Do(ctx, http.MethodDelete, "/api/provisioning-jobs/"+td, nil, nil); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		select {
		case what := <-gate.entered:
			t.Logf("stopped in %s", what)
		case <-time.After(2 * time.Minute):
			t.Fatal("the jobs did not reach the gate")
		}
	}
	stop()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	deleteServers(t, dir)

	out := filepath.Join("testdata", fixture)
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	// The ledger, the secret key and the local secret store; not the servers, which a new
	// machine does not have either.
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if rel == "datastores" || strings.HasSuffix(rel, ".lock") {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(out, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(out, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", out)
}

// gate holds the local driver's Create and Delete, once closed, until the server stops: the
// step is then in flight, never checkpointed, as in a crash.
type gate struct {
	mu      sync.Mutex
	closed  bool
	entered chan string
}

func (g *gate) close() { g.mu.Lock(); g.closed = true; g.mu.Unlock() }

func (g *gate) hold(ctx context.Context, what string) error {
	g.mu.Lock()
	closed := g.closed
	g.mu.Unlock()
	if !closed {
		return nil
	}
	g.entered <- what
	<-ctx.Done()
	return ctx.Err()
}

func (g *gate) wrap(d dspipe.Driver) dspipe.Driver {
	return dspipe.Driver{Servers: gatedServers{Servers: d.Servers, g: g}, Network: d.Network}
}

type gatedServers struct {
	dspipe.Servers
	g *gate
}

func (s gatedServers) Create(ctx context.Context, p dspipe.CreateParams) (dspipe.ServerInfo, error) {
	if err := s.g.hold(ctx, "create of "+p.JobID); err != nil {
		return dspipe.ServerInfo{}, err
	}
	return s.Servers.Create(ctx, p)
}

func (s gatedServers) Delete(ctx context.Context, p dspipe.DeleteParams) (bool, error) {
	if err := s.g.hold(ctx, "delete of "+p.JobID); err != nil {
		return false, err
	}
	return s.Servers.Delete(ctx, p)
}

// deleteServers stops every local server under dir.
func deleteServers(t *testing.T, dir string) {
	p, err := local.New(local.Options{DataDir: dir})
	if err != nil {
		t.Error(err)
		return
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "datastores"))
	for _, e := range entries {
		if e.IsDir() {
			if err := p.Delete(context.Background(), e.Name()); err != nil {
				t.Errorf("delete server %s: %v", e.Name(), err)
			}
		}
	}
}

func jobsByName(t *testing.T, c *client.Client) map[string]*job.Job {
	t.Helper()
	var page struct{ Data []*job.Job }
	if err := c.Do(context.Background(), http.MethodGet, "/api/provisioning-jobs", nil, &page); err != nil {
		t.Fatal(err)
	}
	out := map[string]*job.Job{}
	for _, j := range page.Data {
		out[j.Name] = j
	}
	return out
}

func stepOf(j *job.Job, name string) job.StepRecord {
	for _, s := range j.Steps {
		if s.Name == name {
			return s
		}
	}
	return job.StepRecord{}
}

func stepNames(j *job.Job) string {
	var out []string
	for _, s := range j.Steps {
		out = append(out, s.Name)
	}
	return strings.Join(out, ",")
}

func keys(m map[string]*job.Job) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return fmt.Sprint(out)
}
