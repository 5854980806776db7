package api

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/audit"
	"github.com/groundworkhq/groundwork/internal/engine"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
	"github.com/groundworkhq/groundwork/internal/rbac"
)

// TestDataLossUpdateNeedsApproval: over the API, with real tokens and an engine running the
// test family, a config update that drops data (a shorter retention) with allowDataLoss is
// recorded awaiting approval and the job is not queued; its requester approving is 403, so
// is a principal without provisioning:approve, and another org's is 404; a second admin
// approves and the job runs the new config, the revision going applying → applied; a
// rejected one leaves the job's config as it was; every decision is in the audit log.
func TestDataLossUpdateNeedsApproval(t *testing.T) {
	t.Parallel()
	e := newAccessEnv(t)
	reg, err := pipeline.NewRegistry(&testfamily.Pipeline{N: 2})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Config{Store: e.st, Pipelines: reg, Owner: "approvals-test", PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { eng.Run(ctx); close(stopped) }() //nolint:errcheck // ends with the test
	t.Cleanup(func() { cancel(); <-stopped })

	admin, editor, other := e.tokens[orgA+"/admin"], e.tokens[orgA+"/editor"], e.tokens[orgB+"/admin"]
	second := "second-admin@" + orgA + ".example.com"
	e.user(t, orgA, second, rbac.RoleAdmin, "")
	admin2 := e.token(t, orgA, second, nil)

	created := e.call(t, admin, "POST", "/api/provisioning-jobs", `{"spaceID":"`+e.space(t, orgA)+`","kind":"test","config":{"size":1,"retention":7}}`)
	id, _ := created.body["id"].(string)
	if created.status != 201 || id == "" {
		t.Fatalf("create: %d %s", created.status, created.raw)
	}
	base := "/api/provisioning-jobs/" + id
	waitFor := func(status string) reply {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			got := e.call(t, admin, "GET", base, "")
			if got.body["status"] == status {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("job never %s: %s", status, got.raw)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	retention := func(r reply) any { return r.body["config"].(map[string]any)["retention"] }
	revisions := func(want ...string) {
		t.Helper()
		got := e.call(t, admin, "GET", base+"/revisions", "")
		var l revisionList
		if err := json.Unmarshal([]byte(got.raw), &l); err != nil || len(l.Data) != len(want) {
			t.Fatalf("revisions %s (%v), want %v", got.raw, err, want)
		}
		for i, r := range l.Data {
			if !slices.Contains(strings.Split(want[i], "|"), string(r.Status)) {
				t.Fatalf("revisions %s, want %v", got.raw, want)
			}
		}
	}
	done := waitFor("completed")

	// Without allowDataLoss the shorter retention is refused by field; the dry run with it
	// says an approval is needed.
	if got := e.call(t, admin, "PATCH", base, `{"config":{"size":1,"retention":3}}`); got.status != 400 || !strings.Contains(got.raw, "config.retention") {
		t.Fatalf("data loss not allowed: %d %s", got.status, got.raw)
	}
	if got := e.call(t, admin, "POST", base+"/update-plan", `{"config":{"size":1,"retention":3},"allowDataLoss":true}`); got.status != 200 || got.body["needsApproval"] != true {
		t.Fatalf("dry run: %d %s, want needsApproval", got.status, got.raw)
	}
	if got := e.call(t, admin, "POST", base+"/update-plan", `{"config":{"size":2,"retention":7}}`); got.status != 200 || got.body["needsApproval"] != false {
		t.Fatalf("dry run without data loss: %d %s, want needsApproval false", got.status, got.raw)
	}

	// Allowed, it awaits approval: 202 with the pending revision, the job as it was.
	held := e.call(t, admin, "PATCH", base, fmt.Sprintf(`{"version":%v,"config":{"size":1,"retention":3},"allowDataLoss":true}`, done.body["version"]))
	if held.status != 202 || held.body["pendingRevision"] != float64(2) || held.body["status"] != "completed" || retention(held) != float64(7) {
		t.Fatalf("update dropping data: %d %s, want 202 with pendingRevision 2 and the job as it was", held.status, held.raw)
	}
	revisions("applied", "awaiting_approval")

	approve := base + "/revisions/2/approve"
	entriesBefore := e.auditTotal(t, orgA)
	for name, c := range map[string]struct {
		tok, path, body string
		status          int
		says            string
	}{
		"its requester":           {admin, approve, "", 403, "second principal"},
		"without the policy":      {editor, approve, "", 403, "provisioning:approve"},
		"another org":             {other, approve, "", 404, ""},
		"a reason too long":       {admin2, approve, `{"reason":"` + strings.Repeat("r", 1001) + `"}`, 400, `"field":"reason"`},
		"not a revision number":   {admin2, base + "/revisions/two/approve", "", 400, `"field":"number"`},
		"no such revision":        {admin2, base + "/revisions/9/approve", "", 404, ""},
		"an applied revision":     {admin2, base + "/revisions/1/approve", "", 409, "not awaiting approval"},
		"reject without the role": {editor, base + "/revisions/2/reject", "", 403, ""},
	} {
		got := e.call(t, c.tok, "POST", c.path, c.body)
		if got.status != c.status || !strings.Contains(got.raw, c.says) {
			t.Errorf("%s: %d %s, want %d saying %q", name, got.status, got.raw, c.status, c.says)
		}
	}
	if got := e.call(t, admin, "GET", base, ""); got.body["status"] != "completed" || retention(got) != float64(7) {
		t.Fatalf("refused decisions changed the job: %s", got.raw)
	}
	if n := e.auditTotal(t, orgA) - entriesBefore; n != 0 {
		t.Fatalf("refused decisions left %d audit entries", n)
	}

	// Another admin approves: the job runs the new config and revision 2 is applied.
	ok := e.call(t, admin2, "POST", approve, `{"reason":"retention policy changed"}`)
	if ok.status != 202 || ok.body["status"] != "queued" || retention(ok) != float64(3) {
		t.Fatalf("approve: %d %s", ok.status, ok.raw)
	}
	// The engine may already have finished it: revision 2 is carried out, no third is added.
	revisions("applied|superseded", "applying|applied")
	if fin := waitFor("completed"); retention(fin) != float64(3) {
		t.Fatalf("completed with config %v", fin.body["config"])
	}
	revisions("superseded", "applied")

	// Rejected: nothing runs and the job keeps its config.
	held = e.call(t, admin, "PATCH", base, `{"config":{"size":1,"retention":1},"allowDataLoss":true}`)
	if held.status != 202 || held.body["pendingRevision"] != float64(3) {
		t.Fatalf("second update dropping data: %d %s", held.status, held.raw)
	}
	rej := e.call(t, admin2, "POST", base+"/revisions/3/reject", `{"reason":"keep three days"}`)
	if rej.status != 200 || rej.body["status"] != "rejected" {
		t.Fatalf("reject: %d %s", rej.status, rej.raw)
	}
	if got := e.call(t, admin, "GET", base, ""); got.body["status"] != "completed" || retention(got) != float64(3) {
		t.Fatalf("after the rejection: %s, want completed with retention 3", got.raw)
	}
	revisions("superseded", "applied", "rejected")
	if got := e.call(t, admin2, "POST", base+"/revisions/3/approve", ""); got.status != 409 {
		t.Fatalf("approval of a rejected revision: %d %s", got.status, got.raw)
	}

	// Every decision is on the record, with who made it.
	entries, _, err := e.st.ListAudit(context.Background(), &audit.Filter{OrgID: orgA, ResourceID: id, Page: 1, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	pending := 0
	for _, en := range entries {
		seen[en.Action] = en.Actor
		if en.Action == "provisioning-job.update-config" && strings.Contains(string(en.Metadata), `"awaitingApproval":true`) {
			pending++
		}
	}
	if pending != 2 || seen["provisioning-job.approve-config"] != second || seen["provisioning-job.reject-config"] != second {
		t.Fatalf("audit %v with %d pending updates; want two pending updates, the approval and the rejection by %s", seen, pending, second)
	}
}
