package engine_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/groundworkhq/groundwork/internal/engine"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
	"github.com/groundworkhq/groundwork/internal/store"
)

// logBuffer is a log sink several goroutines write to.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// panicky is the test family with one more way to fail: its step list panics for one job.
type panicky struct {
	*testfamily.Pipeline
	stepsPanicFor atomic.Value // job id
}

func (p *panicky) Steps(j *job.Job) []pipeline.Step {
	if j != nil && p.stepsPanicFor.Load() == j.ID {
		var m map[string]int
		m["set-up"]++ // a nil map write: the kind of bug a pipeline's set-up has
	}
	return p.Pipeline.Steps(j)
}

// A panic in a step's Do or Undo, or in the pipeline's set-up for a job, fails that job as
// system: the stack goes to the log with the job's id and step, not into the job's failure;
// the engine goes on and completes the other jobs it runs.
func TestPanicFailsOnlyItsJob(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		where    string // "do", "undo" or "steps"
		wantStep string
	}{
		"in a step's Do":          {"do", "step2"},
		"in a step's Undo":        {"undo", "step2"},
		"in the pipeline's steps": {"steps", ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var bad atomic.Value
			b := setup(t, 3, func(ctx context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error) {
				if c.JobID == bad.Load() && c.Step == "step2" && c.Undo == (tc.where == "undo") && tc.where != "steps" {
					var p *pipeline.Run
					_ = p.Job.ID // nil pointer dereference
				}
				return pipeline.Done(nil), nil
			})
			pp := &panicky{Pipeline: b.pipe}
			logs := &logBuffer{}
			reg, err := pipeline.NewRegistry(pp)
			if err != nil {
				t.Fatal(err)
			}
			e, err := engine.New(engine.Config{Store: b.store, Pipelines: reg, Owner: "panics", Workers: 2,
				PollInterval: 20 * time.Millisecond, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { _ = e.Run(ctx); close(done) }()
			t.Cleanup(func() { cancel(); <-done })

			victim := b.pipe.NewJob("job_"+ulid.Make().String(), time.Now())
			bad.Store(victim.ID)
			if tc.where == "steps" {
				pp.stepsPanicFor.Store(victim.ID)
			}
			if _, err := b.store.CreateJob(context.Background(), &store.CreateJobParams{Job: victim, Now: time.Now()}); err != nil {
				t.Fatal(err)
			}
			if tc.where == "undo" {
				done := b.waitStatus(t, victim.ID, job.StatusCompleted)
				if _, err := engine.Cancel(context.Background(), b.store, done, time.Now()); err != nil {
					t.Fatal(err)
				}
			}
			var others []string
			for i := 0; i < 5; i++ {
				others = append(others, b.submit(t).ID)
			}
			got := b.waitStatus(t, victim.ID, job.StatusFailed)
			f := got.Failure
			if f == nil || f.Class != job.ClassSystem || f.Code != "InternalError" || f.Retryable || f.Step != tc.wantStep {
				t.Fatalf("failure = %+v, want system InternalError at step %q", f, tc.wantStep)
			}
			for _, leak := range []string{"goroutine", "panic", "nil pointer", "nil map", ".go:"} {
				if strings.Contains(f.Message, leak) {
					t.Fatalf("failure message leaks the panic (%q): %s", leak, f.Message)
				}
				for _, s := range got.Steps {
					if strings.Contains(s.Error, leak) {
						t.Fatalf("step record leaks the panic (%q): %s", leak, s.Error)
					}
				}
			}
			for _, id := range others {
				b.waitStatus(t, id, job.StatusCompleted)
			}
			out := logs.String()
			var line string
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, victim.ID) && strings.Contains(l, `"stack"`) {
					line = l
					break
				}
			}
			if line == "" {
				t.Fatalf("no log line with the job's id and a stack:\n%s", out)
			}
			if !strings.Contains(line, "goroutine") || !strings.Contains(line, "safety_test.go") {
				t.Fatalf("logged stack does not lead to the panic: %s", line)
			}
			if tc.wantStep != "" && !strings.Contains(line, `"step":"`+tc.wantStep+`"`) {
				t.Fatalf("log line does not name the step: %s", line)
			}
		})
	}
}

