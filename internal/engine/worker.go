package engine

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/store"
)

// lease tracks one claimed job: its fencing token and whether it is still ours.
type lease struct {
	id    string
	token int64
	ttl   time.Duration

	mu      sync.Mutex
	expires time.Time
	lost    bool
	cancel  context.CancelFunc // interrupts the running step when the lease is lost
}

func (l *lease) markLost() {
	l.mu.Lock()
	l.lost = true
	l.mu.Unlock()
	l.cancel()
}

func (l *lease) isLost() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

func (l *lease) extendTo(t time.Time) {
	l.mu.Lock()
	l.expires = t
	l.mu.Unlock()
}

// work runs j until it finishes, waits, fails, is handed back or its lease is lost.
func (e *Engine) work(j *job.Job) {
	log := e.log.With("job_id", j.ID, "family", string(j.Family))
	ctx, cancel := context.WithCancel(e.hardCtx)
	defer cancel()
	l := &lease{id: j.ID, token: j.LeaseToken, ttl: j.LeaseTTL, cancel: cancel}
	if j.LeaseExpiresAt != nil {
		l.expires = *j.LeaseExpiresAt
	}
	hbDone := make(chan struct{})
	go e.heartbeat(ctx, l, log, hbDone)
	defer func() { cancel(); <-hbDone }()

	p, ok := e.cfg.Pipelines.Get(j.Family)
	if !ok {
		e.fail(ctx, l, j, -1, &job.Failure{Class: job.ClassSystem, Code: "NoPipeline",
			Message: "no pipeline is registered for kind " + string(j.Family)}, log)
		return
	}
	steps := p.Steps(j)
	if len(steps) != len(j.Steps) {
		e.fail(ctx, l, j, -1, &job.Failure{Class: job.ClassSystem, Code: "StepsChanged",
			Message: "the pipeline's steps no longer match the job's records"}, log)
		return
	}
	for {
		if l.isLost() {
			return
		}
		if e.isStopping() {
			e.handBack(l, j, log)
			return
		}
		if j.CancelRequested && j.Phase == job.PhaseApply {
			j.Phase = job.PhaseTeardown
		}
		var next *job.Job
		if j.Phase == job.PhaseApply {
			next = e.applyNext(ctx, l, j, steps, log)
		} else {
			next = e.undoNext(ctx, l, j, steps, log)
		}
		if next == nil {
			return
		}
		j = next
	}
}

// applyNext runs the first step that has not completed and returns the job to continue with,
// or nil when the worker should let go.
func (e *Engine) applyNext(ctx context.Context, l *lease, j *job.Job, steps []pipeline.Step, log *slog.Logger) *job.Job {
	i := -1
	for k := range j.Steps {
		if !j.Steps[k].Status.Completed() {
			i = k
			break
		}
	}
	if i < 0 {
		e.finish(ctx, l, j, job.StatusCompleted, log)
		return nil
	}
	return e.runStep(ctx, l, j, i, steps[i].Do, false, log)
}

// undoNext undoes, in reverse, the last step that did (or may have done) forward work.
func (e *Engine) undoNext(ctx context.Context, l *lease, j *job.Job, steps []pipeline.Step, log *slog.Logger) *job.Job {
	i := -1
	for k := len(j.Steps) - 1; k >= 0; k-- {
		switch j.Steps[k].Status {
		case job.StepDone, job.StepRunning, job.StepWaiting, job.StepFailed, job.StepUndoing:
			i = k
		}
		if i >= 0 {
			break
		}
	}
	if i < 0 {
		final := job.StatusDeleted
		if j.CancelRequested {
			final = job.StatusCancelled
		}
		e.finish(ctx, l, j, final, log)
		return nil
	}
	if steps[i].Undo == nil {
		return e.recordUndone(ctx, l, j, i, "nothing to undo", log)
	}
	return e.runStep(ctx, l, j, i, steps[i].Undo, true, log)
}

