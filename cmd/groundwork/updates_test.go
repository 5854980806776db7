package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
	"github.com/groundworkhq/groundwork/internal/provider/local"
	"github.com/groundworkhq/groundwork/internal/provider/local/localtest"
)

// jobs update --config against a running server: the dry run prints the change per field and
// changes nothing; a refused field is printed by name; the update itself runs; an update whose
// job fails is listed as a failed revision and rolled back; a config that changes nothing
// records nothing; the test family cannot be inspected, and the refusal names the field.
func TestJobsConfigUpdateCLI(t *testing.T) {
	t.Parallel()
	pipe := &testfamily.Pipeline{N: 2, Hook: func(_ context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error) {
		var cfg struct {
			Fail bool `json:"fail"`
		}
		if err := r.Config(&cfg); err != nil {
			return pipeline.Result{}, err
		}
		if cfg.Fail && !c.Undo && c.Step == "step2" {
			return pipeline.Result{}, fault.UserAction(errors.New("the cloud said no"), "Refused", "send another config", "")
		}
		return pipeline.Done(nil), nil
	}}
	srv := apptest.Start(t, app.Options{Pipelines: []pipeline.Pipeline{pipe}})
	cli := func(args ...string) (string, error) { return run(t, srv.URL, srv.Token, args...) }
	sp, err := cli("-q", "spaces", "create", "--name", "updates")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	id, err := cli("-q", "jobs", "create", "-f", file("job.yaml", "kind: test\nconfig: {size: 1, fixed: a}\n"), "--space", strings.TrimSpace(sp), "--watch")
	if err != nil {
		t.Fatalf("jobs create: %v\n%s", err, id)
	}
	id = strings.TrimSpace(id)
	getJob := func() job.Job {
		var j job.Job
		if err := srv.Client.Do(context.Background(), "GET", "/api/provisioning-jobs/"+id, nil, &j); err != nil {
			t.Fatal(err)
		}
		return j
	}
	before := getJob()

	grow := file("grow.yaml", "size: 2\nfixed: a\nnote: new\n")
	out, err := cli("jobs", "update", id, "--config", grow, "--dry-run")
	if err != nil {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`RESOURCE\s+ACTION\s+FIELD\s+FROM\s+TO\s+DISRUPTION\s+DATA LOSS`),
		regexp.MustCompile(`(?m)^test\s+in-place\s+note\s+-\s+new\s+none\s+no$`),
		regexp.MustCompile(`(?m)^\s+size\s+1\s+2\s*$`),
		regexp.MustCompile(`re-runs: step1, step2`),
	} {
		if !want.MatchString(out) {
			t.Fatalf("dry run output lacks %s:\n%s", want, out)
		}
	}
	if j := getJob(); j.Version != before.Version || string(j.Config) != string(before.Config) {
		t.Fatalf("the dry run changed the job: version %d → %d, config %s", before.Version, j.Version, j.Config)
	}

	if out, err := cli("jobs", "update", id, "--config", file("fixed.json", `{"size": 2, "fixed": "b"}`)); err == nil ||
		!strings.Contains(err.Error(), "\n  config.fixed: cannot change in place") {
		t.Fatalf("a refused field: %v\n%s", err, out)
	}
	if _, err := cli("jobs", "update", id, "--config", grow, "--name", "x"); err == nil || !strings.Contains(err.Error(), "--name") {
		t.Fatalf("--config with --name: %v", err)
	}
	if _, err := cli("jobs", "update", id, "--dry-run"); err == nil || !strings.Contains(err.Error(), "--config") {
		t.Fatalf("--dry-run without --config: %v", err)
	}

	if out, err := cli("jobs", "update", id, "--config", grow, "--watch"); err != nil || !strings.Contains(out, "COMPLETED") {
		t.Fatalf("update: %v\n%s", err, out)
	}
	if j := getJob(); !strings.Contains(string(j.Config), `"note":"new"`) {
		t.Fatalf("the update did not reach the job: %s", j.Config)
	}
	out, err = cli("jobs", "update", id, "--config", grow)
	if err != nil || !strings.Contains(out, "changes nothing") {
		t.Fatalf("the same config again: %v\n%s", err, out)
	}

	fail := file("fail.yaml", "size: 3\nfixed: a\nfail: true\n")
	if out, err := cli("jobs", "update", id, "--config", fail, "--watch"); err == nil || !strings.Contains(out, "FAILED") {
		t.Fatalf("a failing update: %v\n%s", err, out)
	}
	// The same config sent again is the failed update tried again: it runs (and fails) anew.
	if out, err := cli("jobs", "update", id, "--config", fail, "--dry-run"); err != nil || !regexp.MustCompile(`(?m)^\s+size\s+2\s+3\s*$`).MatchString(out) {
		t.Fatalf("dry run of the failed update's config: %v\n%s", err, out)
	}
	if out, err := cli("jobs", "update", id, "--config", fail, "--watch"); err == nil || !strings.Contains(out, "FAILED") || strings.Contains(out, "changes nothing") {
		t.Fatalf("the failed update sent again: %v\n%s", err, out)
	}
	out, err = cli("jobs", "revisions", id)
	if err != nil {
		t.Fatalf("revisions: %v\n%s", err, out)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^1\s+superseded\s+create\s+-\s`),
		regexp.MustCompile(`(?m)^2\s+applied\s+update\s+\S+`),
		regexp.MustCompile(`(?m)^3\s+failed\s+update\s+\S+`),
		regexp.MustCompile(`(?m)^4\s+failed\s+update\s+\S+`),
	} {
		if !want.MatchString(out) {
			t.Fatalf("revisions lack %s:\n%s", want, out)
		}
	}
	if out, err := cli("jobs", "rollback", id, "--watch"); err != nil || !strings.Contains(out, "COMPLETED") {
		t.Fatalf("rollback: %v\n%s", err, out)
	}
	if j := getJob(); strings.Contains(string(j.Config), "fail") || !strings.Contains(string(j.Config), `"size":2`) {
		t.Fatalf("the rollback did not restore revision 2: %s", j.Config)
	}
	if _, err := cli("jobs", "rollback", id); err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("a second rollback: %v", err)
	}

	if _, err := cli("jobs", "inspect", id); err == nil || !strings.Contains(err.Error(), "\n  kind: inspection is not supported for test") {
		t.Fatalf("inspect of the test family: %v", err)
	}
	if _, err := cli("jobs", "drift", id); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("drift of a job never inspected: %v", err)
	}
	if _, err := cli("jobs", "reconcile", id); err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("reconcile without drift: %v", err)
	}
}

// jobs inspect, drift and reconcile on a local Redis server stopped behind Groundwork's back:
// inspect prints its running field as drifted, owned by wait_ready; reconcile --watch starts
// it again, and the next inspection finds nothing.
func TestJobsDriftCLI(t *testing.T) {
	t.Parallel()
	localtest.RequireEngine(t, datastore.EngineRedis)
	dataDir := localtest.DataDir(t)
	srv := apptest.Start(t, app.Options{DataDir: dataDir, Datastores: app.DatastoreOptions{Poll: 100 * time.Millisecond}})
	ctx := context.Background()
	sp := srv.Space(t, "drift")
	prov, err := local.New(local.Options{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	version, err := prov.Installed(ctx, datastore.EngineRedis)
	if err != nil {
		t.Fatal(err)
	}
	var j job.Job
	if err := srv.Client.Do(ctx, "POST", "/api/provisioning-jobs", map[string]any{"spaceID": sp.ID, "kind": "datastore",
		"config": map[string]any{"engine": "redis", "version": version}}, &j); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Client.Do(ctx, "DELETE", "/api/provisioning-jobs/"+j.ID, nil, nil)
		_, _ = srv.Client.Watch(ctx, j.ID, func(*job.Job) {})
	})
	if got, err := srv.Client.Watch(ctx, j.ID, func(*job.Job) {}); err != nil || got.Status != job.StatusCompleted {
		t.Fatalf("job: %v %+v", err, got)
	}
	cli := func(args ...string) (string, error) { return run(t, srv.URL, srv.Token, args...) }
	if out, err := cli("jobs", "inspect", j.ID); err != nil || !strings.Contains(out, ": 0 drifted field(s)") {
		t.Fatalf("inspect right after create: %v\n%s", err, out)
	}

	stopServer(t, prov, j.ID)
	out, err := cli("jobs", "inspect", j.ID)
	if err != nil || !strings.Contains(out, ": 1 drifted field(s)") ||
		!regexp.MustCompile(`(?m)^redis-server local/redis/`+j.ID+`\s+running\s+true\s+false\s+wait_ready$`).MatchString(out) {
		t.Fatalf("inspect after the server stopped: %v\n%s", err, out)
	}
	if out, err := cli("jobs", "drift", j.ID); err != nil || !strings.Contains(out, "wait_ready") {
		t.Fatalf("drift: %v\n%s", err, out)
	}
	if out, err := cli("jobs", "reconcile", j.ID, "--watch"); err != nil || !strings.Contains(out, "COMPLETED") {
		t.Fatalf("reconcile: %v\n%s", err, out)
	}
	if out, err := cli("jobs", "inspect", j.ID); err != nil || !strings.Contains(out, ": 0 drifted field(s)") {
		t.Fatalf("inspect after reconcile: %v\n%s", err, out)
	}
}

// stopServer ends the local server of job id, as an operator's kill would, and waits until it
// is gone.
func stopServer(t *testing.T, p *local.Provider, id string) {
	t.Helper()
	ctx := context.Background()
	s, alive, err := p.Find(ctx, id)
	if err != nil || !alive {
		t.Fatalf("the job's server: %+v alive=%v %v", s, alive, err)
	}
	proc, err := os.FindProcess(s.PID)
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if _, alive, err := p.Find(ctx, id); err != nil || !alive {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the server did not stop")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
