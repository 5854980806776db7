package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/audit"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/jobs"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// sizing is the test family with a config update: {"size": n} changes in place, step2 runs
// again; {"kind": ...} cannot change.
type sizing struct{ *testfamily.Pipeline }

func (sizing) PlanUpdate(_ context.Context, j *job.Job, req pipeline.UpdateRequest) (*pipeline.UpdatePlan, error) {
	var from, to struct {
		Size int    `json:"size"`
		Kind string `json:"kind"`
	}
	_ = json.Unmarshal(j.Config, &from)
	if err := json.Unmarshal(req.Config, &to); err != nil {
		return nil, validation.New("config", "type", err.Error())
	}
	if from.Kind != to.Kind {
		return nil, validation.New("config.kind", "immutable", "cannot change in place")
	}
	rc := pipeline.ResourceChange{Resource: "thing", Action: pipeline.ActionNoOp, Changes: []pipeline.FieldChange{}, Disruption: "none"}
	steps := append([]job.StepRecord(nil), j.Steps...)
	var rerun []string
	if from.Size != to.Size {
		rc.Action, rc.Changes = pipeline.ActionInPlace, []pipeline.FieldChange{{Field: "size", From: from.Size, To: to.Size}}
		steps[1] = job.StepRecord{Name: steps[1].Name, Status: job.StepPending}
		rerun = []string{steps[1].Name}
	}
	return &pipeline.UpdatePlan{Resources: []pipeline.ResourceChange{rc}, Config: req.Config, Steps: steps, Rerun: rerun}, nil
}

