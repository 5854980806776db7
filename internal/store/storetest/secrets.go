package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
)

// testSecretOwners checks the secret owner ledger: one owner per reference, settled by the
// database when two writers race, and nothing found for another org's reference.
func testSecretOwners(t *testing.T, s store.Store) {
	ctx := context.Background()
	l, ok := s.(secrets.Ledger)
	if !ok {
		t.Fatalf("store %T records no secret owners", s)
	}
	a := secrets.Owner{OrgID: "org_a", Kind: secrets.OwnerAccount, ID: "acc_1"}
	b := secrets.Owner{OrgID: "org_b", Kind: secrets.OwnerJob, ID: "job_1"}
	if _, err := l.SecretOwner(ctx, "local:sec_x"); !errors.Is(err, secrets.ErrNotFound) {
		t.Fatalf("owner of an unknown reference: %v", err)
	}
	if err := l.RecordSecretOwner(ctx, "local:sec_x", a, t0); err != nil {
		t.Fatal(err)
	}
	if err := l.RecordSecretOwner(ctx, "local:sec_x", a, t0); err != nil {
		t.Fatalf("recording the same owner again: %v", err)
	}
	if err := l.RecordSecretOwner(ctx, "local:sec_x", b, t0); !errors.Is(err, secrets.ErrOwnedElsewhere) {
		t.Fatalf("recording another owner: %v, want ErrOwnedElsewhere", err)
	}
	if got, err := l.SecretOwner(ctx, "local:sec_x"); err != nil || got != a {
		t.Fatalf("owner = %+v, %v; want %+v", got, err, a)
	}
	// Racing writers of one reference: exactly one owner wins, the others are told.
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := secrets.Owner{OrgID: "org_r", Kind: secrets.OwnerJob, ID: string(rune('a' + i))}
			errs[i] = l.RecordSecretOwner(ctx, "local:sec_race", o, t0)
		}()
	}
	wg.Wait()
	wins := 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, secrets.ErrOwnedElsewhere):
			t.Errorf("a losing writer got %v", err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d writers own one reference", wins)
	}
	if err := l.RecordSecretOwner(ctx, "local:sec_y", a, t0); err != nil {
		t.Fatal(err)
	}
	if refs, err := l.SecretsOwnedBy(ctx, a); err != nil || len(refs) != 2 || refs[0] != "local:sec_x" || refs[1] != "local:sec_y" {
		t.Fatalf("secrets of %s = %v, %v", a, refs, err)
	}
	if refs, err := l.SecretsOwnedBy(ctx, secrets.Owner{OrgID: "org_b", Kind: a.Kind, ID: a.ID}); err != nil || len(refs) != 0 {
		t.Fatalf("another org's owner of the same id holds %v, %v", refs, err)
	}
	if err := l.ForgetSecretOwner(ctx, "local:sec_x"); err != nil {
		t.Fatal(err)
	}
	if err := l.ForgetSecretOwner(ctx, "local:sec_x"); err != nil {
		t.Fatalf("forgetting twice: %v", err)
	}
	if _, err := l.SecretOwner(ctx, "local:sec_x"); !errors.Is(err, secrets.ErrNotFound) {
		t.Fatalf("owner after forget: %v", err)
	}
}

// testEndedJobOwners checks that the jobs named as ended with secrets are exactly the cancelled
// and deleted ones that own some: never a live job, never a secret of another kind.
func testEndedJobOwners(t *testing.T, s store.Store) {
	ctx := context.Background()
	l, ok := s.(secrets.Ledger)
	e, ok2 := s.(secrets.EndedJobs)
	if !ok || !ok2 {
		t.Fatalf("store %T does not name ended jobs' secrets", s)
	}
	statuses := []job.Status{job.StatusQueued, job.StatusRunning, job.StatusCompleted, job.StatusFailed,
		job.StatusAwaitingUser, job.StatusCancelled, job.StatusDeleted}
	want := map[string]bool{}
	for i, st := range statuses {
		j := mustCreate(t, s, newJob("org1", "spc1", st, t0))
		o := secrets.JobOwner("org1", j.ID)
		for _, ref := range []string{fmt.Sprintf("local:sec_e%da", i), fmt.Sprintf("local:sec_e%db", i)} {
			if err := l.RecordSecretOwner(ctx, ref, o, t0); err != nil {
				t.Fatal(err)
			}
		}
		if st.Terminal() {
			want[j.ID] = true
		}
	}
	// An account whose id happens to be an ended job's is not a job.
	for id := range want {
		if err := l.RecordSecretOwner(ctx, "local:sec_acc_"+id, secrets.Owner{OrgID: "org1", Kind: secrets.OwnerAccount, ID: id}, t0); err != nil {
			t.Fatal(err)
		}
	}
	got, err := e.OwnersOfEndedJobs(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("ended owners = %+v; want the jobs %v", got, want)
	}
	for _, o := range got {
		if !want[o.ID] || o.OrgID != "org1" || o.Kind != secrets.OwnerJob {
			t.Errorf("named %+v, which is not an ended job", o)
		}
	}
	if one, err := e.OwnersOfEndedJobs(ctx, 1); err != nil || len(one) != 1 {
		t.Fatalf("limit 1 gave %+v, %v", one, err)
	}
	// Once their secrets are forgotten, the ended jobs are named no more.
	for _, o := range got {
		refs, err := l.SecretsOwnedBy(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, ref := range refs {
			if err := l.ForgetSecretOwner(ctx, ref); err != nil {
				t.Fatal(err)
			}
		}
	}
	if rest, err := e.OwnersOfEndedJobs(ctx, 100); err != nil || len(rest) != 0 {
		t.Fatalf("after forgetting: %+v, %v", rest, err)
	}
}
