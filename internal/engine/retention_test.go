package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/engine"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/store"
)

// With a retention set, a job that is over leaves the ledger once older than it; a completed
// job, whose infrastructure exists, stays however old.
func TestRetentionPrunesOnlyJobsThatAreOver(t *testing.T) {
	t.Parallel()
	b := setup(t, 1, nil)
	cancelled := b.submit(t)
	if _, err := engine.Cancel(context.Background(), b.store, cancelled, time.Now()); err != nil {
		t.Fatal(err)
	}
	completed := b.submit(t)
	b.start(t, func(c *engine.Config) { c.Retention, c.PruneEvery = time.Millisecond, 20*time.Millisecond })
	b.waitStatus(t, completed.ID, job.StatusCompleted)
	waitFor(t, "the cancelled job to be pruned", 20*time.Second, func() bool {
		_, err := b.store.GetJob(context.Background(), &store.GetJobParams{ID: cancelled.ID})
		return errors.Is(err, store.ErrNotFound)
	})
	// The completed job was over a millisecond old at that prune too: it is still there.
	if got := b.get(t, completed.ID); got.Status != job.StatusCompleted {
		t.Fatalf("completed job: %+v", got)
	}
}
