package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/telemetry"
)

// lease tracks one claimed job: its fencing token and how long it may still act on it.
//
// The worker times its lease on its own monotonic clock, from the moment it sent the request
// that granted or extended it, for as long as the lease had left by the database's clock (the
// clock claimers compare against). It treats the lease as lost a margin before that: the
// margin covers the time a driver call takes to reach the cloud once started, and a pause
// between the check and the call. Past the deadline the step's context is cancelled and no
// new step starts; only a renewal that lands before the deadline moves it.
type lease struct {
	id     string
	token  int64
	ttl    time.Duration
	margin time.Duration
	// expired is told when the deadline passes without a renewal (metrics, log).
	expired func()

	mu       sync.Mutex
	deadline time.Time     // local clock, with its monotonic reading
	skew     time.Duration // the database's clock minus ours, as last measured
	lost     bool
	timer    *time.Timer
	cancel   context.CancelFunc // interrupts the running step when the lease is lost
	// free gives the worker's slot back to the engine once no step of this job will run again.
	free func()
	// mark is the step the claim stands as in-flight marker for until the worker's first
	// step (claimMarks), -1 for none. Only the worker's goroutine reads it.
	mark int
}

// leaseMargin is how long before expiry a worker lets go of a lease of the given TTL.
func (e *Engine) leaseMargin(ttl time.Duration) time.Duration {
	m := e.cfg.LeaseMargin
	if m <= 0 {
		m = ttl / 4
	}
	// Heartbeats come every third of the TTL: a margin above half of it would leave a single
	// late heartbeat no room to land.
	if m > ttl/2 {
		m = ttl / 2
	}
	return m
}

// extended records a lease write the store accepted: sent is when the request left (local
// clock), now the caller-clock time it carried, exp the expiry the store wrote (in the
// caller's clock), dbNow the database's clock in that statement if the store reported it.
// Extensions never move the deadline back: the store never shortens a lease either.
func (l *lease) extended(sent, now, exp, dbNow time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost {
		return
	}
	if !dbNow.IsZero() {
		l.skew = dbNow.Sub(now)
	}
	// exp was computed from now; by the database's clock the lease has that much less (or,
	// for a replica whose clock runs fast, more; it never counts on more than the TTL).
	left := min(exp.Sub(now)-l.skew, l.ttl)
	if d := sent.Add(left - l.margin); d.After(l.deadline) {
		l.deadline = d
	}
	wait := time.Until(l.deadline)
	if l.timer == nil {
		l.timer = time.AfterFunc(wait, l.expire)
	} else {
		l.timer.Reset(wait)
	}
}

// expire marks the lease lost if its deadline has passed (the timer may race an extension).
func (l *lease) expire() {
	l.mu.Lock()
	if l.lost {
		l.mu.Unlock()
		return
	}
	if wait := time.Until(l.deadline); wait > 0 {
		l.timer.Reset(wait)
		l.mu.Unlock()
		return
	}
	l.lost = true
	l.mu.Unlock()
	l.expired()
	l.cancel()
}

func (l *lease) markLost() {
	l.mu.Lock()
	l.lost = true
	l.mu.Unlock()
	l.cancel()
}

// isLost reports whether the worker must stop acting on the job. It reads the deadline itself
// rather than waiting for the timer, so nothing starts in the instant between the two.
func (l *lease) isLost() bool {
	l.mu.Lock()
	lost, past := l.lost, !time.Now().Before(l.deadline)
	l.mu.Unlock()
	if !lost && past {
		l.expire()
		return true
	}
	return lost
}

func (l *lease) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer != nil {
		l.timer.Stop()
	}
}

// remaining is the time left before the worker lets go, for logs.
func (l *lease) remaining() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Until(l.deadline)
}

// stepCtx is the context a step runs under. It is cancelled when the lease is lost; its Err
// also reads the lease's deadline, so a driver that checks ctx.Err() before each call (as
// cloud SDKs do) refuses from the first instant past the deadline, not only once the timer
// has fired. Done is closed before Err returns an error, as the Context contract asks.
type stepCtx struct {
	context.Context
	l *lease
}

