package datastore

import (
	"encoding/json"
	"testing"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// completedJob is a datastore job whose pipeline has run, in mode m, with infra.
func completedJob(t *testing.T, m job.Mode, infra map[string]any) *job.Job {
	t.Helper()
	p := New(Options{})
	j := &job.Job{ID: "job_rot", Family: job.FamilyDatastore, Provider: "local", Mode: m, Status: job.StatusCompleted,
		Config: json.RawMessage(`{"engine":"postgres"}`)}
	for _, s := range p.Steps(j) {
		j.Steps = append(j.Steps, job.StepRecord{Name: s.Name, Status: job.StepDone})
	}
	b, err := json.Marshal(infra)
	if err != nil {
		t.Fatal(err)
	}
	j.Infra = b
	return j
}

// PlanRotation refuses what cannot rotate, naming the request's field or saying the job is
// busy, and otherwise lays the rotation's steps out after the job's own, pending, with the
// request in the config; the pipeline then lists the same steps, so the engine runs them.
func TestPlanRotation(t *testing.T) {
	t.Parallel()
	failedBefore := func(changed bool) *job.Job {
		j := completedJob(t, job.ModeCreate, map[string]any{InfraRotation: RotationState{ID: "rot_0", Target: RotateAdmin, OldRef: "local:a", NewRef: "local:b", Changed: changed}})
		j.Status, j.Failure = job.StatusFailed, &job.Failure{Step: StepRotatePassword}
		return j
	}
	cases := map[string]struct {
		job       *job.Job
		rot       Rotation
		wantField string
		wantBusy  bool
	}{
		"admin":                        {job: completedJob(t, job.ModeCreate, nil), rot: Rotation{ID: "rot_1", Target: RotateAdmin}},
		"database":                     {job: completedJob(t, job.ModeCreate, nil), rot: Rotation{ID: "rot_1", Target: RotateDatabase, DatabaseID: "db_1"}},
		"adopted admin with password":  {job: completedJob(t, job.ModeAdopt, nil), rot: Rotation{ID: "rot_1", Target: RotateAdmin, SecretRef: "local:x"}},
		"adopted admin, no password":   {job: completedJob(t, job.ModeAdopt, nil), rot: Rotation{ID: "rot_1", Target: RotateAdmin}, wantField: "adminPassword"},
		"owned admin with a password":  {job: completedJob(t, job.ModeCreate, nil), rot: Rotation{ID: "rot_1", Target: RotateAdmin, SecretRef: "local:x"}, wantField: "adminPassword"},
		"database with a password":     {job: completedJob(t, job.ModeAdopt, nil), rot: Rotation{ID: "rot_1", Target: RotateDatabase, DatabaseID: "db_1", SecretRef: "local:x"}, wantField: "adminPassword"},
		"database without its id":      {job: completedJob(t, job.ModeCreate, nil), rot: Rotation{ID: "rot_1", Target: RotateDatabase}, wantField: "connection"},
		"unknown target":               {job: completedJob(t, job.ModeCreate, nil), rot: Rotation{ID: "rot_1", Target: "root"}, wantField: "target"},
		"queued job":                   {job: func() *job.Job { j := completedJob(t, job.ModeCreate, nil); j.Status = job.StatusQueued; return j }(), rot: Rotation{ID: "rot_1", Target: RotateAdmin}, wantBusy: true},
		"failed before the change":     {job: failedBefore(false), rot: Rotation{ID: "rot_1", Target: RotateAdmin}},
		"failed after the change":      {job: failedBefore(true), rot: Rotation{ID: "rot_1", Target: RotateAdmin}, wantBusy: true},
		"failed outside of a rotation": {job: func() *job.Job { j := failedBefore(false); j.Failure.Step = StepWaitReady; return j }(), rot: Rotation{ID: "rot_1", Target: RotateAdmin}, wantBusy: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := New(Options{})
			base := len(p.Steps(tc.job))
			config, steps, err := p.PlanRotation(tc.job, tc.rot)
			switch {
			case tc.wantField != "":
				f, ok := validation.Fields(err)
				if !ok || len(f) == 0 || f[0].Field != tc.wantField {
					t.Fatalf("PlanRotation = %v, want a refusal naming %s", err, tc.wantField)
				}
				return
			case tc.wantBusy:
				if _, ok := err.(*Busy); !ok {
					t.Fatalf("PlanRotation = %v, want Busy", err)
				}
				return
			case err != nil:
				t.Fatalf("PlanRotation: %v", err)
			}
			planned := *tc.job
			planned.Config, planned.Steps = config, steps
			rot, ok, err := rotationOf(&planned)
			if err != nil || !ok || rot != tc.rot {
				t.Fatalf("the config records %+v (%v), want %+v", rot, err, tc.rot)
			}
			names := p.Steps(&planned)
			if len(names) != len(steps) {
				t.Fatalf("%d step records for %d steps", len(steps), len(names))
			}
			for i, s := range names {
				if steps[i].Name != s.Name {
					t.Fatalf("record %d is %s, the pipeline's step %s", i, steps[i].Name, s.Name)
				}
				if wantPending := i >= len(names)-len(RotationSteps); wantPending != (steps[i].Status == job.StepPending) {
					t.Errorf("step %s is %s after the plan", s.Name, steps[i].Status)
				}
			}
			if tc.job.StepIndex(StepRotateSecret) < 0 && len(steps) != base+len(RotationSteps) {
				t.Errorf("%d records, want the job's %d and the rotation's", len(steps), base)
			}
			// A second rotation reopens the same four records rather than adding four more.
			again := planned
			again.Status, again.Steps = job.StatusCompleted, nil
			for _, s := range steps {
				again.Steps = append(again.Steps, job.StepRecord{Name: s.Name, Status: job.StepDone})
			}
			_, steps2, err := p.PlanRotation(&again, Rotation{ID: "rot_2", Target: RotateAdmin, SecretRef: tc.rot.SecretRef})
			if err != nil || len(steps2) != len(steps) {
				t.Fatalf("a second rotation: %d records (%v), want %d", len(steps2), err, len(steps))
			}
		})
	}
}