// A replica whose clock runs two minutes fast sees every lease as expired by its own clock.
// It must not take over a job another replica holds (and renews): the take-over is decided by
// the database's clock.
func TestFastClockReplicaLeavesLiveLeases(t *testing.T) {
	t.Parallel()
	const fastOwner = "fast-clock"
	var longID atomic.Value
	release := make(chan struct{})
	var mu sync.Mutex
	runs := map[string][]string{} // job id -> owner of each execution of step1
	b := setup(t, 1, func(ctx context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error) {
		mu.Lock()
		runs[c.JobID] = append(runs[c.JobID], r.Job.LeaseOwner)
		mu.Unlock()
		if c.JobID == longID.Load() {
			select {
			case <-release:
			case <-ctx.Done():
				return pipeline.Result{}, ctx.Err()
			}
		}
		return pipeline.Done(nil), nil
	})
	b.pipe.TTL = 2 * time.Second
	long := b.pipe.NewJob("job_"+ulid.Make().String(), time.Now())
	longID.Store(long.ID)
	if _, err := b.store.CreateJob(context.Background(), &store.CreateJobParams{Job: long, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	// One worker on the true-clock replica: once it holds the long job, other work goes to the
	// fast replica, which shows that it is claiming all along.
	b.start(t, func(c *engine.Config) { c.Workers = 1; c.Owner = "true-clock" })
	waitFor(t, "the true-clock replica to run the long step", 10*time.Second, func() bool { return b.calls.count(long.ID, "step1", false) == 1 })
	b.start(t, func(c *engine.Config) {
		c.Owner = fastOwner
		c.Now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	})
	// Hold the step for two lease TTLs while the fast replica claims every 20ms.
	holdUntil := time.Now().Add(4 * time.Second)
	var other []string
	for time.Now().Before(holdUntil) {
		other = append(other, b.submit(t).ID)
		time.Sleep(300 * time.Millisecond)
	}
	close(release)
	b.waitStatus(t, long.ID, job.StatusCompleted)
	for _, id := range other {
		b.waitStatus(t, id, job.StatusCompleted)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := runs[long.ID]; len(got) != 1 || got[0] != "true-clock" {
		t.Fatalf("the long step ran as %v, want once by the true-clock replica", got)
	}
	fast := 0
	for _, id := range other {
		for _, o := range runs[id] {
			if o == fastOwner {
				fast++
			}
		}
	}
	if fast == 0 {
		t.Fatal("the fast replica ran nothing: it was not claiming, and the test proved nothing")
	}
}

// blockedRenew is a store whose lease renewals hang until their context ends, as over a
// database connection that stopped answering.
type blockedRenew struct{ store.Store }

func (blockedRenew) RenewLease(ctx context.Context, _ *store.RenewLeaseParams) (time.Time, error) {
	<-ctx.Done()
	return time.Time{}, ctx.Err()
}

// driver records the cloud calls a step makes. Like a cloud SDK, it sends nothing once the
// call's context is done; the time is read before that check, so a recorded call started no
// later than its time.
type driver struct {
	mu    sync.Mutex
	calls []time.Time
}

func (d *driver) call(ctx context.Context) error {
	at := time.Now()
	if err := ctx.Err(); err != nil {
		return err
	}
	d.mu.Lock()
	d.calls = append(d.calls, at)
	d.mu.Unlock()
	return nil
}

// A worker whose heartbeat hangs makes no driver call for its step once the lease is within
// the safety margin of expiry: the lease's deadline, not the heartbeat, stops it.
func TestBlockedHeartbeatStopsDriverCalls(t *testing.T) {
	t.Parallel()
	const ttl, margin = time.Second, 300 * time.Millisecond
	d := &driver{}
	var stepStart atomic.Value
	b := setup(t, 1, func(ctx context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error) {
		if c.Attempt > 1 {
			return pipeline.Done(nil), nil
		}
		stepStart.Store(time.Now())
		for {
			if err := d.call(ctx); err != nil {
				return pipeline.Result{}, fault.Transient(err)
			}
			select {
			case <-time.After(5 * time.Millisecond):
			case <-ctx.Done():
			}
		}
	})
	b.pipe.TTL = ttl
	reg, err := pipeline.NewRegistry(b.pipe)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Store: blockedRenew{b.store}, Pipelines: reg, Owner: "cut-off", Workers: 1,
		PollInterval: 20 * time.Millisecond, LeaseMargin: margin})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = e.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	j := b.submit(t)
	// The first attempt's lease runs out; the job is taken up again once the database's clock
	// passes it, and the second attempt finishes.
	got := b.waitStatus(t, j.ID, job.StatusCompleted)
	if got.Steps[0].Attempts != 2 {
		t.Fatalf("step ran %d times, want 2 (the cut-off attempt and the one after the lease expired)", got.Steps[0].Attempts)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	start := stepStart.Load().(time.Time)
	// The claim was sent before the step started: the deadline is no later than this.
	deadline := start.Add(ttl - margin)
	if len(d.calls) < 20 {
		t.Fatalf("only %d driver calls before the lease ran out; the step was not calling", len(d.calls))
	}
	for _, at := range d.calls {
		if at.After(deadline) {
			t.Fatalf("driver call %s after the step started, past the lease deadline at %s", at.Sub(start), ttl-margin)
		}
	}
	t.Logf("%d driver calls, the last %s after the step started (deadline %s)", len(d.calls), d.calls[len(d.calls)-1].Sub(start), ttl-margin)
}

// Polls of a resource that is still coming up do not use up the retry budget: a step that
// waited 30 times still gets MaxAttempts transient failures in a row, and the backoff after a
// wait starts from the bottom.
func TestWaitsDoNotUseRetryBudget(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var execs []time.Time
	b := setup(t, 1, func(ctx context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error) {
		mu.Lock()
		n := len(execs) + 1
		execs = append(execs, time.Now())
		mu.Unlock()
		switch {
		case n == 1 || n > 31: // a failure before the waits, then failures after them
			return pipeline.Result{}, fault.Transient(errors.New("Throttling"))
		default:
			return pipeline.Wait(time.Millisecond, "still coming up", nil), nil
		}
	})
	const base, maxBackoff = 200 * time.Millisecond, 20 * time.Second
	b.start(t, func(c *engine.Config) { c.MaxAttempts = 3; c.BackoffBase = base; c.BackoffMax = maxBackoff })
	j := b.submit(t)
	got := b.waitStatus(t, j.ID, job.StatusFailed)
	mu.Lock()
	defer mu.Unlock()
	// 1 failure, 30 waits, then the whole budget of 3 failures in a row.
	if len(execs) != 34 {
		t.Fatalf("step ran %d times, want 34 (1 failure, 30 waits, 3 failures)", len(execs))
	}
	if f := got.Failure; f == nil || f.Class != job.ClassTransient || !f.Retryable {
		t.Fatalf("failure = %+v, want transient and retryable", got.Failure)
	}
	if s := got.Steps[0]; s.Attempts != 34 || s.Retries != 3 {
		t.Fatalf("step record: %d attempts, %d retries; want 34 and 3", s.Attempts, s.Retries)
	}
	// After the waits the first backoff is base/2..base, the second base..2*base; counted from
	// the executions, they would be at the 20s cap.
	for k, limit := range map[int]time.Duration{32: 3 * base, 33: 5 * base} {
		gap := execs[k].Sub(execs[k-1])
		if gap < base/2*(time.Duration(k-31)) || gap > limit+2*time.Second {
			t.Fatalf("backoff before execution %d = %s, want from the bottom (base %s)", k+1, gap, base)
		}
	}
}

// The claim is the in-flight marker of the first step it runs: a worker writes nothing before
// running it. When that worker's lease is cut off mid-step and the job is then cancelled, the
// next claim takes the lease over, learns from that that the step may have acted, and
// teardown undoes it; the cut-off attempt is counted.
func TestCancelAfterLostLeaseUndoesTheCutOffStep(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	var once sync.Once
	b := setup(t, 2, func(ctx context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error) {
		if c.Undo {
			return pipeline.Done(nil), nil
		}
		if c.Step == "step1" && c.Attempt == 1 {
			once.Do(func() { close(started) })
			<-ctx.Done() // the lease runs out: renewals hang
			return pipeline.Result{}, fault.Transient(ctx.Err())
		}
		return pipeline.Done(nil), nil
	})
	b.pipe.TTL = time.Second
	reg, err := pipeline.NewRegistry(b.pipe)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Store: blockedRenew{b.store}, Pipelines: reg, Owner: "cut-off", Workers: 1,
		PollInterval: 20 * time.Millisecond, LeaseMargin: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = e.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	j := b.submit(t)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("step1 never started")
	}
	cur, err := b.store.GetJob(context.Background(), &store.GetJobParams{ID: j.ID})
	if err != nil {
		t.Fatal(err)
	}
	if cur.Steps[0].Status != job.StepPending || cur.Status != job.StatusRunning {
		t.Fatalf("a worker wrote before running the claimed step: job %s, step1 %s", cur.Status, cur.Steps[0].Status)
	}
	if _, err := engine.Cancel(context.Background(), b.store, cur, time.Now()); err != nil {
		t.Fatal(err)
	}
	got := b.waitStatus(t, j.ID, job.StatusCancelled)
	if n := b.calls.count(j.ID, "step1", true); n != 1 {
		t.Fatalf("step1 undone %d times, want 1; calls %v", n, b.calls.order(j.ID))
	}
	if n := b.calls.count(j.ID, "step2", false); n != 0 {
		t.Fatalf("step2 ran %d times after the cancel", n)
	}
	if a := got.Steps[0].Attempts; a != 2 {
		t.Fatalf("step1 attempts on record %d, want 2 (the cut-off one and its undo)", a)
	}
}
