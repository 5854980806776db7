package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
)

// runEnv runs the CLI without --token, as a user with only GROUNDWORK_TOKEN would.
func runEnv(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := execute(context.Background(), root)
	return out.String(), err
}

// The token comes from GROUNDWORK_TOKEN when --token is not given, yet --help never shows it;
// without any token the CLI says how to give one instead of sending an empty bearer.
func TestTokenFromEnvironmentNeverInHelp(t *testing.T) { // not parallel: it sets the environment
	srv := apptest.Start(t, app.Options{})
	t.Setenv("GROUNDWORK_TOKEN", srv.Token)
	t.Setenv("GROUNDWORK_URL", srv.URL)
	for _, args := range [][]string{{"--help"}, {"jobs", "list", "--help"}, {"spaces", "--help"}} {
		out, err := runEnv(t, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if strings.Contains(out, srv.Token) || !strings.Contains(out, "--token") {
			t.Fatalf("%v shows the token (or no --token flag):\n%s", args, out)
		}
	}
	if out, err := runEnv(t, "-o", "json", "spaces", "list"); err != nil || !strings.Contains(out, `"data"`) {
		t.Fatalf("the environment's token was not used: %v\n%s", err, out)
	}
	t.Setenv("GROUNDWORK_TOKEN", "")
	if _, err := runEnv(t, "spaces", "list"); err == nil || !strings.Contains(err.Error(), "set GROUNDWORK_TOKEN or pass --token") {
		t.Fatalf("no token: %v", err)
	}
}

// A mistyped subcommand is an error naming the nearest one, at every level; a bare group
// still prints its help.
func TestUnknownSubcommandFails(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want string // "" means success
	}{
		{[]string{"jobs", "lst"}, "list"},
		{[]string{"spaces", "craete"}, "create"},
		{[]string{"catalog", "typs"}, "types"},
		{[]string{"jbos"}, "jobs"},
		{[]string{"jobs", "frobnicate"}, "unknown command"},
		{[]string{"jobs"}, ""},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, "_"), func(t *testing.T) {
			t.Parallel()
			out, err := run(t, "http://127.0.0.1:1", "unused", tc.args...)
			if tc.want == "" {
				if err != nil || !strings.Contains(out, "Available Commands") {
					t.Fatalf("bare group: %v\n%s", err, out)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v: err %v, want it to mention %q", tc.args, err, tc.want)
			}
			if tc.want != "unknown command" && !strings.Contains(strings.ToLower(err.Error()), "did you mean") {
				t.Fatalf("%v: no suggestion: %v", tc.args, err)
			}
		})
	}
}

