package api

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/store"
)

// updateFixtures exercise the config update routes on jobs of the test family, whose
// pipeline plans updates (testfamily.PlanUpdate).
func updateFixtures() map[string]fixture {
	return map[string]fixture{
		"POST /api/provisioning-jobs/{id}/update-plan": {ok: 200, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			j := e.job(t, org, e.space(t, org), job.StatusCompleted)
			return target{path: "/api/provisioning-jobs/" + j.ID + "/update-plan", body: `{"config":{"size":2}}`, check: func(got reply) error {
				var p struct {
					Resources []struct {
						Action  string `json:"action"`
						Changes []struct {
							Field string `json:"field"`
						} `json:"changes"`
					} `json:"resources"`
				}
				if err := json.Unmarshal([]byte(got.raw), &p); err != nil || len(p.Resources) != 1 || p.Resources[0].Action != "in-place" ||
					len(p.Resources[0].Changes) != 1 || p.Resources[0].Changes[0].Field != "size" {
					return fmt.Errorf("update plan %s (%v): want size changed in place", got.raw, err)
				}
				return nil
			}}
		}},
		"GET /api/provisioning-jobs/{id}/revisions": {ok: 200, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			j := e.updateFailed(t, org)
			return target{path: "/api/provisioning-jobs/" + j.ID + "/revisions", check: func(got reply) error {
				var l revisionList
				if err := json.Unmarshal([]byte(got.raw), &l); err != nil || len(l.Data) != 2 || l.Data[1].Status != store.RevisionFailed {
					return fmt.Errorf("revisions %s (%v): want 2, the second failed", got.raw, err)
				}
				return nil
			}}
		}},
		"POST /api/provisioning-jobs/{id}/rollback": {ok: 202, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			j := e.updateFailed(t, org)
			return target{path: "/api/provisioning-jobs/" + j.ID + "/rollback", resourceType: "provisioning-job", resourceID: j.ID}
		}},
		// The pending revision was asked for by another principal ("x"): the caller may decide it.
		"POST /api/provisioning-jobs/{id}/revisions/{number}/approve": {ok: 202, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			j := e.awaitingApproval(t, org)
			return target{path: "/api/provisioning-jobs/" + j.ID + "/revisions/2/approve", body: `{"reason":"checked"}`,
				resourceType: "provisioning-job", resourceID: j.ID, check: func(got reply) error {
					if got.body["status"] != "queued" || fmt.Sprint(got.body["config"]) != "map[size:2]" {
						return fmt.Errorf("approved: %s, want the job queued with the pending config", got.raw)
					}
					return nil
				}}
		}},
		"POST /api/provisioning-jobs/{id}/revisions/{number}/reject": {ok: 200, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			j := e.awaitingApproval(t, org)
			return target{path: "/api/provisioning-jobs/" + j.ID + "/revisions/2/reject", resourceType: "provisioning-job", resourceID: j.ID,
				check: func(got reply) error {
					if got.body["status"] != string(store.RevisionRejected) || got.body["number"] != float64(2) {
						return fmt.Errorf("rejected: %s, want revision 2 rejected", got.raw)
					}
					return nil
				}}
		}},
	}
}

// updateFailed stores a failed test job whose config update (revision 2, from {"size":1})
// failed.
func (e *accessEnv) updateFailed(t *testing.T, org string) *job.Job {
	t.Helper()
	j := e.job(t, org, e.space(t, org), job.StatusFailed)
	ctx := context.Background()
	for _, r := range []store.JobRevision{
		{OrgID: org, JobID: j.ID, Number: 1, Config: json.RawMessage(`{"size":1}`), Infra: j.Infra, Status: store.RevisionApplied, Reason: "create", CreatedAt: time.Now()},
		{OrgID: org, JobID: j.ID, Number: 2, Config: j.Config, Infra: j.Infra, Status: store.RevisionApplying, Reason: "update", Actor: "x", CreatedAt: time.Now()},
	} {
		if err := e.st.AddRevision(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	return j
}

// awaitingApproval stores a completed test job ({"size":1}) whose revision 2 ({"size":2}),
// asked for by "x", awaits approval.
func (e *accessEnv) awaitingApproval(t *testing.T, org string) *job.Job {
	t.Helper()
	j := e.job(t, org, e.space(t, org), job.StatusCompleted)
	ctx := context.Background()
	j, err := e.st.UpdateJob(ctx, &store.UpdateJobParams{OrgID: org, ID: j.ID, Version: j.Version, Now: time.Now(), Config: json.RawMessage(`{"size":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []store.JobRevision{
		{OrgID: org, JobID: j.ID, Number: 1, Config: j.Config, Infra: j.Infra, Status: store.RevisionApplied, Reason: "create", CreatedAt: time.Now()},
		{OrgID: org, JobID: j.ID, Number: 2, Config: json.RawMessage(`{"size":2}`), Infra: j.Infra, Status: store.RevisionAwaitingApproval, Reason: "update", Actor: "x", CreatedAt: time.Now()},
	} {
		if err := e.st.AddRevision(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	return j
}
