package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/store"
)

// testInspections checks the drift ledger: an inspection reads back within its org only and
// is replaced by the next; of racing claims for one interval exactly one wins, and the next
// interval is claimable once due; drift counts cover completed jobs only.
func testInspections(t *testing.T, s store.Store) {
	ctx := context.Background()
	ins, ok := s.(store.Inspections)
	if !ok {
		t.Fatalf("store %T keeps no inspections", s)
	}
	j := mustCreate(t, s, newJob("org_i", "spc_i", job.StatusCompleted, t0))
	if _, err := ins.GetInspection(ctx, "org_i", j.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("never inspected: %v, want ErrNotFound", err)
	}

	// Racing replicas claim the first interval: one wins.
	next := t0.Add(10 * time.Minute)
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := ins.ClaimInspection(ctx, "org_i", j.ID, t0, next)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				won++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d claims won the first interval, want 1", won)
	}
	// A claim row alone is no inspection.
	if _, err := ins.GetInspection(ctx, "org_i", j.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("claimed, not inspected: %v, want ErrNotFound", err)
	}
	if ok, err := ins.ClaimInspection(ctx, "org_i", j.ID, next.Add(-time.Second), next.Add(10*time.Minute)); err != nil || ok {
		t.Fatalf("claim before due = %v, %v; want false", ok, err)
	}
	if ok, err := ins.ClaimInspection(ctx, "org_other", j.ID, next, next.Add(10*time.Minute)); err != nil || ok {
		t.Fatalf("another org's claim = %v, %v; want false", ok, err)
	}
	if ok, err := ins.ClaimInspection(ctx, "org_i", j.ID, next, next.Add(10*time.Minute)); err != nil || !ok {
		t.Fatalf("claim when due = %v, %v; want true", ok, err)
	}

	d := job.Drift{Resource: job.ResourceRef{Type: "security-group", ID: "sg-1"}, Field: "ingress",
		Applied: []any{"tcp 80 0.0.0.0/0"}, Actual: []any{"tcp 22 0.0.0.0/0", "tcp 80 0.0.0.0/0"}, Step: "create_launch_template"}
	if err := ins.RecordInspection(ctx, &job.Inspection{JobID: j.ID, OrgID: "org_i", SpaceID: "spc_i", InspectedAt: t0, Drift: []job.Drift{d, d}}); err != nil {
		t.Fatal(err)
	}
	got, err := ins.GetInspection(ctx, "org_i", j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.InspectedAt.Equal(t0) || len(got.Drift) != 2 || got.Drift[0].Resource.ID != "sg-1" || got.Drift[0].Field != "ingress" ||
		got.Drift[0].Step != "create_launch_template" || len(got.Drift[0].Actual.([]any)) != 2 {
		t.Fatalf("read back %+v", got)
	}
	if _, err := ins.GetInspection(ctx, "org_other", j.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another org reads the inspection: %v", err)
	}
	// Another org writing for the same id changes nothing.
	if err := ins.RecordInspection(ctx, &job.Inspection{JobID: j.ID, OrgID: "org_other", InspectedAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	counts, err := ins.DriftCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != 1 || counts[0] != (store.DriftCount{OrgID: "org_i", SpaceID: "spc_i", Fields: 2}) {
		t.Fatalf("drift counts = %+v", counts)
	}
	// The next inspection replaces the last; a clean one counts nothing.
	if err := ins.RecordInspection(ctx, &job.Inspection{JobID: j.ID, OrgID: "org_i", SpaceID: "spc_i", InspectedAt: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if got, err = ins.GetInspection(ctx, "org_i", j.ID); err != nil || len(got.Drift) != 0 || !got.InspectedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after a clean inspection: %+v, %v", got, err)
	}
	if counts, err = ins.DriftCounts(ctx); err != nil || len(counts) != 1 || counts[0].Fields != 0 {
		t.Fatalf("drift counts after a clean inspection = %+v, %v", counts, err)
	}
}
