package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/api"
	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/job"
)

// The remediations commands drive a workflow end to end on a local space: a pause needs no
// cloud to reach its gate; approved by name, pause_service refuses a type it cannot pause, and
// the timeline shows each step. A second workflow is rejected by the gate's id and ends
// cancelled; a third is cancelled while it waits.
func TestRemediationsCLI(t *testing.T) {
	t.Parallel()
	srv := apptest.Start(t, app.Options{PollInterval: 100 * time.Millisecond, Remediation: app.RemediationOptions{Poll: 100 * time.Millisecond}})
	cli := func(args ...string) string {
		t.Helper()
		out, err := run(t, srv.URL, srv.Token, args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return out
	}
	space := strings.TrimSpace(cli("-q", "spaces", "create", "--name", "rem", "--provider", "local", "--region", "local"))
	start := func() api.RemediationJob {
		t.Helper()
		var j api.RemediationJob
		out := cli("-o", "json", "remediations", "create", "--space", space, "--recommendation", "rec_1", "--action", "pause",
			"--resource-type", "vm", "--subject", "vm-1")
		if err := json.Unmarshal([]byte(out), &j); err != nil || j.ID == "" {
			t.Fatalf("create printed %q: %v", out, err)
		}
		return j
	}
	wait := func(id string, want job.Status) api.RemediationJob {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			var j api.RemediationJob
			if err := json.Unmarshal([]byte(cli("-o", "json", "remediations", "get", id)), &j); err != nil {
				t.Fatal(err)
			}
			if j.Status == want {
				return j
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s is %s, want %s", id, j.Status, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	a := start()
	wait(a.ID, job.StatusAwaitingUser)
	if out := cli("remediations", "list", "--status", "awaiting_user"); !strings.Contains(out, a.ID) || !strings.Contains(out, "approval (") {
		t.Errorf("list:\n%s", out)
	}
	if _, err := run(t, srv.URL, srv.Token, "remediations", "approve", a.ID); err == nil || !strings.Contains(err.Error(), "--step") {
		t.Errorf("approve without a step: %v", err)
	}
	cli("remediations", "approve", a.ID, "--step", "approval", "--reason", "tested")
	failed := wait(a.ID, job.StatusFailed)
	if failed.Failure == nil || failed.Failure.Code != "PauseUnsupported" || failed.Failure.Class != job.ClassUserAction {
		t.Errorf("failure: %+v", failed.Failure)
	}
	out := cli("remediations", "audit", a.ID)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := [][]string{{"precondition", "completed"}, {"approval", "created"}, {"approval", "approved", "tested"}, {"pause_service", "failed"}}
	if len(lines) != len(want)+1 {
		t.Fatalf("audit:\n%s", out)
	}
	for i, w := range want {
		for _, part := range w {
			if !strings.Contains(lines[i+1], part) {
				t.Errorf("audit line %d %q lacks %q", i+1, lines[i+1], part)
			}
		}
	}

	b := start()
	parked := wait(b.ID, job.StatusAwaitingUser)
	gate := ""
	for _, s := range parked.Workflow {
		if s.Name == "approval" {
			gate = s.ID
		}
	}
	cli("remediations", "reject", b.ID, "--step-id", gate, "--reason", "not now")
	wait(b.ID, job.StatusCancelled)
	if out := cli("remediations", "audit", b.ID); !strings.Contains(out, "rejected") || !strings.Contains(out, "not now") {
		t.Errorf("audit after reject:\n%s", out)
	}

	c := start()
	wait(c.ID, job.StatusAwaitingUser)
	cli("remediations", "cancel", c.ID)
	wait(c.ID, job.StatusCancelled)
	if _, err := run(t, srv.URL, srv.Token, "remediations", "approve", c.ID, "--step", "approval"); err == nil || !strings.Contains(err.Error(), "409") {
		t.Errorf("approve a cancelled workflow: %v", err)
	}
}