func (c stepCtx) Err() error {
	c.l.isLost()
	return c.Context.Err()
}

// claimMarks reads what the claim that leased j says of its steps, and returns the step the
// claim is the in-flight marker of, or -1.
//
// A claim is a committed write that leaves the job running under a new lease, and in the
// apply phase the step its holder runs first is the first unfinished one. So the claim itself
// marks that step in flight, and the worker writes no marker of its own before running it:
// should it crash, the next claim finds the job still running with its lease expired
// (TakenOver) and learns from that, as from a written marker, that the step may have acted.
// Such a step is marked running here, in memory (the next write records it, and teardown
// undoes it), with the attempt the crash cut off counted. A job handed over with a cancel
// requested runs no step, so its claim marks none.
func (e *Engine) claimMarks(j *job.Job) int {
	if j.Phase != job.PhaseApply {
		return -1
	}
	i := nextToApply(j)
	if i < 0 || j.Steps[i].Status != job.StepPending || j.CancelRequested && !j.TakenOver {
		return -1
	}
	if j.TakenOver {
		rec := &j.Steps[i]
		rec.Status = job.StepRunning
		rec.Attempts++
		if rec.StartedAt == nil {
			at := j.UpdatedAt
			rec.StartedAt = &at
		}
	}
	return i
}