// A refusal's fixHint reaches the user: provisioning on a read-only account prints the policy
// to grant.
func TestProblemFixHintPrinted(t *testing.T) {
	t.Parallel()
	srv := apptest.Start(t, app.Options{Pipelines: []pipeline.Pipeline{&testfamily.Pipeline{N: 1}}})
	cli := func(args ...string) (string, error) { return run(t, srv.URL, srv.Token, args...) }
	acc, err := cli("-q", "cloud-accounts", "create", "--name", "ro", "--provider", "local", "--region", "local",
		"--auth-method", "local", "--permission-level", "read_only")
	if err != nil {
		t.Fatalf("cloud-accounts create: %v\n%s", err, acc)
	}
	sp, err := cli("-q", "spaces", "create", "--name", "ro", "--cloud-account", strings.TrimSpace(acc))
	if err != nil {
		t.Fatalf("spaces create: %v\n%s", err, sp)
	}
	spec := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(spec, []byte("kind: test\nconfig: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = cli("jobs", "create", "-f", spec, "--space", strings.TrimSpace(sp))
	if err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "\nfix: ") ||
		!strings.Contains(err.Error(), "read_write") {
		t.Fatalf("read-only refusal without its fix: %v", err)
	}
}

// One output convention: -o json|yaml|id everywhere, -q for ids, anything else refused; the
// spec takes its space from --space or GROUNDWORK_SPACE, and the job's name from its config.
func TestOutputConventionAndSpecSpace(t *testing.T) { // not parallel: it sets the environment
	srv := apptest.Start(t, app.Options{Pipelines: []pipeline.Pipeline{&testfamily.Pipeline{N: 1}}})
	cli := func(args ...string) (string, error) { return run(t, srv.URL, srv.Token, args...) }
	id, err := cli("spaces", "create", "--name", "out", "-q")
	id = strings.TrimSpace(id)
	if err != nil || !regexp.MustCompile(`^spc_[A-Za-z0-9]+$`).MatchString(id) {
		t.Fatalf("spaces create -q: %v %q", err, id)
	}
	if out, err := cli("-o", "yaml", "spaces", "get", id); err != nil || !strings.Contains(out, "id: "+id) {
		t.Fatalf("-o yaml: %v\n%s", err, out)
	}
	if out, err := cli("-o", "id", "spaces", "list"); err != nil || strings.TrimSpace(out) != id {
		t.Fatalf("-o id on a list: %v\n%s", err, out)
	}
	if _, err := cli("-o", "xml", "spaces", "list"); err == nil || !strings.Contains(err.Error(), "yaml") {
		t.Fatalf("-o xml: %v", err)
	}
	spare, err := cli("-q", "spaces", "create", "--name", "spare")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := cli("-o", "json", "spaces", "delete", strings.TrimSpace(spare)); err != nil || !strings.Contains(out, `"status": "deleted"`) {
		t.Fatalf("-o json on a deletion: %v\n%s", err, out)
	}
	if _, err := cli("-o", "csv", "spaces", "list"); err == nil {
		t.Fatal("-o csv is for audit-logs only")
	}
	if out, err := cli("-o", "csv", "audit-logs", "--resource-type", "space"); err != nil || !strings.Contains(out, "space.create") {
		t.Fatalf("audit-logs -o csv --resource-type: %v\n%s", err, out)
	}

	spec := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(spec, []byte("kind: test\nconfig:\n  name: from-config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GROUNDWORK_SPACE", "")
	if _, err := cli("jobs", "create", "-f", spec); err == nil || !strings.Contains(err.Error(), "GROUNDWORK_SPACE") {
		t.Fatalf("a spec without a space: %v", err)
	}
	t.Setenv("GROUNDWORK_SPACE", id)
	out, err := cli("-o", "json", "jobs", "create", "-f", spec)
	if err != nil {
		t.Fatalf("jobs create with GROUNDWORK_SPACE: %v\n%s", err, out)
	}
	var j struct{ ID, SpaceID, Name string }
	if err := json.Unmarshal([]byte(out), &j); err != nil || j.SpaceID != id || j.Name != "from-config" {
		t.Fatalf("job: %v %+v", err, j)
	}
	if out, err := cli("-q", "jobs", "watch", j.ID); err != nil || strings.TrimSpace(out) != j.ID {
		t.Fatalf("jobs watch -q prints the id alone once settled: %v\n%s", err, out)
	}
	if out, err := cli("jobs", "list"); err != nil || !strings.Contains(out, "from-config") {
		t.Fatalf("jobs list does not show the name: %v\n%s", err, out)
	}
}

// A failed job that never finished a step is deleted at once (nothing to undo); the audit log
// still records its end by the engine, as it does for a job ended by a step, and `jobs delete
// --watch` follows it to its end.
func TestDeletedFailedJobAudited(t *testing.T) {
	t.Parallel()
	pipe := &testfamily.Pipeline{N: 2, Hook: func(_ context.Context, c testfamily.Call, _ *pipeline.Run) (pipeline.Result, error) {
		if c.Step == "step1" && !c.Undo {
			return pipeline.Result{}, fault.UserAction(errors.New("no quota"), "QuotaExceeded", "raise the quota", "")
		}
		return pipeline.Done(nil), nil
	}}
	srv := apptest.Start(t, app.Options{Pipelines: []pipeline.Pipeline{pipe}})
	cli := func(args ...string) (string, error) { return run(t, srv.URL, srv.Token, args...) }
	sp, err := cli("-q", "spaces", "create", "--name", "fails")
	if err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(spec, []byte("kind: test\nconfig: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	id, err := cli("-q", "jobs", "create", "-f", spec, "--space", strings.TrimSpace(sp))
	if err != nil {
		t.Fatal(err)
	}
	id = strings.TrimSpace(id)
	if out, err := cli("jobs", "watch", id); err == nil || !strings.Contains(out, "FAILED") || !strings.Contains(out, "fix: raise the quota") {
		t.Fatalf("watch of a failing job: %v\n%s", err, out)
	}
	if out, err := cli("jobs", "delete", id, "--watch"); err != nil || !strings.Contains(out, "CANCELLED") {
		t.Fatalf("jobs delete --watch: %v\n%s", err, out)
	}
	out, err := cli("-o", "csv", "audit-logs", "--resource-id", id)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"provisioning-job.failed,system:engine", "provisioning-job.delete,", "provisioning-job.cancelled,system:engine"} {
		if !strings.Contains(out, want) {
			t.Fatalf("audit log of %s lacks %q:\n%s", id, want, out)
		}
	}
}

// A refusal names the flag the user typed, not the JSON field, and points at CLI commands,
// not HTTP routes.
func TestRefusalsSpeakCLI(t *testing.T) {
	t.Parallel()
	srv := apptest.Start(t, app.Options{})
	cli := func(args ...string) (string, error) { return run(t, srv.URL, srv.Token, args...) }
	_, err := cli("cloud-accounts", "create", "--name", "x", "--provider", "local", "--region", "local", "--permission-level", "sometimes")
	if err == nil || !strings.Contains(err.Error(), "--permission-level: ") || strings.Contains(err.Error(), "permissionLevel:") {
		t.Fatalf("refusal does not name the flag: %v", err)
	}
	sp, err := cli("-q", "spaces", "create", "--name", "plain")
	if err != nil {
		t.Fatal(err)
	}
	_, err = cli("components", "install", "ingress-nginx", "--space", strings.TrimSpace(sp))
	if err == nil || !strings.Contains(err.Error(), "groundwork spaces register-cluster") || strings.Contains(err.Error(), "/api/") {
		t.Fatalf("refusal points at HTTP, not the CLI: %v", err)
	}
}

// A job's steps are one aligned table; an undone step does not show its attempt count (its
// forward run and its undo are not retries), a retried failing one does.
func TestPrintJobSteps(t *testing.T) {
	t.Parallel()
	g := &globals{output: "table"}
	j := &job.Job{ID: "job_X", Family: "test", Status: job.StatusCancelled, Phase: job.PhaseTeardown, Steps: []job.StepRecord{
		{Name: "validate", Status: job.StepUndone, Attempts: 2},
		{Name: "a-much-longer-step-name-than-the-rest", Status: job.StepFailed, Attempts: 3, Error: "boom"},
		{Name: "finalize", Status: job.StepPending},
	}}
	var b bytes.Buffer
	if err := g.printJob(&b, j); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("want a header and 3 steps:\n%s", b.String())
	}
	if strings.Contains(lines[1], "attempt") || !strings.Contains(lines[2], "attempt 3") {
		t.Fatalf("attempts shown wrongly:\n%s", b.String())
	}
	col := -1
	for i, status := range []string{"undone", "failed", "pending"} {
		c := strings.Index(lines[i+1], " "+status) + 1
		if col >= 0 && c != col {
			t.Fatalf("status column not aligned (%d vs %d):\n%s", c, col, b.String())
		}
		col = c
	}
}
