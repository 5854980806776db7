package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/audit"
	"github.com/groundworkhq/groundwork/internal/store"
)

// testJobRevisions checks the revision ledger: revisions read back in number order with their
// config and infra, a number taken twice is a version conflict, a status change lands on the
// one revision named, nothing is seen across orgs, and a revision written in an audited
// transaction that fails is gone with it.
func testJobRevisions(t *testing.T, s store.Store) {
	ctx := context.Background()
	rs, ok := s.(store.JobRevisions)
	if !ok {
		t.Fatalf("store %T keeps no job revisions", s)
	}
	rev := func(org string, n int, status store.RevisionStatus) store.JobRevision {
		return store.JobRevision{OrgID: org, JobID: "job_rev", Number: n, Config: json.RawMessage(`{"allocatedStorageGB":` + string(rune('0'+n)) + `0}`),
			Infra: json.RawMessage(`{"server":{"id":"s1"}}`), Status: status, Reason: "update", Actor: "alice", CreatedAt: t0.Add(time.Duration(n) * time.Minute)}
	}
	for _, r := range []store.JobRevision{rev("org_a", 2, store.RevisionApplying), rev("org_a", 1, store.RevisionApplied), rev("org_b", 1, store.RevisionApplied)} {
		if err := rs.AddRevision(ctx, r); err != nil {
			t.Fatalf("add revision %d of %s: %v", r.Number, r.OrgID, err)
		}
	}
	if err := rs.AddRevision(ctx, rev("org_a", 2, store.RevisionApplying)); !errors.Is(err, store.ErrVersionConflict) {
		t.Fatalf("revision 2 added twice: %v, want ErrVersionConflict", err)
	}
	if err := rs.SetRevisionStatus(ctx, "org_a", "job_rev", 2, store.RevisionFailed, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := rs.SetRevisionStatus(ctx, "org_c", "job_rev", 2, store.RevisionFailed, t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("status of another org's revision: %v, want ErrNotFound", err)
	}
	got, err := rs.ListRevisions(ctx, "org_a", "job_rev")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Number != 1 || got[1].Number != 2 {
		t.Fatalf("revisions %+v, want 1 and 2 in order", got)
	}
	if got[0].Status != store.RevisionApplied || got[1].Status != store.RevisionFailed || !got[1].UpdatedAt.Equal(t0.Add(time.Hour)) ||
		!got[1].CreatedAt.Equal(t0.Add(2*time.Minute)) || string(got[1].Config) != `{"allocatedStorageGB":20}` ||
		string(got[1].Infra) != `{"server":{"id":"s1"}}` || got[1].Actor != "alice" || got[1].Reason != "update" {
		t.Fatalf("revisions read back as %+v", got)
	}
	if other, err := rs.ListRevisions(ctx, "org_b", "job_rev"); err != nil || len(other) != 1 || other[0].Status != store.RevisionApplied {
		t.Fatalf("org_b sees %+v (%v), want its own one revision, untouched", other, err)
	}
	if none, err := rs.ListRevisions(ctx, "org_c", "job_rev"); err != nil || len(none) != 0 {
		t.Fatalf("org_c sees %+v (%v)", none, err)
	}
	// A revision awaiting approval reads back as such, then as approved (applying) or rejected.
	for i, final := range []store.RevisionStatus{store.RevisionApplying, store.RevisionRejected} {
		pending := rev("org_b", 2+i, store.RevisionAwaitingApproval)
		if err := rs.AddRevision(ctx, pending); err != nil {
			t.Fatal(err)
		}
		if got, err := rs.ListRevisions(ctx, "org_b", "job_rev"); err != nil || got[len(got)-1].Status != store.RevisionAwaitingApproval {
			t.Fatalf("pending revision read back as %+v (%v)", got, err)
		}
		if err := rs.SetRevisionStatus(ctx, "org_b", "job_rev", pending.Number, final, t0.Add(2*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if got, err := rs.ListRevisions(ctx, "org_b", "job_rev"); err != nil || got[len(got)-1].Status != final {
			t.Fatalf("decided revision read back as %+v (%v), want %s", got, err, final)
		}
	}

	// A revision is written with the change it records, or not at all.
	boom := errors.New("boom")
	e := audit.New("org_a", audit.ScopeProvisioning, "provisioning-job.update-config", "alice", "provisioning-job", "job_rev", nil)
	err = s.Audited(ctx, e, func(tx store.Tx) error {
		if err := tx.AddRevision(ctx, rev("org_a", 3, store.RevisionApplying)); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("audited: %v", err)
	}
	if got, _ := rs.ListRevisions(ctx, "org_a", "job_rev"); len(got) != 2 {
		t.Fatalf("a rolled-back transaction left revisions %+v", got)
	}
}