// runStep marks step i in flight, runs fn, and checkpoints its result.
func (e *Engine) runStep(ctx context.Context, l *lease, j *job.Job, i int, fn func(context.Context, *pipeline.Run) (pipeline.Result, error), undo bool, log *slog.Logger) *job.Job {
	rec := &j.Steps[i]
	stepLog := log.With("step", rec.Name, "phase", string(j.Phase))
	now := e.cfg.Now()
	if rec.StartedAt == nil || (undo && rec.Status != job.StepUndoing) {
		rec.StartedAt = &now
	}
	rec.Attempts++
	// The previous attempt's error stays on record until this one succeeds: a step may read it
	// (e.g. to resume a remote operation) and users see why it is being retried.
	if undo {
		rec.Status = job.StepUndoing
	} else {
		rec.Status = job.StepRunning
	}
	// The in-flight marker commits before the step runs, so a crash leaves a record that this
	// step may have acted (teardown then undoes it too).
	j, err := e.checkpoint(ctx, l, j, job.StatusRunning, nil, time.Time{}, false)
	if err != nil {
		stepLog.Warn("could not mark step in flight; letting go", "error", err)
		return nil
	}
	rec = &j.Steps[i]
	run := &pipeline.Run{Job: j, Step: rec.Name, Attempt: rec.Attempts, Logger: stepLog}
	stepLog.Info("step started", "attempt", rec.Attempts)
	start := time.Now()
	res, stepErr := fn(ctx, run)
	elapsed := time.Since(start)
	if l.isLost() {
		stepLog.Warn("lease lost during step; writing nothing")
		return nil
	}
	now = e.cfg.Now()
	if stepErr != nil {
		return e.stepFailed(ctx, l, j, i, stepErr, undo, elapsed, stepLog)
	}
	infra, err := pipeline.MergeInfra(j.Infra, res.Infra)
	if err != nil {
		return e.stepFailed(ctx, l, j, i, err, undo, elapsed, stepLog)
	}
	j.Infra = infra
	rec.Message = res.Message
	switch res.Outcome {
	case pipeline.OutcomeWait:
		rec.Status = job.StepWaiting
		if undo {
			rec.Status = job.StepUndoing
		}
		e.cfg.Metrics.observeStep(j.Family, rec.Name, "wait", elapsed)
		stepLog.Info("step waiting", "after", res.After, "message", res.Message)
		e.checkpoint(ctx, l, j, job.StatusQueued, nil, now.Add(res.After), true) //nolint:errcheck // logged inside
		return nil
	case pipeline.OutcomeSkip:
		rec.Status = job.StepSkipped
		if undo {
			rec.Status = job.StepUndone
		}
	default:
		rec.Status = job.StepDone
		if undo {
			rec.Status = job.StepUndone
		}
	}
	rec.FinishedAt = &now
	rec.Error = ""
	e.cfg.Metrics.observeStep(j.Family, rec.Name, string(rec.Status), elapsed)
	stepLog.Info("step finished", "status", string(rec.Status), "duration_ms", elapsed.Milliseconds())
	next, err := e.checkpoint(ctx, l, j, job.StatusRunning, nil, time.Time{}, false)
	if err != nil {
		return nil
	}
	return next
}

func (e *Engine) recordUndone(ctx context.Context, l *lease, j *job.Job, i int, msg string, log *slog.Logger) *job.Job {
	now := e.cfg.Now()
	j.Steps[i].Status = job.StepUndone
	j.Steps[i].Message = msg
	j.Steps[i].FinishedAt = &now
	next, err := e.checkpoint(ctx, l, j, job.StatusRunning, nil, time.Time{}, false)
	if err != nil {
		return nil
	}
	return next
}

// stepFailed applies the error's class: transient is retried with backoff until MaxAttempts,
// then the job fails as retryable; user_action and system fail the job at once.
func (e *Engine) stepFailed(ctx context.Context, l *lease, j *job.Job, i int, stepErr error, undo bool, elapsed time.Duration, log *slog.Logger) *job.Job {
	rec := &j.Steps[i]
	// A step interrupted by our own shutdown did not fail: hand the job back untouched.
	if e.hardCtx.Err() != nil && errors.Is(stepErr, context.Canceled) {
		e.handBack(l, j, log)
		return nil
	}
	fe := fault.As(stepErr)
	e.cfg.Metrics.stepErrors.WithLabelValues(string(j.Family), string(fe.Class)).Inc()
	e.cfg.Metrics.observeStep(j.Family, rec.Name, "error", elapsed)
	rec.Error = stepErr.Error()
	now := e.cfg.Now()
	if fe.Class == job.ClassTransient && rec.Attempts < e.cfg.MaxAttempts {
		d := e.backoff(rec.Attempts)
		log.Warn("step failed, will retry", "class", string(fe.Class), "error", stepErr, "retry_in", d)
		if undo {
			rec.Status = job.StepUndoing
		} else {
			rec.Status = job.StepWaiting
		}
		e.checkpoint(ctx, l, j, job.StatusQueued, nil, now.Add(d), true) //nolint:errcheck // logged inside
		return nil
	}
	log.Error("step failed", "class", string(fe.Class), "error", stepErr)
	e.fail(ctx, l, j, i, &job.Failure{
		Class: fe.Class, Code: fe.Code, Message: stepErr.Error(), FixHint: fe.FixHint, ConsoleURL: fe.ConsoleURL,
		Retryable: fe.Class == job.ClassTransient,
	}, log)
	return nil
}

