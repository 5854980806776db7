package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/engine"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
	"github.com/groundworkhq/groundwork/internal/store"
)

// A step that needs a person's decision parks its job in awaiting_user with the lease let go:
// the only worker is free for other jobs, the engine never claims the parked job on its own,
// and once the job is queued again it resumes at that step and completes.
func TestAwaitUserParksWithoutAWorker(t *testing.T) {
	t.Parallel()
	var decided atomic.Bool
	b := setup(t, 2, func(ctx context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error) {
		if c.Step == "step1" && !decided.Load() {
			return pipeline.AwaitUser("needs approval", map[string]any{"gate": "g-1"}), nil
		}
		return pipeline.Done(nil), nil
	})
	b.start(t, func(c *engine.Config) { c.Workers = 1; c.PollInterval = 20 * time.Millisecond })
	parked := b.submit(t)
	j := b.waitStatus(t, parked.ID, job.StatusAwaitingUser)
	if j.LeaseOwner != "" || j.LeaseExpiresAt != nil || j.Steps[0].Status != job.StepWaiting || j.Steps[1].Status != job.StepPending {
		t.Fatalf("parked job: owner %q lease %v steps %+v", j.LeaseOwner, j.LeaseExpiresAt, j.Steps)
	}
	var gate string
	if ok, _ := (&pipeline.Run{Job: j}).Infra("gate", &gate); !ok || gate != "g-1" {
		t.Fatalf("infra of the parking step was not kept: %s", j.Infra)
	}
	// The one worker is free: another job runs to the end while the first stays parked.
	decided.Store(true)
	other := b.submit(t)
	b.waitStatus(t, other.ID, job.StatusCompleted)
	if got := b.get(t, parked.ID); got.Status != job.StatusAwaitingUser || b.calls.count(parked.ID, "step1", false) != 1 {
		t.Fatalf("the parked job was taken up without a decision: %s, step1 ran %d times", got.Status, b.calls.count(parked.ID, "step1", false))
	}
	now := time.Now()
	queued := job.StatusQueued
	if _, err := b.store.UpdateJob(context.Background(), &store.UpdateJobParams{OrgID: j.OrgID, ID: j.ID, Version: j.Version, Now: now,
		Status: &queued, NextRunAt: &now}); err != nil {
		t.Fatal(err)
	}
	b.waitStatus(t, parked.ID, job.StatusCompleted)
	if n := b.calls.count(parked.ID, "step1", false); n != 2 {
		t.Errorf("step1 ran %d times, want 2 (parked, then decided)", n)
	}
}
