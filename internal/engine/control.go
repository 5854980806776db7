package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/store"
)

// Ledger is what Retry and Cancel need: they change a job the engine may be running, so they
// go through versioned updates that never touch the lease.
type Ledger interface {
	GetJob(ctx context.Context, p *store.GetJobParams) (*job.Job, error)
	UpdateJob(ctx context.Context, p *store.UpdateJobParams) (*job.Job, error)
}

// Retry queues a failed job again. It resumes at the failed step (in teardown, it resumes
// undoing); finished steps are not re-run, and the failed step gets a fresh retry budget.
func Retry(ctx context.Context, l Ledger, j *job.Job, now time.Time) (*job.Job, error) {
	if err := job.CheckTransition(j.Status, job.StatusQueued); err != nil || j.Status != job.StatusFailed {
		return nil, &job.TransitionError{From: j.Status, To: job.StatusQueued}
	}
	steps := append([]job.StepRecord(nil), j.Steps...)
	for i := range steps {
		if steps[i].Status == job.StepFailed {
			steps[i].Attempts, steps[i].Retries, steps[i].Waits = 0, 0, 0
			if j.Phase == job.PhaseApply {
				steps[i].Status = job.StepPending
			}
		}
	}
	queued := job.StatusQueued
	return l.UpdateJob(ctx, &store.UpdateJobParams{OrgID: j.OrgID, ID: j.ID, Version: j.Version, Now: now,
		Status: &queued, Steps: steps, ClearFailure: true, NextRunAt: &now})
}

// Cancel stops a job that has not completed and tears down one that has. A job with nothing
// done ends cancelled at once; otherwise the engine undoes, in reverse, the steps already done
// (a running job switches at its next step boundary). Calling it again is harmless.
func Cancel(ctx context.Context, l Ledger, j *job.Job, now time.Time) (*job.Job, error) {
	for attempt := 0; ; attempt++ {
		out, err := cancelOnce(ctx, l, j, now)
		if !errors.Is(err, store.ErrVersionConflict) || attempt == 4 {
			return out, err
		}
		// The engine checkpointed in between; decide again on what it wrote.
		if j, err = l.GetJob(ctx, &store.GetJobParams{OrgID: j.OrgID, ID: j.ID}); err != nil {
			return nil, err
		}
	}
}

func cancelOnce(ctx context.Context, l Ledger, j *job.Job, now time.Time) (*job.Job, error) {
	p := &store.UpdateJobParams{OrgID: j.OrgID, ID: j.ID, Version: j.Version, Now: now}
	set := func(s job.Status) { p.Status = &s }
	yes := true
	teardown := job.PhaseTeardown
	switch {
	case j.Status.Terminal(), j.Phase == job.PhaseTeardown && j.Status != job.StatusFailed:
		return j, nil
	case j.Status == job.StatusCompleted:
		set(job.StatusQueued)
		p.Phase, p.NextRunAt = &teardown, &now
	case j.Status == job.StatusRunning:
		p.CancelRequested = &yes
	case !j.AnyStepCompleted():
		set(job.StatusCancelled)
	default:
		p.CancelRequested, p.Phase, p.NextRunAt = &yes, &teardown, &now
		if j.Status != job.StatusQueued {
			set(job.StatusQueued)
		}
		p.ClearFailure = true
	}
	if p.Status != nil {
		if err := job.CheckTransition(j.Status, *p.Status); err != nil {
			return nil, fmt.Errorf("cancel: %w", err)
		}
	}
	return l.UpdateJob(ctx, p)
}
