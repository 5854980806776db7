package datastore

import (
	"context"
	"testing"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
)

// fakeSetter is a cloud that sets admin passwords through its API.
type fakeSetter struct {
	sent    []string
	pending bool
}

func (f *fakeSetter) SetsAdminPassword(ds.Engine) bool { return true }

func (f *fakeSetter) SetAdminPassword(_ context.Context, p AdminPasswordParams) error {
	f.sent, f.pending = append(f.sent, p.Password), true
	return nil
}

func (f *fakeSetter) AdminPasswordPending(context.Context, AdminPasswordParams) (bool, error) {
	return f.pending, nil
}

// The admin password of a cloud server goes out once, is recorded as sent in the wait's
// checkpoint, and is waited on until the cloud no longer reports it pending; a run whose
// checkpoint was lost sends the same password again.
func TestSetAdminPasswordByAPI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := New(Options{})
	r := &pipeline.Run{Job: &job.Job{ID: "job_rot"}}
	f := &fakeSetter{}
	res, done, err := p.setAdminPasswordByAPI(ctx, r, f, RotationState{ID: "rot_1"}, ds.EnginePostgres, "pw-new")
	if err != nil || done || res.Outcome != pipeline.OutcomeWait || len(f.sent) != 1 {
		t.Fatalf("first run: %+v done=%v %v, sent %d", res, done, err, len(f.sent))
	}
	st, ok := res.Infra[InfraRotation].(RotationState)
	if !ok || !st.PasswordSent {
		t.Fatalf("the wait's checkpoint %+v does not record the password as sent", res.Infra)
	}
	// The checkpoint is lost: the run starts from the state before it and sends again.
	if _, _, err := p.setAdminPasswordByAPI(ctx, r, f, RotationState{ID: "rot_1"}, ds.EnginePostgres, "pw-new"); err != nil || len(f.sent) != 2 || f.sent[1] != "pw-new" {
		t.Fatalf("after a lost checkpoint: %v, sent %v", err, f.sent)
	}
	if res, done, err := p.setAdminPasswordByAPI(ctx, r, f, st, ds.EnginePostgres, "pw-new"); err != nil || done || res.Outcome != pipeline.OutcomeWait || len(f.sent) != 2 {
		t.Fatalf("while pending: %+v done=%v %v, sent %d", res, done, err, len(f.sent))
	}
	f.pending = false
	if _, done, err := p.setAdminPasswordByAPI(ctx, r, f, st, ds.EnginePostgres, "pw-new"); err != nil || !done || len(f.sent) != 2 {
		t.Fatalf("once applied: done=%v %v, sent %d", done, err, len(f.sent))
	}
}
