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
