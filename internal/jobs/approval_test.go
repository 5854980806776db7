package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
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

// backups is sizing whose {"keep": n} is a retention: fewer drops data, refused unless the
// request allows it, as a datastore's backupRetentionDays.
type backups struct{ sizing }

func (b backups) PlanUpdate(ctx context.Context, j *job.Job, req pipeline.UpdateRequest) (*pipeline.UpdatePlan, error) {
	var from, to struct {
		Keep int `json:"keep"`
	}
	_ = json.Unmarshal(j.Config, &from)
	_ = json.Unmarshal(req.Config, &to)
	if to.Keep < from.Keep && !req.AllowDataLoss {
		return nil, validation.New("config.keep", "dataLoss", "fewer backups drops the older ones; send allowDataLoss: true")
	}
	pl, err := b.sizing.PlanUpdate(ctx, j, req)
	if err != nil || from.Keep == to.Keep {
		return pl, err
	}
	rc := &pl.Resources[0]
	rc.Action, rc.DataLoss = pipeline.ActionInPlace, to.Keep < from.Keep
	rc.Changes = append(rc.Changes, pipeline.FieldChange{Field: "keep", From: from.Keep, To: to.Keep})
	pl.Steps[1] = job.StepRecord{Name: pl.Steps[1].Name, Status: job.StepPending}
	pl.Rerun = []string{pl.Steps[1].Name}
	return pl, nil
}