func TestConfigUpdateAndRollback(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := world(t)
	// The server wraps a family's pipeline; the updater is found through the wrappers.
	reg, err := pipeline.NewRegistry(pipeline.Tuned{Pipeline: sizing{&testfamily.Pipeline{N: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Hour)
	svc := &jobs.Service{Store: st, Pipelines: reg, Now: func() time.Time { return now }}
	alice := jobs.Caller{OrgID: "org_a", Actor: "alice"}
	j := seed(t, st, "job_upd", func(j *job.Job) { done(j); j.Config = json.RawMessage(`{"size":1,"kind":"a"}`) })

	// The dry run answers the diff and changes nothing.
	pl, err := svc.PlanUpdate(ctx, alice, j.ID, jobs.Update{Config: json.RawMessage(`{"size":2,"kind":"a"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(pl.Resources) != 1 || pl.Resources[0].Action != pipeline.ActionInPlace || pl.Resources[0].Changes[0].Field != "size" {
		t.Fatalf("plan %+v", pl)
	}
	if after, _ := svc.Get(ctx, "org_a", j.ID); after.Version != j.Version {
		t.Fatal("the dry run changed the job")
	}
	if revs, err := svc.Revisions(ctx, "org_a", j.ID); err != nil || len(revs) != 0 {
		t.Fatalf("the dry run recorded revisions %+v (%v)", revs, err)
	}

	// A refused field names itself under config; nothing is stored.
	_, _, err = svc.ApplyUpdate(ctx, alice, j.ID, jobs.Update{Config: json.RawMessage(`{"size":2,"kind":"b"}`)})
	var rf *jobs.Refusal
	if !errors.As(err, &rf) || rf.Reason != jobs.Invalid || len(rf.Fields) != 1 || rf.Fields[0].Field != "config.kind" {
		t.Fatalf("kind change: %v, want a refusal naming config.kind", err)
	}
	// A stale version is a conflict.
	stale := j.Version - 1
	if _, _, err := svc.ApplyUpdate(ctx, alice, j.ID, jobs.Update{Version: &stale, Config: json.RawMessage(`{"size":2,"kind":"a"}`)}); !errors.Is(err, store.ErrVersionConflict) {
		t.Fatalf("stale version: %v", err)
	}
	// Nothing to change: the job as it is, no revision.
	same, _, err := svc.ApplyUpdate(ctx, alice, j.ID, jobs.Update{Config: json.RawMessage(`{"size":1,"kind":"a"}`)})
	if err != nil || same.Version != j.Version {
		t.Fatalf("unchanged config: %v, version %d", err, same.Version)
	}

	// Applied: the job is queued with step2 pending and the new config; revisions 1 (the
	// config it was created with) and 2.
	up, _, err := svc.ApplyUpdate(ctx, alice, j.ID, jobs.Update{Version: &j.Version, Config: json.RawMessage(`{"size":2,"kind":"a"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if up.Status != job.StatusQueued || up.Steps[0].Status != job.StepDone || up.Steps[1].Status != job.StepPending || string(up.Config) != `{"size":2,"kind":"a"}` {
		t.Fatalf("after the update the job is %s with steps %+v and config %s", up.Status, up.Steps, up.Config)
	}
	revisions := func(want ...store.RevisionStatus) []store.JobRevision {
		t.Helper()
		revs, err := svc.Revisions(ctx, "org_a", j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(revs) != len(want) {
			t.Fatalf("revisions %+v, want %v", revs, want)
		}
		for i, r := range revs {
			if r.Number != i+1 || r.Status != want[i] {
				t.Fatalf("revision %d: number %d status %s, want %v", i, r.Number, r.Status, want)
			}
		}
		return revs
	}
	revs := revisions(store.RevisionApplied, store.RevisionApplying)
	if string(revs[0].Config) != `{"size":1,"kind":"a"}` || revs[0].Reason != "create" || revs[1].Actor != "alice" || revs[1].Reason != "update" {
		t.Fatalf("revisions %+v", revs)
	}
	// Another org sees none of it.
	if _, err := svc.Revisions(ctx, "org_b", j.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another org's revisions: %v", err)
	}
	// A second update while the first runs is refused.
	if _, _, err := svc.ApplyUpdate(ctx, alice, j.ID, jobs.Update{Config: json.RawMessage(`{"size":3,"kind":"a"}`)}); !errors.As(err, &rf) || rf.Reason != jobs.Conflict {
		t.Fatalf("update of a queued job: %v", err)
	}
	// Rollback needs a failed update.
	if _, _, err := svc.Rollback(ctx, alice, j.ID, nil, false); !errors.As(err, &rf) || rf.Reason != jobs.Conflict {
		t.Fatalf("rollback while the update runs: %v", err)
	}

	// The update's step fails: revision 2 reads failed.
	failed := job.StatusFailed
	steps := append([]job.StepRecord(nil), up.Steps...)
	steps[1].Status = job.StepFailed
	up, err = st.UpdateJob(ctx, &store.UpdateJobParams{OrgID: "org_a", ID: j.ID, Version: up.Version, Now: now, Status: &failed, Steps: steps,
		Failure: &job.Failure{Class: "user_action", Code: "X", Message: "no"}})
	if err != nil {
		t.Fatal(err)
	}
	revisions(store.RevisionApplied, store.RevisionFailed)

	// Rollback re-opens the job with revision 1's config, as revision 3.
	now = now.Add(time.Minute)
	rb, _, err := svc.Rollback(ctx, jobs.Caller{OrgID: "org_a", Actor: "bob"}, j.ID, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if rb.Status != job.StatusQueued || rb.Failure != nil || string(rb.Config) != `{"size":1,"kind":"a"}` || rb.Steps[1].Status != job.StepPending {
		t.Fatalf("after rollback: %s %s %+v failure %+v", rb.Status, rb.Config, rb.Steps, rb.Failure)
	}
	revs = revisions(store.RevisionApplied, store.RevisionFailed, store.RevisionApplying)
	if revs[2].Reason != "rollback" || revs[2].Actor != "bob" {
		t.Fatalf("revision 3 %+v", revs[2])
	}

	// The rollback completes: revision 3 applied, revision 1 superseded.
	completed := job.StatusCompleted
	steps = append([]job.StepRecord(nil), rb.Steps...)
	steps[1].Status = job.StepDone
	if _, err := st.UpdateJob(ctx, &store.UpdateJobParams{OrgID: "org_a", ID: j.ID, Version: rb.Version, Now: now, Status: &completed, Steps: steps}); err != nil {
		t.Fatal(err)
	}
	revisions(store.RevisionSuperseded, store.RevisionFailed, store.RevisionApplied)

	// Every accepted change is in the audit log, with who and what.
	entries, _, err := st.ListAudit(ctx, &audit.Filter{OrgID: "org_a", ResourceID: j.ID, Page: 1, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	actions := map[string]string{}
	for _, e := range entries {
		actions[e.Action] = e.Actor
	}
	if actions["provisioning-job.update-config"] != "alice" || actions["provisioning-job.rollback-config"] != "bob" {
		t.Fatalf("audit actions %v", actions)
	}
}

type opaque struct{ pipeline.Pipeline }

func TestConfigUpdateRefusals(t *testing.T) {
	t.Parallel()
	st := world(t)
	updating, err := pipeline.NewRegistry(sizing{&testfamily.Pipeline{N: 2}})
	if err != nil {
		t.Fatal(err)
	}
	// A pipeline seen only as a pipeline.Pipeline, with no Unwrap: no updater to find.
	plain, err := pipeline.NewRegistry(opaque{&testfamily.Pipeline{N: 2}})
	if err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return t0 }
	cases := []struct {
		name   string
		reg    *pipeline.Registry
		seed   func(j *job.Job)
		config string
		reason jobs.Reason
		field  string
	}{
		{"running job", updating, func(j *job.Job) { j.Status = job.StatusRunning }, `{"size":2}`, jobs.Conflict, ""},
		{"failed while created", updating, func(j *job.Job) { j.Status = job.StatusFailed }, `{"size":2}`, jobs.Conflict, ""},
		{"family without updates", plain, done, `{"size":2}`, jobs.Invalid, "config"},
		{"not an object", updating, done, `[1]`, jobs.Invalid, "config"},
		{"fixed field", updating, done, `{"kind":"z"}`, jobs.Invalid, "config.kind"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc := &jobs.Service{Store: st, Pipelines: tc.reg, Now: now}
			j := seed(t, st, "job_ref"+string(rune('a'+i)), tc.seed)
			_, err := svc.PlanUpdate(t.Context(), jobs.Caller{OrgID: "org_a", Actor: "a"}, j.ID, jobs.Update{Config: json.RawMessage(tc.config)})
			var rf *jobs.Refusal
			if !errors.As(err, &rf) || rf.Reason != tc.reason {
				t.Fatalf("%v, want a refusal with reason %d", err, tc.reason)
			}
			if tc.field != "" && (len(rf.Fields) != 1 || rf.Fields[0].Field != tc.field) {
				t.Fatalf("fields %+v, want %s", rf.Fields, tc.field)
			}
		})
	}
}

// keeping is sizing whose jobs keep a marker of their own in their config.
type keeping struct {
	sizing
	seen *json.RawMessage
}

func (k keeping) ConfigState() []string { return []string{"marker"} }

func (k keeping) PlanUpdate(ctx context.Context, j *job.Job, req pipeline.UpdateRequest) (*pipeline.UpdatePlan, error) {
	*k.seen = req.Config
	return k.sizing.PlanUpdate(ctx, j, req)
}

// TestConfigUpdateKeepsTheJobsOwnState: the keys a family names as the job's own state are
// kept as the job has them, whatever the request says, and a config read back from the job
// (state included) is accepted.
func TestConfigUpdateKeepsTheJobsOwnState(t *testing.T) {
	t.Parallel()
	st := world(t)
	var seen json.RawMessage
	reg, err := pipeline.NewRegistry(pipeline.Tuned{Pipeline: keeping{sizing: sizing{&testfamily.Pipeline{N: 2}}, seen: &seen}})
	if err != nil {
		t.Fatal(err)
	}
	svc := &jobs.Service{Store: st, Pipelines: reg, Now: func() time.Time { return t0.Add(time.Hour) }}
	alice := jobs.Caller{OrgID: "org_a", Actor: "alice"}
	for i, tc := range []struct{ stored, sent, want string }{
		{`{"size":1,"kind":"a","marker":"job's"}`, `{"size":2,"kind":"a","marker":"caller's"}`, `{"kind":"a","marker":"job's","size":2}`},
		{`{"size":1,"kind":"a"}`, `{"size":2,"kind":"a","marker":"caller's"}`, `{"kind":"a","size":2}`},
		{`{"size":1,"kind":"a","marker":"job's"}`, `{"size":2,"kind":"a"}`, `{"kind":"a","marker":"job's","size":2}`},
	} {
		j := seed(t, st, fmt.Sprintf("job_keep_%d", i), func(j *job.Job) { done(j); j.Config = json.RawMessage(tc.stored) })
		if _, err := svc.PlanUpdate(t.Context(), alice, j.ID, jobs.Update{Config: json.RawMessage(tc.sent)}); err != nil {
			t.Fatalf("stored %s, sent %s: %v", tc.stored, tc.sent, err)
		}
		if string(seen) != tc.want {
			t.Errorf("stored %s, sent %s: the updater saw %s, want %s", tc.stored, tc.sent, seen, tc.want)
		}
	}
}

// An update whose job failed, sent again with the same config, runs again: it is planned from
// the last applied revision (the diff as the first time), its steps re-open from fresh records
// and it is recorded as the next revision; a completed job sent its own config is left as it is.
func TestFailedUpdateSentAgainRunsAgain(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := world(t)
	reg, err := pipeline.NewRegistry(pipeline.Tuned{Pipeline: sizing{&testfamily.Pipeline{N: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Hour)
	svc := &jobs.Service{Store: st, Pipelines: reg, Now: func() time.Time { return now }}
	alice := jobs.Caller{OrgID: "org_a", Actor: "alice"}
	j := seed(t, st, "job_again", func(j *job.Job) { done(j); j.Config = json.RawMessage(`{"size":1,"kind":"a"}`) })
	grow := jobs.Update{Config: json.RawMessage(`{"size":2,"kind":"a"}`)}
	up, _, err := svc.ApplyUpdate(ctx, alice, j.ID, grow)
	if err != nil {
		t.Fatal(err)
	}
	failed := job.StatusFailed
	steps := append([]job.StepRecord(nil), up.Steps...)
	started := now
	steps[1] = job.StepRecord{Name: steps[1].Name, Status: job.StepFailed, Attempts: 3, StartedAt: &started, Error: "no"}
	up, err = st.UpdateJob(ctx, &store.UpdateJobParams{OrgID: "org_a", ID: j.ID, Version: up.Version, Now: now, Status: &failed, Steps: steps,
		Failure: &job.Failure{Class: "user_action", Code: "X", Message: "no"}})
	if err != nil {
		t.Fatal(err)
	}

	// The dry run shows the failed update's diff again.
	pl, err := svc.PlanUpdate(ctx, alice, j.ID, grow)
	if err != nil {
		t.Fatal(err)
	}
	if !pl.Changed() || pl.Resources[0].Changes[0].From != 1 || pl.Resources[0].Changes[0].To != 2 {
		t.Fatalf("dry run of the failed update's config: %+v", pl.Resources)
	}
	now = now.Add(time.Minute)
	again, _, err := svc.ApplyUpdate(ctx, alice, j.ID, jobs.Update{Version: &up.Version, Config: grow.Config})
	if err != nil {
		t.Fatal(err)
	}
	if again.Status != job.StatusQueued || again.Failure != nil || again.Steps[0].Status != job.StepDone ||
		again.Steps[1].Status != job.StepPending || again.Steps[1].StartedAt != nil || again.Steps[1].Attempts != 0 {
		t.Fatalf("the failed update sent again: %s failure %+v steps %+v", again.Status, again.Failure, again.Steps)
	}
	revs, err := svc.Revisions(ctx, "org_a", j.ID)
	if err != nil || len(revs) != 3 || revs[1].Status != store.RevisionFailed || revs[2].Status != store.RevisionApplying ||
		revs[2].Reason != "update" || string(revs[2].Config) != `{"size":2,"kind":"a"}` {
		t.Fatalf("revisions %+v (%v); want 1 applied, 2 failed, 3 applying the same config", revs, err)
	}

	// Completed, the job's own config changes nothing.
	completed := job.StatusCompleted
	steps = append([]job.StepRecord(nil), again.Steps...)
	steps[1].Status = job.StepDone
	fin, err := st.UpdateJob(ctx, &store.UpdateJobParams{OrgID: "org_a", ID: j.ID, Version: again.Version, Now: now, Status: &completed, Steps: steps})
	if err != nil {
		t.Fatal(err)
	}
	same, _, err := svc.ApplyUpdate(ctx, alice, j.ID, grow)
	if err != nil || same.Version != fin.Version || same.Status != job.StatusCompleted {
		t.Fatalf("a completed job sent its own config: %v, version %d → %d", err, fin.Version, same.Version)
	}
}