// work runs c's job until it finishes, waits, fails, is handed back or its lease is lost.
func (e *Engine) work(c claimed, free func()) {
	j, sent, now := c.j, c.sent, c.now
	log := e.log.With("job_id", j.ID, "family", string(j.Family))
	wctx, cancel := context.WithCancel(e.hardCtx)
	defer cancel()
	l := &lease{id: j.ID, token: j.LeaseToken, ttl: j.LeaseTTL, margin: e.leaseMargin(j.LeaseTTL), cancel: cancel, free: free, mark: c.mark}
	l.expired = func() {
		e.cfg.Metrics.leaseLosses.Inc()
		log.Warn("lease about to expire without a renewal; stopping work on the job", "margin", l.margin)
	}
	defer l.stop()
	if j.LeaseExpiresAt == nil {
		log.Error("claimed job has no lease expiry; letting go")
		return
	}
	l.extended(sent, now, *j.LeaseExpiresAt, j.DBNow)
	if l.isLost() {
		log.Warn("the lease was too short to use by the database's clock; this replica's clock may lag the database's",
			"lease_left", j.LeaseExpiresAt.Sub(j.DBNow), "skew", j.DBNow.Sub(now))
		return
	}
	stopBeat := e.heartbeat(wctx, l, log)
	defer func() { cancel(); stopBeat() }()
	ctx := stepCtx{Context: wctx, l: l}
	// Whatever the pipeline or the engine does wrong for this job stays with this job: it
	// fails as system with the stack in the log; the process and its other jobs go on. j is
	// read when the deferred call runs, so the latest copy is what gets failed.
	defer func() {
		if r := recover(); r != nil {
			e.jobPanicked(l, j, r, log)
		}
	}()

	p, ok := e.cfg.Pipelines.Get(j.Family)
	if !ok {
		e.fail(ctx, l, j, -1, &job.Failure{Class: job.ClassSystem, Code: "NoPipeline",
			Message: "no pipeline is registered for kind " + string(j.Family)}, log)
		return
	}
	steps := p.Steps(j)
	// Step records are matched to the pipeline's steps by position; a record under another
	// name means this build laid the job out differently from the one that stored it, and
	// running position i would run some other step's work against its record.
	if changed := stepsChanged(steps, j.Steps); changed != "" {
		e.fail(ctx, l, j, -1, &job.Failure{Class: job.ClassSystem, Code: "StepsChanged",
			Message: "the pipeline's steps no longer match the job's records: " + changed}, log)
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

// stepsChanged describes the first difference between the pipeline's steps and the job's
// records, or returns "" when they match.
func stepsChanged(steps []pipeline.Step, records []job.StepRecord) string {
	if len(steps) != len(records) {
		return fmt.Sprintf("%d steps, %d records", len(steps), len(records))
	}
	for i := range steps {
		if steps[i].Name != records[i].Name {
			return fmt.Sprintf("step %d is %q, its record %q", i+1, steps[i].Name, records[i].Name)
		}
	}
	return ""
}

// applyNext runs the first step that has not completed and returns the job to continue with,
// or nil when the worker should let go.
func (e *Engine) applyNext(ctx context.Context, l *lease, j *job.Job, steps []pipeline.Step, log *slog.Logger) *job.Job {
	i := nextToApply(j)
	if i < 0 {
		e.finish(ctx, l, j, job.StatusCompleted, log)
		return nil
	}
	return e.runStep(ctx, l, j, i, steps[i].Do, false, log)
}

// undoNext undoes, in reverse, the last step that did (or may have done) forward work.
func (e *Engine) undoNext(ctx context.Context, l *lease, j *job.Job, steps []pipeline.Step, log *slog.Logger) *job.Job {
	i := nextToUndo(j)
	if i < 0 {
		final := job.StatusDeleted
		if j.CancelRequested {
			final = job.StatusCancelled
		}
		e.finish(ctx, l, j, final, log)
		return nil
	}
	if steps[i].Undo == nil {
		return e.recordUndone(ctx, l, j, i, "nothing to undo")
	}
	return e.runStep(ctx, l, j, i, steps[i].Undo, true, log)
}

// nextToApply returns the first step whose forward work is not finished, or -1.
func nextToApply(j *job.Job) int {
	for k := range j.Steps {
		if !j.Steps[k].Status.Completed() {
			return k
		}
	}
	return -1
}

// nextToUndo returns the last step that did (or may have done) forward work, or -1.
func nextToUndo(j *job.Job) int {
	for k := len(j.Steps) - 1; k >= 0; k-- {
		switch j.Steps[k].Status {
		case job.StepDone, job.StepRunning, job.StepWaiting, job.StepFailed, job.StepUndoing:
			return k
		}
	}
	return -1
}

// settled returns j with a finished step's result either left in memory, to ride on the next
// step's in-flight marker, or, when no step follows in this phase, written as a version of its
// own, so that subscribers see the last step finish before the job ends. Where the store can,
// that version and the job's end commit in one transaction (finishWithLast); otherwise the end
// is the next write.
func (e *Engine) settled(ctx context.Context, l *lease, j *job.Job) *job.Job {
	more := nextToApply(j) >= 0
	if j.Phase == job.PhaseTeardown {
		more = nextToUndo(j) >= 0
	}
	if more {
		return j
	}
	if f, ok := e.cfg.Store.(store.Finisher); ok && !j.CancelRequested && !e.isStopping() {
		// The last result and the job's end go in one transaction, as two writes that
		// subscribers are told of in turn; the end lands only if no cancel was requested
		// meanwhile, and otherwise the job goes on from the result, as below.
		return e.finishWithLast(ctx, l, j, f)
	}
	next, err := e.checkpoint(ctx, l, j, job.StatusRunning, nil, time.Time{}, false)
	if err != nil {
		return nil
	}
	return next
}

// finishWithLast writes j's last step result and then its end (see settled). It returns the
// job to go on with when a cancel stopped the end, nil when the worker is done with it.
func (e *Engine) finishWithLast(ctx context.Context, l *lease, j *job.Job, f store.Finisher) *job.Job {
	final := job.StatusCompleted
	if j.Phase == job.PhaseTeardown {
		final = job.StatusDeleted
	}
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
	}
	if l.isLost() {
		return nil
	}
	now, sent := e.cfg.Now(), time.Now()
	first := &store.CheckpointParams{ID: j.ID, LeaseToken: l.token, Now: now, Steps: j.Steps, Infra: j.Infra,
		Status: job.StatusRunning, Phase: j.Phase, NextRunAt: now}
	end := *first
	end.Status, end.Release = final, true
	if l.free != nil {
		// This write lets go of the job (but for a cancel, below): its slot is free while
		// the write waits for its group commit.
		l.free()
	}
	written, ended, err := f.CheckpointThenEnd(ctx, first, &end)
	if errors.Is(err, store.ErrLeaseLost) {
		e.cfg.Metrics.leaseLosses.Inc()
		e.log.Warn("lease lost at checkpoint; another worker owns the job", "job_id", j.ID)
		l.markLost()
		return nil
	}
	if err != nil {
		e.log.Error("checkpoint failed", "job_id", j.ID, "error", err)
		return nil
	}
	if ended == nil {
		// A cancel was requested while the last step ran. The job goes on to its teardown,
		// but not in this worker, whose slot is already given back: it is handed back, due
		// at once, for a worker to take up.
		e.publish(written)
		if written.LeaseExpiresAt != nil {
			l.extended(sent, now, *written.LeaseExpiresAt, written.DBNow)
		}
		e.handBack(l, written, e.log.With("job_id", j.ID))
		return nil
	}
	// The store's answers are copies of their own that this worker no longer changes.
	e.publishOwned(written)
	e.publishOwned(ended)
	e.log.Info("job finished", "job_id", j.ID, "status", string(final))
	return nil
}

// runStep marks step i in flight, runs fn, and checkpoints its result.
func (e *Engine) runStep(ctx context.Context, l *lease, j *job.Job, i int, fn func(context.Context, *pipeline.Run) (pipeline.Result, error), undo bool, log *slog.Logger) *job.Job {
	rec := &j.Steps[i]
	stepLog := log.With("step", rec.Name, "phase", string(j.Phase))
	prev := *rec
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
	// step may have acted (teardown then undoes it too). The same write carries the previous
	// step's result, which the worker held in memory until now: one write per step, not two.
	// Two cases need no marker of their own. The first step after a claim has the claim as its
	// marker (claimMarks). And a poll of a step that is already waiting (or undoing): the
	// committed record already says the step may have acted, the claim that handed the job
	// over wrote nothing else since, and its lease is fresh. Either costs one write, the
	// step's result; only its attempt count is not on record until then.
	byClaim := !undo && l.mark == i
	l.mark = -1
	switch {
	case byClaim:
		e.publish(j) // subscribers see the step start, as the claim committed it
	case prev.Status == job.StepWaiting && !undo, prev.Status == job.StepUndoing && undo:
	default:
		var err error
		j, err = e.checkpoint(ctx, l, j, job.StatusRunning, nil, time.Time{}, false)
		if err != nil {
			stepLog.Warn("could not mark step in flight; letting go", "error", err)
			return nil
		}
		rec = &j.Steps[i]
	}
	if l.isLost() {
		return nil // the deadline passed while the marker was written: do not start the step
	}
	if !undo && j.CancelRequested {
		// A cancel arrived while the previous step ran: this one does not start. Its marker is
		// taken back here and the next write (teardown's first) records that; until then the
		// record says it may have acted, which after a crash costs an Undo that finds nothing.
		j.Steps[i] = prev
		return j
	}
	// The step's span joins the job's trace; cloud calls made with stepCtx nest under it.
	stepCtx, span := e.tracer.Start(telemetry.JobContext(ctx, j.ID), rec.Name, trace.WithAttributes(
		attribute.String("groundwork.job.id", j.ID), attribute.String("groundwork.job.family", string(j.Family)),
		attribute.String("groundwork.job.phase", string(j.Phase)), attribute.Int("groundwork.step.attempt", rec.Attempts),
		attribute.Bool("groundwork.step.undo", undo)))
	stepLog = stepLog.With(telemetry.LogAttrs(span)...)
	run := &pipeline.Run{Job: j, Step: rec.Name, Attempt: rec.Attempts, Logger: stepLog}
	stepLog.Info("step started", "attempt", rec.Attempts)
	start := time.Now()
	res, stepErr := callStep(stepCtx, fn, run, stepLog)
	elapsed := time.Since(start)
	if stepErr != nil {
		span.RecordError(stepErr)
		span.SetStatus(codes.Error, stepErr.Error())
	} else {
		span.SetAttributes(attribute.String("groundwork.step.outcome", outcomeName(res.Outcome)))
	}
	span.End()
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
	// The step made progress (a wait is a poll that answered): its next transient failure
	// starts the retry budget and the backoff afresh.
	rec.Retries = 0
	if res.Outcome != pipeline.OutcomeWait {
		rec.Waits = 0
	}
	switch res.Outcome {
	case pipeline.OutcomeWait:
		rec.Status = job.StepWaiting
		if undo {
			rec.Status = job.StepUndoing
		}
		rec.Waits++
		after := res.Backoff.Delay(res.After, rec.Waits)
		e.cfg.Metrics.observeStep(j.Family, rec.Name, "wait", elapsed)
		stepLog.Info("step waiting", "after", after, "waits", rec.Waits, "message", res.Message)
		e.checkpoint(ctx, l, j, job.StatusQueued, nil, now.Add(after), true) //nolint:errcheck // logged inside
		return nil
	case pipeline.OutcomeAwaitUser:
		// Parked without a worker: only a decision through the API queues the job again.
		rec.Status = job.StepWaiting
		e.cfg.Metrics.observeStep(j.Family, rec.Name, "await_user", elapsed)
		stepLog.Info("step awaiting a decision", "message", res.Message)
		e.checkpoint(ctx, l, j, job.StatusAwaitingUser, nil, now, true) //nolint:errcheck // logged inside
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
	// Usually not written yet: the next step's marker (or a hand-back) writes it in the same
	// statement. If the lease is lost first, nothing is written, as a lost lease would have
	// refused this write too: the next owner runs the step again, which steps survive.
	return e.settled(ctx, l, j)
}

func (e *Engine) recordUndone(ctx context.Context, l *lease, j *job.Job, i int, msg string) *job.Job {
	now := e.cfg.Now()
	j.Steps[i].Status = job.StepUndone
	j.Steps[i].Message = msg
	j.Steps[i].FinishedAt = &now
	return e.settled(ctx, l, j)
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
	// The budget counts transient failures in a row, not executions: polls of a resource that
	// is still coming up (waits) are not failures and do not use it up.
	rec.Retries++
	if fe.Class == job.ClassTransient && rec.Retries < e.cfg.MaxAttempts {
		d := e.backoff(rec.Retries)
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
	now, sent := e.cfg.Now(), time.Now()
	if next.IsZero() {
		next = now
	}
	if release && l.free != nil {
		l.free() // this write lets go of the job: no step of it runs here again
	}
	out, err := e.cfg.Store.Checkpoint(ctx, &store.CheckpointParams{
		ID: j.ID, LeaseToken: l.token, Now: now, Steps: j.Steps, Infra: j.Infra,
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
	if out.LeaseExpiresAt != nil && !release {
		l.extended(sent, now, *out.LeaseExpiresAt, out.DBNow)
	}
	if release && status == job.StatusQueued && next.After(now) {
		e.due.add(next)
	}
	e.publish(out)
	return out, nil
}

// publish tells the subscribers of a committed change. A subscriber that panics loses that
// event; the job, already committed, goes on.
func (e *Engine) publish(j *job.Job) {
	if e.cfg.Events == nil {
		return
	}
	// Subscribers get their own copy: this worker goes on changing j's steps.
	e.publishOwned(cloneJob(j))
}

// publishOwned tells subscribers of j, which no one changes any more.
func (e *Engine) publishOwned(j *job.Job) {
	if e.cfg.Events == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			e.log.Error("event subscriber panicked", "job_id", j.ID, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		}
	}()
	e.cfg.Events.Publish(j)
}

// errStepPanicked is what a panicking step becomes. Its text is what users see; the panic
// value and the stack go to the log only, since they may hold anything the step had in hand.
var errStepPanicked = fault.System(errors.New("the step failed on an internal error; the server log has the details under this job's id")).(*fault.Error).WithCode("InternalError")

// callStep runs one step, turning a panic into a system failure of that step.
func callStep(ctx context.Context, fn func(context.Context, *pipeline.Run) (pipeline.Result, error), run *pipeline.Run, log *slog.Logger) (res pipeline.Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			log.Error("step panicked", "attempt", run.Attempt, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			res, err = pipeline.Result{}, errStepPanicked
		}
	}()
	return fn(ctx, run)
}

// jobPanicked fails j as system after a panic outside a step (in the pipeline's set-up, the
// engine's own bookkeeping): the step in flight, if any, is marked failed. If the lease is
// gone, it writes nothing; another worker takes the job up.
func (e *Engine) jobPanicked(l *lease, j *job.Job, r any, log *slog.Logger) {
	log.Error("panic while working on the job; failing it", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
	defer func() {
		if r2 := recover(); r2 != nil {
			log.Error("panic while failing the job after a panic; letting go", "panic", fmt.Sprint(r2), "stack", string(debug.Stack()))
		}
	}()
	if l.isLost() || j == nil {
		return
	}
	i := -1
	for k := range j.Steps {
		if st := j.Steps[k].Status; st == job.StepRunning || st == job.StepUndoing {
			i = k
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e.fail(ctx, l, j, i, &job.Failure{Class: job.ClassSystem, Code: "InternalError",
		Message: "work on the job stopped on an internal error; the server log has the details under this job's id"}, log)
}

// heartbeat renews the lease every third of its TTL, from a timer rather than a goroutine of
// its own: most jobs end before their first renewal, and a goroutine and a ticker per job were
// a tenth of the engine's CPU for short steps. It does not decide when the lease is lost: the
// lease's own deadline does, so a renewal that hangs cannot keep the step going. stop waits
// for a renewal in flight; cancel ctx first to cut it short.
func (e *Engine) heartbeat(ctx context.Context, l *lease, log *slog.Logger) (stop func()) {
	every := l.ttl / 3
	if every <= 0 {
		every = time.Second
	}
	var (
		mu      sync.Mutex
		stopped bool
		running sync.WaitGroup
		t       *time.Timer
	)
	beat := func() {
		fired := time.Now()
		defer func() {
			if r := recover(); r != nil {
				log.Error("lease renewal panicked; treating the lease as lost", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				l.markLost()
			}
		}()
		if !e.renew(ctx, l, log) {
			return
		}
		// The next renewal keeps to the schedule, as a ticker would: a slow renewal does not
		// push the later ones back, and one slower than the period skips a beat.
		next := every - time.Since(fired)%every
		mu.Lock()
		if !stopped {
			t.Reset(next)
		}
		mu.Unlock()
	}
	mu.Lock()
	t = time.AfterFunc(every, func() {
		mu.Lock()
		if stopped {
			mu.Unlock()
			return
		}
		running.Add(1)
		mu.Unlock()
		defer running.Done()
		beat()
	})
	mu.Unlock()
	return func() {
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
		running.Wait()
	}
}

// renew extends l once; false when the heartbeat should stop (the lease is lost, or ctx
// ended).
func (e *Engine) renew(ctx context.Context, l *lease, log *slog.Logger) bool {
	now, sent := e.cfg.Now(), time.Now()
	exp, err := e.cfg.Store.RenewLease(ctx, &store.RenewLeaseParams{ID: l.id, LeaseToken: l.token, Now: now})
	switch {
	case err == nil:
		l.extended(sent, now, exp, time.Time{})
	case errors.Is(err, store.ErrLeaseLost):
		e.cfg.Metrics.leaseLosses.Inc()
		log.Warn("lease lost at heartbeat; interrupting the step")
		l.markLost()
		return false
	case ctx.Err() != nil:
		return false
	default:
		log.Warn("lease renewal failed", "error", err, "lost_in", l.remaining())
	}
	return true
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

func outcomeName(o pipeline.Outcome) string {
	switch o {
	case pipeline.OutcomeDone:
		return "done"
	case pipeline.OutcomeWait:
		return "wait"
	case pipeline.OutcomeSkip:
		return "skip"
	case pipeline.OutcomeAwaitUser:
		return "await_user"
	}
	return "unknown"
}
