package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
)

// A draft created from a spec is renamed, retagged and promoted with `jobs update`, and
// `--watch` follows it to completion; a stale update is refused rather than overwriting; a
// VM operation on a job that is not a VM pool is a field error; watch exits non-zero when the
// job fails.
func TestJobsCLI(t *testing.T) {
	t.Parallel()
	pipe := &testfamily.Pipeline{N: 3, Hook: func(_ context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error) {
		var cfg struct {
			Fail bool `json:"fail"`
		}
		_ = json.Unmarshal(r.Job.Config, &cfg)
		if cfg.Fail && c.Step == "step2" && !c.Undo {
			return pipeline.Result{}, fault.UserAction(errors.New("quota exceeded"), "QuotaExceeded", "raise the quota", "")
		}
		return pipeline.Done(nil), nil
	}}
	srv := apptest.Start(t, app.Options{Pipelines: []pipeline.Pipeline{pipe}})
	cli := func(args ...string) (string, error) { return run(t, srv.URL, srv.Token, args...) }

	out, err := cli("-o", "json", "spaces", "create", "--name", "cli")
	if err != nil {
		t.Fatalf("spaces create: %v\n%s", err, out)
	}
	var sp struct{ ID string }
	if err := json.Unmarshal([]byte(out), &sp); err != nil || sp.ID == "" {
		t.Fatalf("space: %v %s", err, out)
	}
	spec := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(spec, []byte("spaceID: "+sp.ID+"\nkind: test\ndraft: true\nconfig: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = cli("-o", "json", "jobs", "create", "-f", spec)
	if err != nil {
		t.Fatalf("jobs create: %v\n%s", err, out)
	}
	var draft job.Job
	if err := json.Unmarshal([]byte(out), &draft); err != nil || draft.Status != job.StatusDraft {
		t.Fatalf("created: %v %s", err, out)
	}

	if _, err := cli("jobs", "update", draft.ID); err == nil || !strings.Contains(err.Error(), "nothing to change") {
		t.Fatalf("update with no flags: %v", err)
	}
	if _, err := cli("jobs", "update", draft.ID, "--tag", "novalue"); err == nil || !strings.Contains(err.Error(), "key=value") {
		t.Fatalf("malformed tag: %v", err)
	}
	out, err = cli("jobs", "update", draft.ID, "--name", "nightly", "--tag", "team=platform", "--promote", "--watch")
	if err != nil {
		t.Fatalf("update --promote --watch: %v\n%s", err, out)
	}
	var got job.Job
	if err := srv.Client.Do(t.Context(), "GET", "/api/provisioning-jobs/"+draft.ID, nil, &got); err != nil {
		t.Fatal(err)
	}
	if got.Status != job.StatusCompleted || got.Name != "nightly" || got.Tags["team"] != "platform" {
		t.Fatalf("after update: status %s, name %q, tags %v", got.Status, got.Name, got.Tags)
	}

	_, err = cli("jobs", "update", draft.ID, "--vm-op", "attach_lb")
	if err == nil || !strings.Contains(err.Error(), "vmOp") {
		t.Fatalf("vm-op on a test job: %v", err)
	}

	failing := filepath.Join(t.TempDir(), "fail.yaml")
	if err := os.WriteFile(failing, []byte("spaceID: "+sp.ID+"\nkind: test\nconfig: {fail: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = cli("jobs", "create", "-f", failing, "--watch")
	if err == nil {
		t.Fatalf("watch of a failing job exited 0:\n%s", out)
	}
	if !strings.Contains(out+err.Error(), "raise the quota") {
		t.Fatalf("watch does not show the fix hint: %v\n%s", err, out)
	}
}

// Every example spec the README points to is accepted as written (with a real space), so the
// tour does not start with a validation error.
func TestExampleSpecsAreAccepted(t *testing.T) {
	t.Parallel()
	srv := apptest.Start(t, app.Options{})
	out, err := run(t, srv.URL, srv.Token, "-o", "json", "spaces", "create", "--name", "examples")
	if err != nil {
		t.Fatalf("spaces create: %v\n%s", err, out)
	}
	var sp struct{ ID string }
	if err := json.Unmarshal([]byte(out), &sp); err != nil {
		t.Fatal(err)
	}
	specs, err := filepath.Glob("../../examples/specs/*.yaml")
	if err != nil || len(specs) == 0 {
		t.Fatalf("no example specs: %v", err)
	}
	for _, path := range specs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// As the README says: the space from --space (or GROUNDWORK_SPACE). Draft, so nothing starts.
		spec := string(b) + "draft: true\n"
		file := filepath.Join(t.TempDir(), filepath.Base(path))
		if err := os.WriteFile(file, []byte(spec), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := run(t, srv.URL, srv.Token, "jobs", "create", "-f", file, "--space", sp.ID); err != nil {
			t.Errorf("%s is refused: %v\n%s", path, err, out)
		}
	}
}
