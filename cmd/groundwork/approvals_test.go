package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
)

// jobs update --allow-data-loss of a change that drops data (the test family's shorter
// retention) awaits approval: the dry run says so, the update prints the pending revision and
// leaves the job as it is; its requester cannot approve it; a second admin approves it with
// jobs approve --watch and the job runs it; jobs reject leaves the config as it was.
func TestJobsApprovalCLI(t *testing.T) {
	t.Parallel()
	srv := apptest.Start(t, app.Options{Pipelines: []pipeline.Pipeline{&testfamily.Pipeline{N: 2}}})
	cli := func(token string, args ...string) (string, error) { return run(t, srv.URL, token, args...) }
	sp, err := cli(srv.Token, "-q", "spaces", "create", "--name", "approvals")
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
	id, err := cli(srv.Token, "-q", "jobs", "create", "-f", file("job.yaml", "kind: test\nconfig: {size: 1, retention: 7}\n"), "--space", strings.TrimSpace(sp), "--watch")
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
	// A second admin, who may approve what the bootstrap admin asks for.
	if out, err := cli(srv.Token, "users", "create", "--email", "ops@example.com", "--role", "role_admin"); err != nil {
		t.Fatalf("users create: %v\n%s", err, out)
	}
	out, err := cli(srv.Token, "tokens", "create", "--name", "ops", "--email", "ops@example.com", "--expires-in", "1h")
	if err != nil {
		t.Fatalf("tokens create: %v\n%s", err, out)
	}
	ops := regexp.MustCompile(`gw_[A-Za-z0-9_-]{40,}`).FindString(out)
	if ops == "" {
		t.Fatalf("no secret shown: %s", out)
	}

	fewer := file("fewer.yaml", "size: 1\nretention: 3\n")
	if out, err := cli(srv.Token, "jobs", "update", id, "--config", fewer, "--allow-data-loss", "--dry-run"); err != nil ||
		!regexp.MustCompile(`(?m)^test\s+in-place\s+retention\s+7\s+3\s+none\s+yes$`).MatchString(out) || !strings.Contains(out, "needs approval") {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	out, err = cli(srv.Token, "jobs", "update", id, "--config", fewer, "--allow-data-loss", "--watch")
	if err != nil || !strings.Contains(out, "revision 2 drops data and awaits approval") || !strings.Contains(out, "groundwork jobs approve "+id+" 2") {
		t.Fatalf("update dropping data: %v\n%s", err, out)
	}
	if j := getJob(); j.Status != job.StatusCompleted || !strings.Contains(string(j.Config), `"retention":7`) {
		t.Fatalf("the job awaiting approval is %s with %s, want it as it was", j.Status, j.Config)
	}
	if _, err := cli(srv.Token, "jobs", "approve", id, "2"); err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "second principal") {
		t.Fatalf("approved by its requester: %v", err)
	}
	if _, err := cli(ops, "jobs", "approve", id, "two"); err == nil || !strings.Contains(err.Error(), "REVISION") {
		t.Fatalf("approve with no revision number: %v", err)
	}
	if out, err := cli(ops, "jobs", "approve", id, "2", "--reason", "retention policy changed", "--watch"); err != nil || !strings.Contains(out, "COMPLETED") {
		t.Fatalf("approve: %v\n%s", err, out)
	}
	if j := getJob(); !strings.Contains(string(j.Config), `"retention":3`) {
		t.Fatalf("the approved update did not reach the job: %s", j.Config)
	}

	if out, err := cli(srv.Token, "jobs", "update", id, "--config", file("one.yaml", "size: 1\nretention: 1\n"), "--allow-data-loss"); err != nil ||
		!strings.Contains(out, "revision 3 drops data and awaits approval") {
		t.Fatalf("second update dropping data: %v\n%s", err, out)
	}
	if out, err := cli(ops, "jobs", "reject", id, "3", "--reason", "keep three days"); err != nil || !strings.Contains(out, "revision 3 of "+id+" rejected") {
		t.Fatalf("reject: %v\n%s", err, out)
	}
	if j := getJob(); j.Status != job.StatusCompleted || !strings.Contains(string(j.Config), `"retention":3`) {
		t.Fatalf("after the rejection the job is %s with %s", j.Status, j.Config)
	}
	out, err = cli(srv.Token, "jobs", "revisions", id)
	if err != nil {
		t.Fatalf("revisions: %v\n%s", err, out)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^2\s+applied\s+update\s+\S+`),
		regexp.MustCompile(`(?m)^3\s+rejected\s+update\s+\S+`),
	} {
		if !want.MatchString(out) {
			t.Fatalf("revisions lack %s:\n%s", want, out)
		}
	}
}
