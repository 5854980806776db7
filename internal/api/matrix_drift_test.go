package api

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/jobs"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
	"github.com/groundworkhq/groundwork/internal/store"
)

// matrixInspector is the inspector of the matrix's test family: one security group whose
// ingress gained a rule, owned by the family's second step.
type matrixInspector struct{}

func (matrixInspector) Inspect(context.Context, *job.Job) ([]job.Drift, error) {
	return []job.Drift{{Resource: job.ResourceRef{Type: "security-group", ID: "sg-1"}, Field: "ingress",
		Applied: []string{"tcp 80 from 0.0.0.0/0"}, Actual: []string{"tcp 22 from 0.0.0.0/0", "tcp 80 from 0.0.0.0/0"}, Step: "step2"}}, nil
}

// matrixDrift inspects the test family only: every other family is not supported.
func matrixDrift() *DriftConfig {
	return &DriftConfig{Inspectors: func(_ context.Context, j *job.Job) (jobs.Inspector, bool, error) {
		return matrixInspector{}, j.Family == testfamily.Family, nil
	}}
}

// inspected stores a completed job of org with its inspection recorded, as POST inspect
// leaves one.
func (e *accessEnv) inspected(t *testing.T, org string) *job.Job {
	t.Helper()
	j := e.job(t, org, e.space(t, org), job.StatusCompleted)
	d, _ := matrixInspector{}.Inspect(context.Background(), j)
	if err := e.st.RecordInspection(context.Background(), &job.Inspection{JobID: j.ID, OrgID: org, SpaceID: j.SpaceID,
		InspectedAt: time.Now(), Drift: d}); err != nil {
		t.Fatal(err)
	}
	return j
}

func driftFixtures() map[string]fixture {
	const base = "/api/provisioning-jobs/"
	return map[string]fixture{
		"POST " + base + "{id}/inspect": {ok: 200, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			j := e.job(t, org, e.space(t, org), job.StatusCompleted)
			return target{path: base + j.ID + "/inspect", resourceType: "provisioning-job", resourceID: j.ID,
				check: func(got reply) error {
					drift, _ := got.body["drift"].([]any)
					if got.body["driftCount"] != float64(1) || len(drift) != 1 || got.body["jobID"] != j.ID {
						return fmt.Errorf("inspection answer: %s", got.raw)
					}
					return nil
				}}
		}},
		"GET " + base + "{id}/drift": {ok: 200, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			return target{path: base + e.inspected(t, org).ID + "/drift"}
		}},
		"POST " + base + "{id}/reconcile": {ok: 202, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			j := e.inspected(t, org)
			return target{path: base + j.ID + "/reconcile", resourceType: "provisioning-job", resourceID: j.ID,
				check: func(got reply) error {
					steps, _ := got.body["steps"].([]any)
					if got.body["status"] != string(job.StatusQueued) || len(steps) != 2 ||
						steps[1].(map[string]any)["status"] != string(job.StepPending) {
						return fmt.Errorf("reconciled job: %s", got.raw)
					}
					return nil
				}}
		}},
	}
}

// The drift routes answer what a caller may act on, and say why where they cannot.
func TestDriftRoutesAnswers(t *testing.T) {
	t.Parallel()
	e := newAccessEnv(t)
	admin := e.tokens[orgA+"/admin"]
	sp := e.space(t, orgA)
	other := &job.Job{ID: "job_" + e.uniq(), OrgID: orgA, SpaceID: sp, Kind: job.KindProvisioning, Family: job.FamilyNetwork,
		Provider: "local", Mode: job.ModeCreate, Config: json.RawMessage(`{}`), Infra: json.RawMessage(`{}`),
		Steps: []job.StepRecord{{Name: "validate", Status: job.StepDone}}, Status: job.StatusCompleted, Phase: job.PhaseApply,
		LeaseTTL: time.Minute, NextRunAt: time.Now()}
	if _, err := e.st.CreateJob(context.Background(), &store.CreateJobParams{Job: other, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	never := e.job(t, orgA, sp, job.StatusCompleted)
	running := e.job(t, orgA, sp, job.StatusRunning)
	theirs := e.inspected(t, orgB)
	cases := []struct {
		name, method, path string
		status             int
		detail             string
	}{
		{"another org's job is not found", "POST", "/api/provisioning-jobs/" + theirs.ID + "/inspect", 404, ""},
		{"another org's drift is not found", "GET", "/api/provisioning-jobs/" + theirs.ID + "/drift", 404, ""},
		{"another org's job is not reconciled", "POST", "/api/provisioning-jobs/" + theirs.ID + "/reconcile", 404, ""},
		{"a job never inspected has no drift", "GET", "/api/provisioning-jobs/" + never.ID + "/drift", 404, ""},
		{"reconcile before inspect", "POST", "/api/provisioning-jobs/" + never.ID + "/reconcile", 409, ""},
		{"a running job is not inspected", "POST", "/api/provisioning-jobs/" + running.ID + "/inspect", 409, ""},
		{"a family without an inspector", "POST", "/api/provisioning-jobs/" + other.ID + "/inspect", 400,
			"inspection is not supported for network on local"},
	}
	for _, c := range cases {
		got := e.call(t, admin, c.method, c.path, "")
		if got.status != c.status || (c.detail != "" && got.body["detail"] != c.detail) {
			t.Errorf("%s: %d %s, want %d %q", c.name, got.status, got.raw, c.status, c.detail)
		}
		if c.detail != "" {
			errs, _ := got.body["errors"].([]any)
			if len(errs) != 1 || errs[0].(map[string]any)["field"] != "kind" {
				t.Errorf("%s: field errors %v", c.name, got.body["errors"])
			}
		}
	}
	// Theirs is untouched by the refused calls.
	if j, err := e.st.GetJob(context.Background(), &store.GetJobParams{OrgID: orgB, ID: theirs.ID}); err != nil || j.Version != theirs.Version {
		t.Errorf("another org's job changed: %+v %v", j, err)
	}
}

// A space's inspection interval is a whole number of minutes; anything else is a field error,
// never a stored setting the schedule would misread.
func TestSpaceInspectIntervalSetting(t *testing.T) {
	t.Parallel()
	e := newAccessEnv(t)
	admin := e.tokens[orgA+"/admin"]
	for _, bad := range []string{`-1`, `1.5`, `"10"`, `100000`} {
		a := e.call(t, admin, "POST", "/api/spaces", `{"name":"dev","provider":"local","region":"local","config":{"inspectIntervalMinutes":`+bad+`}}`)
		errs, _ := a.body["errors"].([]any)
		if a.status != 400 || len(errs) != 1 || errs[0].(map[string]any)["field"] != "config.inspectIntervalMinutes" {
			t.Errorf("interval %s: %d %s", bad, a.status, a.raw)
		}
	}
	if a := e.call(t, admin, "POST", "/api/spaces", `{"name":"dev","provider":"local","region":"local","config":{"inspectIntervalMinutes":60}}`); a.status != 201 {
		t.Fatalf("a one-hour interval: %d %s", a.status, a.raw)
	}
}
