package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/remediation"
	"github.com/groundworkhq/groundwork/internal/store"
)

// testRemediationTimeline checks the workflow timeline: events read back in the order written,
// one per (job, step, event type) even when writers race, none across orgs; and delivery
// records that add up attempts and say whether a notification got through.
func testRemediationTimeline(t *testing.T, s store.Store) {
	ctx := context.Background()
	tl, ok := s.(remediation.Timeline)
	if !ok {
		t.Fatalf("store %T keeps no remediation timeline", s)
	}
	ev := func(step, typ string, at time.Time) remediation.Event {
		return remediation.Event{OrgID: "org_a", JobID: "job_r", StepID: "stp_" + step, StepName: step, EventType: typ,
			Actor: "system", CreatedAt: at}
	}
	for i, e := range []remediation.Event{ev("precondition", "completed", t0), ev("approval", "created", t0),
		ev("approval", "approved", t0.Add(-time.Hour))} {
		if added, err := tl.AppendEvent(ctx, e); err != nil || !added {
			t.Fatalf("event %d: added=%v %v", i, added, err)
		}
	}
	// Racing writers of one event (a step re-run beside a slow first run): one row.
	var wg sync.WaitGroup
	var mu sync.Mutex
	added := 0
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := tl.AppendEvent(ctx, ev("execute", "completed", t0))
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				added++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if added != 1 {
		t.Errorf("racing writers added %d events, want 1", added)
	}
	got, err := tl.ListEvents(ctx, "org_a", "job_r")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"precondition/completed", "approval/created", "approval/approved", "execute/completed"}
	if len(got) != len(want) {
		t.Fatalf("timeline: %+v", got)
	}
	for i, w := range want {
		if got[i].StepName+"/"+got[i].EventType != w {
			t.Errorf("event %d: %s/%s, want %s (written order, not time order)", i, got[i].StepName, got[i].EventType, w)
		}
	}
	if other, err := tl.ListEvents(ctx, "org_b", "job_r"); err != nil || len(other) != 0 {
		t.Errorf("another org sees %d events (%v)", len(other), err)
	}

	d := remediation.Delivery{OrgID: "org_a", JobID: "job_r", StepID: "stp_approval", Kind: remediation.NotifyApprovalRequired,
		Channel: "webhook", Status: "failed", Attempts: 4, LastError: "503", UpdatedAt: t0}
	if err := tl.RecordDelivery(ctx, d); err != nil {
		t.Fatal(err)
	}
	if ok, err := tl.Delivered(ctx, d.JobID, d.StepID, d.Kind, d.Channel); err != nil || ok {
		t.Fatalf("a failed delivery counts as delivered: %v %v", ok, err)
	}
	d.Status, d.Attempts, d.LastError, d.UpdatedAt = "delivered", 1, "", t0.Add(time.Minute)
	if err := tl.RecordDelivery(ctx, d); err != nil {
		t.Fatal(err)
	}
	if ok, err := tl.Delivered(ctx, d.JobID, d.StepID, d.Kind, d.Channel); err != nil || !ok {
		t.Fatalf("delivered: %v %v", ok, err)
	}
	ds, err := tl.ListDeliveries(ctx, "org_a", "job_r")
	if err != nil || len(ds) != 1 || ds[0].Attempts != 5 || ds[0].Status != "delivered" || ds[0].LastError != "" {
		t.Fatalf("deliveries: %+v %v", ds, err)
	}
	if other, err := tl.ListDeliveries(ctx, "org_b", "job_r"); err != nil || len(other) != 0 {
		t.Errorf("another org sees %d deliveries (%v)", len(other), err)
	}
}
