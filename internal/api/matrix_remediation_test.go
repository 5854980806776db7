package api

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/remediation"
	"github.com/groundworkhq/groundwork/internal/store"
)

// noCloud is the executor of the matrix's remediation pipeline: no engine runs there, so no
// step ever asks it anything.
type noCloud struct{}

func (noCloud) Observe(context.Context, remediation.Resource) (remediation.State, error) {
	return remediation.State{}, errors.New("no cloud in the matrix")
}
func (noCloud) Stop(context.Context, remediation.Resource) error  { return errors.New("no cloud") }
func (noCloud) Start(context.Context, remediation.Resource) error { return errors.New("no cloud") }
func (noCloud) SetCapacity(context.Context, remediation.Resource, int32) error {
	return errors.New("no cloud")
}

func remediationPipeline(t *testing.T, tl remediation.Timeline) pipeline.Pipeline {
	t.Helper()
	p, err := remediation.New(remediation.Options{Timeline: tl,
		Executor: func(context.Context, *job.Job) (remediation.Executor, error) { return noCloud{}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// parkedRemediation stores a stop workflow of org parked at its approval gate, as the engine
// leaves one.
func (e *accessEnv) parkedRemediation(t *testing.T, org string) *job.Job {
	t.Helper()
	pl, _ := e.srv.cfg.Pipelines.Get(remediation.Family)
	j, fields := remediation.NewJob(&remediation.CreateRequest{RecommendationID: "rec_" + e.uniq(), SubjectType: "resource",
		SubjectID: "i-0123456789abcdef0", SpaceID: e.space(t, org), Action: remediation.ActionStop, ResourceType: remediation.TypeEC2Instance},
		org, "aws", func(j *job.Job) []job.StepRecord { return pipeline.NewStepRecords(pl.Steps(j)) }, time.Minute, time.Now())
	if len(fields) > 0 {
		t.Fatalf("remediation fixture: %v", fields)
	}
	j.Steps[0].Status, j.Steps[1].Status = job.StepDone, job.StepWaiting
	j.Status = job.StatusAwaitingUser
	out, err := e.st.CreateJob(context.Background(), &store.CreateJobParams{Job: j, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func remediationFixtures() map[string]fixture {
	const base = "/api/remediation-jobs"
	gate := func(suffix string) func(*testing.T, *accessEnv, string) target {
		return func(t *testing.T, e *accessEnv, org string) target {
			j := e.parkedRemediation(t, org)
			steps, _ := remediation.StepsOf(j)
			path := base + "/" + j.ID + fmt.Sprintf(suffix, steps[1].ID)
			return target{path: path, body: `{"reason":"off-hours window"}`, resourceType: "remediation-job", resourceID: j.ID,
				check: func(got reply) error {
					if got.body["status"] != string(job.StatusQueued) {
						return fmt.Errorf("status after the decision: %v", got.body["status"])
					}
					return nil
				}}
		}
	}
	return map[string]fixture{
		"POST " + base: {ok: 201, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			return target{path: base, resourceType: "remediation-job", body: `{"recommendationID":"rec_1","subjectType":"resource",` +
				`"subjectID":"i-0123456789abcdef0","spaceID":"` + e.space(t, org) + `","action":"stop","resourceType":"ec2-instance"}`}
		}},
		"GET " + base: {ok: 200, make: func(*testing.T, *accessEnv, string) target { return target{path: base} }},
		"GET " + base + "/{id}": {ok: 200, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			return target{path: base + "/" + e.parkedRemediation(t, org).ID}
		}},
		"POST " + base + "/{id}/cancel": {ok: 202, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			j := e.parkedRemediation(t, org)
			return target{path: base + "/" + j.ID + "/cancel", resourceType: "remediation-job", resourceID: j.ID}
		}},
		"POST " + base + "/{id}/steps-by-id/{stepID}/approve": {ok: 202, crossOrg: true, make: gate("/steps-by-id/%s/approve")},
		"POST " + base + "/{id}/steps-by-id/{stepID}/reject":  {ok: 202, crossOrg: true, make: gate("/steps-by-id/%s/reject")},
		"POST " + base + "/{id}/steps/{stepName}/approve": {ok: 202, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			tg := gate("/steps/approval/approve%.0s")(t, e, org)
			return tg
		}},
		"POST " + base + "/{id}/steps/{stepName}/reject": {ok: 202, crossOrg: true, make: gate("/steps/approval/reject%.0s")},
		"GET " + base + "/{id}/audit": {ok: 200, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			return target{path: base + "/" + e.parkedRemediation(t, org).ID + "/audit"}
		}},
	}
}

// A remediation workflow is served by its own routes only: the provisioning routes neither
// list it nor act on it, and the remediation routes do not serve provisioning jobs.
func TestRemediationJobsStayOnTheirRoutes(t *testing.T) {
	t.Parallel()
	e := newAccessEnv(t)
	admin := e.tokens[orgA+"/admin"]
	rem := e.parkedRemediation(t, orgA)
	prov := e.job(t, orgA, e.space(t, orgA), job.StatusDraft)
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/provisioning-jobs/" + rem.ID},
		{"DELETE", "/api/provisioning-jobs/" + rem.ID},
		{"POST", "/api/provisioning-jobs/" + rem.ID + "/retry"},
		{"GET", "/api/remediation-jobs/" + prov.ID},
		{"POST", "/api/remediation-jobs/" + prov.ID + "/cancel"},
	} {
		if got := e.call(t, admin, c.method, c.path, ""); got.status != 404 {
			t.Errorf("%s %s: %d, want 404 (%s)", c.method, c.path, got.status, got.raw)
		}
	}
	list := e.call(t, admin, "GET", "/api/provisioning-jobs?limit=500", "")
	data, _ := list.body["data"].([]any)
	for _, d := range data {
		if d.(map[string]any)["id"] == rem.ID {
			t.Errorf("the provisioning list holds remediation %s", rem.ID)
		}
	}
	if len(data) == 0 {
		t.Fatalf("the provisioning list is empty: %s", list.raw)
	}
	if got := e.call(t, admin, "GET", "/api/remediation-jobs/"+rem.ID, ""); got.status != 200 || got.body["status"] != string(job.StatusAwaitingUser) {
		t.Errorf("the remediation itself: %d %s", got.status, got.raw)
	}
}