// TestDataLossAwaitsApproval: an update that drops data, allowed by its requester, is
// recorded awaiting approval and the job is left as it is; its requester cannot approve it,
// another principal can, and the job then runs it as any update; a rejected one never runs;
// a later update supersedes one still pending; another org sees none of it.
func TestDataLossAwaitsApproval(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := world(t)
	reg, err := pipeline.NewRegistry(pipeline.Tuned{Pipeline: backups{sizing{&testfamily.Pipeline{N: 2}}}})
	if err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Hour)
	svc := &jobs.Service{Store: st, Pipelines: reg, Now: func() time.Time { return now }}
	alice, bob := jobs.Caller{OrgID: "org_a", Actor: "alice"}, jobs.Caller{OrgID: "org_a", Actor: "bob"}
	j := seed(t, st, "job_loss", func(j *job.Job) { done(j); j.Config = json.RawMessage(`{"size":1,"kind":"a","keep":7}`) })
	fewer := json.RawMessage(`{"size":1,"kind":"a","keep":3}`)
	var rf *jobs.Refusal

	// The dry run says an approval will be needed.
	pl, err := svc.PlanUpdate(ctx, alice, j.ID, jobs.Update{Config: fewer, AllowDataLoss: true})
	if err != nil || !jobs.NeedsApproval(pl) {
		t.Fatalf("dry run: %+v (%v), want one needing approval", pl, err)
	}
	// Without allowDataLoss it is refused, as before.
	if _, _, err := svc.ApplyUpdate(ctx, alice, j.ID, jobs.Update{Config: fewer}); !errors.As(err, &rf) || rf.Reason != jobs.Invalid {
		t.Fatalf("data loss not allowed: %v", err)
	}

	// Allowed, it awaits approval: the job keeps its status, config and steps.
	held, pending, err := svc.ApplyUpdate(ctx, alice, j.ID, jobs.Update{Version: &j.Version, Config: fewer, AllowDataLoss: true})
	if err != nil {
		t.Fatal(err)
	}
	if pending == nil || pending.Number != 2 || pending.Status != store.RevisionAwaitingApproval {
		t.Fatalf("pending revision %+v, want 2 awaiting approval", pending)
	}
	if held.Status != job.StatusCompleted || string(held.Config) != string(j.Config) || held.Steps[1].Status != job.StepDone {
		t.Fatalf("the job awaiting approval is %s with config %s, steps %+v; want it as it was", held.Status, held.Config, held.Steps)
	}
	statuses := func(want ...store.RevisionStatus) []store.JobRevision {
		t.Helper()
		revs, err := svc.Revisions(ctx, "org_a", j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(revs) != len(want) {
			t.Fatalf("revisions %+v, want %v", revs, want)
		}
		for i, r := range revs {
			if r.Status != want[i] {
				t.Fatalf("revision %d is %s, want %v", r.Number, r.Status, want)
			}
		}
		return revs
	}
	statuses(store.RevisionApplied, store.RevisionAwaitingApproval)
	entries, _, err := st.ListAudit(ctx, &audit.Filter{OrgID: "org_a", ResourceID: j.ID, Action: "provisioning-job.update-config", Page: 1, Limit: 5})
	if err != nil || len(entries) != 1 {
		t.Fatalf("audit of the pending update: %d entries (%v)", len(entries), err)
	}
	var meta struct {
		AwaitingApproval bool `json:"awaitingApproval"`
		Revision         int  `json:"revision"`
	}
	if err := json.Unmarshal(entries[0].Metadata, &meta); err != nil || !meta.AwaitingApproval || meta.Revision != 2 {
		t.Fatalf("audit metadata %s (%v), want awaitingApproval and revision 2", entries[0].Metadata, err)
	}

	// Four eyes: its requester cannot approve it; another org does not find it.
	if _, err := svc.Approve(ctx, alice, j.ID, jobs.Decision{Revision: 2}); !errors.As(err, &rf) || rf.Reason != jobs.Forbidden {
		t.Fatalf("approved by its requester: %v, want Forbidden", err)
	}
	if _, err := svc.Approve(ctx, jobs.Caller{OrgID: "org_b", Actor: "eve"}, j.ID, jobs.Decision{Revision: 2}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("approved from another org: %v, want ErrNotFound", err)
	}
	if _, err := svc.Approve(ctx, bob, j.ID, jobs.Decision{Revision: 9}); !errors.As(err, &rf) || rf.Reason != jobs.NotFound {
		t.Fatalf("approval of no revision: %v, want NotFound", err)
	}

	// Approved by bob: queued with the new config, revision 2 applying (no third revision).
	now = now.Add(time.Minute)
	up, err := svc.Approve(ctx, bob, j.ID, jobs.Decision{Revision: 2, Reason: "retention policy changed"})
	if err != nil {
		t.Fatal(err)
	}
	if up.Status != job.StatusQueued || string(up.Config) != string(fewer) || up.Steps[1].Status != job.StepPending {
		t.Fatalf("approved: %s with config %s, steps %+v", up.Status, up.Config, up.Steps)
	}
	revs := statuses(store.RevisionApplied, store.RevisionApplying)
	if revs[1].Actor != "alice" {
		t.Fatalf("revision 2's actor %q, want its requester", revs[1].Actor)
	}
	if _, err := svc.Approve(ctx, bob, j.ID, jobs.Decision{Revision: 2}); !errors.As(err, &rf) || rf.Reason != jobs.Conflict {
		t.Fatalf("approved twice: %v, want Conflict", err)
	}
	complete := func(j *job.Job) *job.Job {
		t.Helper()
		completed := job.StatusCompleted
		steps := append([]job.StepRecord(nil), j.Steps...)
		for i := range steps {
			steps[i].Status = job.StepDone
		}
		out, err := st.UpdateJob(ctx, &store.UpdateJobParams{OrgID: "org_a", ID: j.ID, Version: j.Version, Now: now, Status: &completed, Steps: steps})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	fin := complete(up)
	statuses(store.RevisionSuperseded, store.RevisionApplied)

	// Rejected: nothing runs, the job keeps its config; a rejected revision is not approved later.
	evenFewer := json.RawMessage(`{"size":1,"kind":"a","keep":1}`)
	if _, pending, err = svc.ApplyUpdate(ctx, alice, j.ID, jobs.Update{Config: evenFewer, AllowDataLoss: true}); err != nil || pending == nil || pending.Number != 3 {
		t.Fatalf("second pending update: %+v (%v)", pending, err)
	}
	rej, err := svc.Reject(ctx, bob, j.ID, jobs.Decision{Revision: 3, Reason: "keep a week"})
	if err != nil || rej.Status != store.RevisionRejected {
		t.Fatalf("reject: %+v (%v)", rej, err)
	}
	after, _ := svc.Get(ctx, "org_a", j.ID)
	if after.Status != job.StatusCompleted || string(after.Config) != string(fin.Config) {
		t.Fatalf("after the rejection the job is %s with config %s, want completed with %s", after.Status, after.Config, fin.Config)
	}
	statuses(store.RevisionSuperseded, store.RevisionApplied, store.RevisionRejected)
	if _, err := svc.Approve(ctx, bob, j.ID, jobs.Decision{Revision: 3}); !errors.As(err, &rf) || rf.Reason != jobs.Conflict {
		t.Fatalf("approval of a rejected revision: %v, want Conflict", err)
	}

	// A later update supersedes one still pending, which can then no longer be approved.
	if _, pending, err = svc.ApplyUpdate(ctx, alice, j.ID, jobs.Update{Config: evenFewer, AllowDataLoss: true}); err != nil || pending == nil || pending.Number != 4 {
		t.Fatalf("third pending update: %+v (%v)", pending, err)
	}
	grown, pending, err := svc.ApplyUpdate(ctx, alice, j.ID, jobs.Update{Config: json.RawMessage(`{"size":2,"kind":"a","keep":3}`)})
	if err != nil || pending != nil || grown.Status != job.StatusQueued {
		t.Fatalf("update after a pending one: %v, pending %+v (%v)", grown.Status, pending, err)
	}
	statuses(store.RevisionSuperseded, store.RevisionApplied, store.RevisionRejected, store.RevisionSuperseded, store.RevisionApplying)
	if _, err := svc.Approve(ctx, bob, j.ID, jobs.Decision{Revision: 4}); !errors.As(err, &rf) || rf.Reason != jobs.Conflict {
		t.Fatalf("approval of a superseded revision: %v, want Conflict", err)
	}

	// A job that moved on (running again) is not approved into.
	fin = complete(grown)
	if _, pending, err = svc.ApplyUpdate(ctx, alice, j.ID, jobs.Update{Config: json.RawMessage(`{"size":2,"kind":"a","keep":1}`), AllowDataLoss: true}); err != nil || pending == nil {
		t.Fatalf("fourth pending update: %+v (%v)", pending, err)
	}
	running := job.StatusRunning
	moved, err := svc.Get(ctx, "org_a", j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateJob(ctx, &store.UpdateJobParams{OrgID: "org_a", ID: j.ID, Version: moved.Version, Now: now, Status: &running}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Approve(ctx, bob, j.ID, jobs.Decision{Revision: pending.Number}); !errors.As(err, &rf) || rf.Reason != jobs.Conflict {
		t.Fatalf("approval into a running job: %v, want Conflict", err)
	}
}

// A rollback that drops data awaits approval as an update does.
func TestDataLossRollbackAwaitsApproval(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := world(t)
	reg, err := pipeline.NewRegistry(backups{sizing{&testfamily.Pipeline{N: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Hour)
	svc := &jobs.Service{Store: st, Pipelines: reg, Now: func() time.Time { return now }}
	alice, bob := jobs.Caller{OrgID: "org_a", Actor: "alice"}, jobs.Caller{OrgID: "org_a", Actor: "bob"}
	j := seed(t, st, "job_rb_loss", func(j *job.Job) { done(j); j.Config = json.RawMessage(`{"size":1,"kind":"a","keep":3}`) })
	up, _, err := svc.ApplyUpdate(ctx, alice, j.ID, jobs.Update{Config: json.RawMessage(`{"size":1,"kind":"a","keep":7}`)})
	if err != nil {
		t.Fatal(err)
	}
	failed := job.StatusFailed
	steps := append([]job.StepRecord(nil), up.Steps...)
	steps[1].Status = job.StepFailed
	if _, err := st.UpdateJob(ctx, &store.UpdateJobParams{OrgID: "org_a", ID: j.ID, Version: up.Version, Now: now, Status: &failed, Steps: steps,
		Failure: &job.Failure{Class: "user_action", Code: "X", Message: "no"}}); err != nil {
		t.Fatal(err)
	}
	held, pending, err := svc.Rollback(ctx, alice, j.ID, nil, true)
	if err != nil || pending == nil || pending.Number != 3 || pending.Reason != "rollback" || held.Status != job.StatusFailed {
		t.Fatalf("rollback dropping data: job %v, pending %+v (%v)", held, pending, err)
	}
	rb, err := svc.Approve(ctx, bob, j.ID, jobs.Decision{Revision: 3})
	if err != nil {
		t.Fatal(err)
	}
	if rb.Status != job.StatusQueued || rb.Failure != nil || string(rb.Config) != `{"size":1,"kind":"a","keep":3}` {
		t.Fatalf("approved rollback: %s %s failure %+v", rb.Status, rb.Config, rb.Failure)
	}
	revs, err := svc.Revisions(ctx, "org_a", j.ID)
	if err != nil || len(revs) != 3 || revs[1].Status != store.RevisionFailed || revs[2].Status != store.RevisionApplying {
		t.Fatalf("revisions %+v (%v), want 1 applied, 2 failed, 3 applying", revs, err)
	}
}