func (e *Engine) fail(ctx context.Context, l *lease, j *job.Job, i int, f *job.Failure, log *slog.Logger) {
	if i >= 0 {
		now := e.cfg.Now()
		j.Steps[i].Status = job.StepFailed
		j.Steps[i].FinishedAt = &now
		f.Step = j.Steps[i].Name
	}
	e.checkpoint(ctx, l, j, job.StatusFailed, f, time.Time{}, true) //nolint:errcheck // logged inside
}

func (e *Engine) finish(ctx context.Context, l *lease, j *job.Job, status job.Status, log *slog.Logger) {
	if _, err := e.checkpoint(ctx, l, j, status, nil, time.Time{}, true); err == nil {
		log.Info("job finished", "status", string(status))
	}
}

// handBack releases a job we hold without changing its progress, due at once, so that another
// replica (or this one after restart) resumes it.
func (e *Engine) handBack(l *lease, j *job.Job, log *slog.Logger) {
	// The step context may be cancelled by now; the hand-back still deserves a bounded try.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := e.checkpoint(ctx, l, j, job.StatusQueued, j.Failure, e.cfg.Now(), true); err == nil {
		log.Info("job handed back")
	}
}

// checkpoint writes j's progress under the lease. A lost lease stops the worker for good.
func (e *Engine) checkpoint(ctx context.Context, l *lease, j *job.Job, status job.Status, f *job.Failure, next time.Time, release bool) (*job.Job, error) {
	if err := job.CheckTransition(job.StatusRunning, status); err != nil && status != job.StatusRunning {
		return nil, err
	}
	if ctx.Err() != nil {
		// The step context is gone (shutdown or lease loss); a checkpoint still needs a context.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
	}
	if l.isLost() {
		return nil, store.ErrLeaseLost
	}
	if next.IsZero() {
		next = e.cfg.Now()
	}
	out, err := e.cfg.Store.Checkpoint(ctx, &store.CheckpointParams{
		ID: j.ID, LeaseToken: l.token, Now: e.cfg.Now(), Steps: j.Steps, Infra: j.Infra,
		Status: status, Phase: j.Phase, Failure: f, NextRunAt: next, Release: release,
	})
	if errors.Is(err, store.ErrLeaseLost) {
		e.cfg.Metrics.leaseLosses.Inc()
		e.log.Warn("lease lost at checkpoint; another worker owns the job", "job_id", j.ID)
		l.markLost()
		return nil, err
	}
	if err != nil {
		e.log.Error("checkpoint failed", "job_id", j.ID, "error", err)
		return nil, err
	}
	if out.LeaseExpiresAt != nil {
		l.extendTo(*out.LeaseExpiresAt)
	}
	if e.cfg.Events != nil {
		// Subscribers get their own copy: this worker goes on changing out's steps.
		e.cfg.Events.Publish(cloneJob(out))
	}
	return out, nil
}

// heartbeat renews the lease at a third of its TTL. If renewal keeps failing until the lease
// would expire, the worker stops: past that point another replica may own the job.
func (e *Engine) heartbeat(ctx context.Context, l *lease, log *slog.Logger, done chan<- struct{}) {
	defer close(done)
	every := l.ttl / 3
	if every <= 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		exp, err := e.cfg.Store.RenewLease(ctx, &store.RenewLeaseParams{ID: l.id, LeaseToken: l.token, Now: e.cfg.Now()})
		switch {
		case err == nil:
			l.extendTo(exp)
		case errors.Is(err, store.ErrLeaseLost):
			e.cfg.Metrics.leaseLosses.Inc()
			log.Warn("lease lost at heartbeat; interrupting the step")
			l.markLost()
			return
		case ctx.Err() != nil:
			return
		default:
			l.mu.Lock()
			expired := !e.cfg.Now().Before(l.expires)
			l.mu.Unlock()
			log.Warn("lease renewal failed", "error", err, "expired", expired)
			if expired {
				l.markLost()
				return
			}
		}
	}
}

// cloneJob copies the parts of j the worker mutates, so a published job never changes under
// its reader.
func cloneJob(j *job.Job) *job.Job {
	c := *j
	c.Steps = append([]job.StepRecord(nil), j.Steps...)
	c.Infra = append([]byte(nil), j.Infra...)
	c.Config = append([]byte(nil), j.Config...)
	if j.Failure != nil {
		f := *j.Failure
		c.Failure = &f
	}
	return &c
}
