package engine_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
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
	"github.com/groundworkhq/groundwork/internal/store/sqlite"
)

type bundle struct {
	store store.Store
	pipe  *testfamily.Pipeline
	calls *callLog
}

// callLog records every step execution.
type callLog struct {
	mu      sync.Mutex
	calls   []testfamily.Call
	started map[string]bool
}

func (c *callLog) add(x testfamily.Call) {
	c.mu.Lock()
	c.calls = append(c.calls, x)
	if c.started == nil {
		c.started = map[string]bool{}
	}
	c.started[x.JobID] = true
	c.mu.Unlock()
}

func (c *callLog) count(jobID, step string, undo bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, x := range c.calls {
		if x.JobID == jobID && x.Step == step && x.Undo == undo {
			n++
		}
	}
	return n
}

func (c *callLog) order(jobID string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, x := range c.calls {
		if x.JobID == jobID {
			s := x.Step
			if x.Undo {
				s = "undo:" + s
			}
			out = append(out, s)
		}
	}
	return out
}

func setup(t *testing.T, steps int, hook func(ctx context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error)) *bundle {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	b := &bundle{store: s, calls: &callLog{}}
	b.pipe = &testfamily.Pipeline{N: steps, TTL: time.Minute, Hook: func(ctx context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error) {
		b.calls.add(c)
		if hook != nil {
			return hook(ctx, c, r)
		}
		if c.Undo {
			return pipeline.Done(nil), nil
		}
		return pipeline.Done(map[string]any{c.Step: "ok"}), nil
	}}
	return b
}

func (b *bundle) start(t *testing.T, mut func(*engine.Config)) (stop func()) {
	t.Helper()
	stop, _ = b.startEngine(t, mut)
	return stop
}

func (b *bundle) startEngine(t *testing.T, mut func(*engine.Config)) (stop func(), e *engine.Engine) {
	t.Helper()
	reg, err := pipeline.NewRegistry(b.pipe)
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.Config{Store: b.store, Pipelines: reg, Owner: "test-" + ulid.Make().String(), Workers: 4,
		PollInterval: 20 * time.Millisecond, BackoffBase: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
		ShutdownGrace: 5 * time.Second}
	if mut != nil {
		mut(&cfg)
	}
	e, err = engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = e.Run(ctx); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop, e
}

func (b *bundle) submit(t *testing.T) *job.Job {
	t.Helper()
	j, err := b.store.CreateJob(context.Background(), &store.CreateJobParams{Job: b.pipe.NewJob("job_"+ulid.Make().String(), time.Now()), Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func (b *bundle) get(t *testing.T, id string) *job.Job {
	t.Helper()
	j, err := b.store.GetJob(context.Background(), &store.GetJobParams{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (b *bundle) waitStatus(t *testing.T, id string, want job.Status) *job.Job {
	t.Helper()
	var j *job.Job
	waitFor(t, fmt.Sprintf("job %s to be %s", id, want), 20*time.Second, func() bool {
		j = b.get(t, id)
		return j.Status == want
	})
	return j
}

func TestRunsAllStepsInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, 5, nil)
	b.start(t, nil)
	j := b.submit(t)
	done := b.waitStatus(t, j.ID, job.StatusCompleted)
	if got := b.calls.order(j.ID); fmt.Sprint(got) != "[step1 step2 step3 step4 step5]" {
		t.Fatalf("order = %v", got)
	}
	for _, s := range done.Steps {
		if s.Status != job.StepDone || s.Attempts != 1 || s.StartedAt == nil || s.FinishedAt == nil {
			t.Fatalf("step record %+v", s)
		}
	}
	var v string
	if ok, err := (&pipeline.Run{Job: done}).Infra("step5", &v); !ok || err != nil || v != "ok" {
		t.Fatalf("infra not merged: %s", done.Infra)
	}
	if done.LeaseOwner != "" || done.LeaseExpiresAt != nil {
		t.Fatal("finished job still leased")
	}
}

func TestFailureClasses(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		err        error
		wantClass  job.FailureClass
		wantTries  int
		retryable  bool
		wantFixing string
	}{
		"user action fails at once":              {fault.UserAction(errors.New("denied"), "AccessDenied", "grant ec2:CreateVpc", "https://console/iam"), job.ClassUserAction, 1, false, "grant ec2:CreateVpc"},
		"system fails at once":                   {errors.New("nil pointer in our code"), job.ClassSystem, 1, false, ""},
		"transient retried then fails retryable": {fault.Transient(errors.New("Throttling")), job.ClassTransient, 3, true, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, 3, func(ctx context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error) {
				if c.Step == "step2" {
					return pipeline.Result{}, tc.err
				}
				return pipeline.Done(nil), nil
			})
			b.start(t, func(c *engine.Config) { c.MaxAttempts = 3 })
			j := b.submit(t)
			got := b.waitStatus(t, j.ID, job.StatusFailed)
			if got.Failure == nil || got.Failure.Class != tc.wantClass || got.Failure.Retryable != tc.retryable ||
				got.Failure.Step != "step2" || got.Failure.FixHint != tc.wantFixing {
				t.Fatalf("failure = %+v", got.Failure)
			}
			if n := b.calls.count(j.ID, "step2", false); n != tc.wantTries {
				t.Fatalf("step2 ran %d times, want %d", n, tc.wantTries)
			}
			if got.Steps[1].Status != job.StepFailed || got.Steps[2].Status != job.StepPending {
				t.Fatalf("steps = %+v", got.Steps)
			}
		})
	}
}

func TestTransientRecovers(t *testing.T) {
	t.Parallel()
	var fails atomic.Int32
	b := setup(t, 2, func(ctx context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error) {
		if c.Step == "step1" && fails.Add(1) <= 2 {
			return pipeline.Result{}, fault.Transient(errors.New("RequestLimitExceeded"))
		}
		return pipeline.Done(nil), nil
	})
	b.start(t, nil)
	j := b.submit(t)
	got := b.waitStatus(t, j.ID, job.StatusCompleted)
	if got.Steps[0].Attempts != 3 {
		t.Fatalf("attempts = %d, want 3", got.Steps[0].Attempts)
	}
}

// Retry resumes at the failed step; the steps before it are not re-run.
func TestRetryResumesAtFailedStep(t *testing.T) {
	t.Parallel()
	var broken atomic.Bool
	broken.Store(true)
	b := setup(t, 5, func(ctx context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error) {
		if c.Step == "step3" && broken.Load() {
			return pipeline.Result{}, fault.UserAction(errors.New("quota"), "LimitExceeded", "raise the VPC quota", "")
		}
		return pipeline.Done(nil), nil
	})
	b.start(t, nil)
	j := b.submit(t)
	failed := b.waitStatus(t, j.ID, job.StatusFailed)
	broken.Store(false)
	if _, err := engine.Retry(context.Background(), b.store, failed, time.Now()); err != nil {
		t.Fatal(err)
	}
	b.waitStatus(t, j.ID, job.StatusCompleted)
	for step, want := range map[string]int{"step1": 1, "step2": 1, "step3": 2, "step4": 1, "step5": 1} {
		if n := b.calls.count(j.ID, step, false); n != want {
			t.Errorf("%s ran %d times, want %d", step, n, want)
		}
	}
}

// A wait result lets the worker go: with one worker, a job waiting on a slow resource does not
// block another job.
func TestWaitFreesTheWorker(t *testing.T) {
	t.Parallel()
	var ready atomic.Bool
	var slowID atomic.Value
	b := setup(t, 1, func(ctx context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error) {
		if c.JobID == slowID.Load() && !ready.Load() {
			return pipeline.Wait(20*time.Millisecond, "resource coming up", map[string]any{"resourceID": "r-1"}), nil
		}
		return pipeline.Done(nil), nil
	})
	slow := b.pipe.NewJob("job_"+ulid.Make().String(), time.Now())
	slowID.Store(slow.ID)
	if _, err := b.store.CreateJob(context.Background(), &store.CreateJobParams{Job: slow, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	b.start(t, func(c *engine.Config) { c.Workers = 1 })
	waitFor(t, "slow job to wait", 10*time.Second, func() bool { return b.calls.count(slow.ID, "step1", false) >= 2 })
	fast := b.submit(t)
	b.waitStatus(t, fast.ID, job.StatusCompleted)
	// The slow job keeps cycling between waiting and a brief re-check, so either is
	// fine here; what matters is that it has not finished while the fast one did.
	sj := b.get(t, slow.ID)
	if st := sj.Steps[0].Status; sj.Status == job.StatusCompleted || (st != job.StepWaiting && st != job.StepRunning) {
		t.Fatalf("slow job = %s / %s", sj.Status, st)
	}
	var rid string
	if ok, _ := (&pipeline.Run{Job: sj}).Infra("resourceID", &rid); !ok || rid != "r-1" {
		t.Fatalf("infra from a wait was not kept: %s", sj.Infra)
	}
	ready.Store(true)
	b.waitStatus(t, slow.ID, job.StatusCompleted)
}

// A step that says its resource is best polled with a backoff is polled less often while the
// wait goes on, and its record counts the waits in a row until the step finishes.
func TestWaitsBackOff(t *testing.T) {
	t.Parallel()
	const first, factor, slowest = 20 * time.Millisecond, 3, 200 * time.Millisecond
	want := []time.Duration{first, 60 * time.Millisecond, 180 * time.Millisecond, slowest, slowest}
	var (
		mu    sync.Mutex
		calls []time.Time
		waits []int
	)
	b := setup(t, 1, func(ctx context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, time.Now())
		waits = append(waits, r.Job.Steps[0].Waits)
		if len(calls) <= len(want) {
			return pipeline.Wait(first, "resource coming up", nil).Slowing(factor, slowest), nil
		}
		return pipeline.Done(nil), nil
	})
	// Each wait's committed due time, from the events.
	var due waitDelays
	j := b.submit(t)
	b.start(t, func(c *engine.Config) { c.Events = &due })
	done := b.waitStatus(t, j.ID, job.StatusCompleted)
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != len(want)+1 {
		t.Fatalf("%d calls, want %d", len(calls), len(want)+1)
	}
	// The due time is taken from the step's end, the write's time a moment later: a wait is
	// due at most its delay, and a couple of milliseconds less, after its write.
	if got := due.get(); len(got) != len(want) {
		t.Errorf("%d waits published, want %d", len(got), len(want))
	} else {
		for i, w := range want {
			if got[i] > w || got[i] < w-2*time.Millisecond {
				t.Errorf("waits were due %v after they were written, want %v", got, want)
				break
			}
		}
	}
	for i, w := range want {
		// A poll never comes early (but for the store's millisecond precision); without the
		// backoff every gap would be about first.
		if gap := calls[i+1].Sub(calls[i]); gap < w-time.Millisecond {
			t.Errorf("poll %d came %s after the one before, want at least %s", i+2, gap, w)
		}
		if waits[i] != i {
			t.Errorf("call %d saw %d waits in a row, want %d", i+1, waits[i], i)
		}
	}
	if w := done.Steps[0].Waits; w != 0 {
		t.Errorf("finished step still counts %d waits", w)
	}
}

// A transient failure between waits (a throttled poll, say) keeps the count of waits: the
// resource has been coming up all along, and polling it fast again would add to the load the
// cloud is shedding. A finish resets the count.
func TestTransientFailureKeepsTheWaitCount(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		waits []int
	)
	b := setup(t, 1, func(ctx context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		waits = append(waits, r.Job.Steps[0].Waits)
		switch len(waits) {
		case 1, 2, 4:
			return pipeline.Wait(time.Millisecond, "coming up", nil).Slowing(2, 4*time.Millisecond), nil
		case 3:
			return pipeline.Result{}, fault.Transient(errors.New("Throttling"))
		default:
			return pipeline.Done(nil), nil
		}
	})
	j := b.submit(t)
	b.start(t, func(c *engine.Config) { c.BackoffBase = time.Millisecond })
	done := b.waitStatus(t, j.ID, job.StatusCompleted)
	mu.Lock()
	defer mu.Unlock()
	if want := []int{0, 1, 2, 2, 3}; !slices.Equal(waits, want) {
		t.Fatalf("the step saw %v waits in a row at its calls, want %v", waits, want)
	}
	if w := done.Steps[0].Waits; w != 0 {
		t.Errorf("finished step still counts %d waits", w)
	}
}

// waitDelays records, for each wait published, how long after its write the job was due.
type waitDelays struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waitDelays) Publish(j *job.Job) {
	if j.Status != job.StatusQueued || len(j.Steps) == 0 || j.Steps[0].Status != job.StepWaiting {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.d = append(w.d, j.NextRunAt.Sub(j.UpdatedAt))
}

func (w *waitDelays) get() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.d)
}

// Cancel takes effect at the next step boundary and undoes the finished steps in reverse.
func TestCancelUndoesInReverse(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	b := setup(t, 5, func(ctx context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error) {
		if c.Step == "step3" && !c.Undo {
			<-release
		}
		return pipeline.Done(nil), nil
	})
	b.start(t, nil)
	j := b.submit(t)
	waitFor(t, "step3 to start", 10*time.Second, func() bool { return b.calls.count(j.ID, "step3", false) == 1 })
	if _, err := engine.Cancel(context.Background(), b.store, b.get(t, j.ID), time.Now()); err != nil {
		t.Fatal(err)
	}
	close(release)
	got := b.waitStatus(t, j.ID, job.StatusCancelled)
	if order := fmt.Sprint(b.calls.order(j.ID)); order != "[step1 step2 step3 undo:step3 undo:step2 undo:step1]" {
		t.Fatalf("order = %s", order)
	}
	for i, s := range got.Steps {
		want := job.StepUndone
		if i >= 3 {
			want = job.StepPending
		}
		if s.Status != want {
			t.Fatalf("step %d = %s, want %s", i+1, s.Status, want)
		}
	}
}

func TestTeardownOfCompletedJob(t *testing.T) {
	t.Parallel()
	b := setup(t, 3, nil)
	b.start(t, nil)
	j := b.submit(t)
	done := b.waitStatus(t, j.ID, job.StatusCompleted)
	if _, err := engine.Cancel(context.Background(), b.store, done, time.Now()); err != nil {
		t.Fatal(err)
	}
	b.waitStatus(t, j.ID, job.StatusDeleted)
	if order := fmt.Sprint(b.calls.order(j.ID)); order != "[step1 step2 step3 undo:step3 undo:step2 undo:step1]" {
		t.Fatalf("order = %s", order)
	}
}

func TestCancelBeforeStartTouchesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, 3, nil)
	j := b.submit(t) // no engine running
	got, err := engine.Cancel(context.Background(), b.store, j, time.Now())
	if err != nil || got.Status != job.StatusCancelled {
		t.Fatalf("cancel queued job: %v %+v", err, got)
	}
	if len(b.calls.order(j.ID)) != 0 {
		t.Fatal("steps ran")
	}
}

// A step longer than the lease TTL keeps its lease by heartbeat: a second engine polling the
// same store does not take the job over.
func TestHeartbeatKeepsLeaseOverLongStep(t *testing.T) {
	t.Parallel()
	// The step spans 2.5 lease TTLs: without renewal the second engine would take it over after
	// one. The worker lets go a quarter TTL before expiry and renews every third, so a renewal
	// may take up to about 400 ms at 1s: a loaded CI machine running the race detector took
	// longer (the step ran twice). 3s leaves a renewal about 1.2s.
	const ttl = 3 * time.Second
	var running atomic.Int32
	var overlap atomic.Bool
	b := setup(t, 2, func(ctx context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error) {
		if running.Add(1) > 1 {
			overlap.Store(true)
		}
		defer running.Add(-1)
		if c.Step == "step1" {
			select {
			case <-time.After(ttl * 5 / 2):
			case <-ctx.Done():
				return pipeline.Result{}, ctx.Err()
			}
		}
		return pipeline.Done(nil), nil
	})
	b.pipe.TTL = ttl
	b.start(t, nil)
	b.start(t, nil)
	j := b.submit(t)
	got := b.waitStatus(t, j.ID, job.StatusCompleted)
	if overlap.Load() || b.calls.count(j.ID, "step1", false) != 1 || got.Steps[0].Attempts != 1 {
		t.Fatalf("long step was taken over: ran %d times", b.calls.count(j.ID, "step1", false))
	}
	if got.LeaseTTL != ttl {
		t.Fatalf("lease TTL %s, want the family's %s", got.LeaseTTL, ttl)
	}
}

// failingRenew makes heartbeats fail, as for a replica cut off from the database.
type failingRenew struct{ store.Store }

func (f failingRenew) RenewLease(context.Context, *store.RenewLeaseParams) (time.Time, error) {
	return time.Time{}, errors.New("connection refused")
}

// A worker that cannot renew stops at lease expiry; the replica that takes over wins, and a
// late checkpoint from the first is refused by the fencing token.
func TestLostLeaseWritesNothing(t *testing.T) {
	t.Parallel()
	firstStarted := make(chan struct{})
	var once sync.Once
	b := setup(t, 1, func(ctx context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error) {
		if c.Attempt == 1 {
			once.Do(func() { close(firstStarted) })
			<-ctx.Done() // interrupted when the lease runs out
			return pipeline.Done(map[string]any{"writer": "stale"}), nil
		}
		return pipeline.Done(map[string]any{"writer": "owner"}), nil
	})
	b.pipe.TTL = 300 * time.Millisecond
	reg, _ := pipeline.NewRegistry(b.pipe)
	e1, _ := engine.New(engine.Config{Store: failingRenew{b.store}, Pipelines: reg, Owner: "cut-off", Workers: 1, PollInterval: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e1.Run(ctx) //nolint:errcheck
	j := b.submit(t)
	<-firstStarted
	b.start(t, nil)
	got := b.waitStatus(t, j.ID, job.StatusCompleted)
	var w string
	(&pipeline.Run{Job: got}).Infra("writer", &w)
	if w != "owner" {
		t.Fatalf("writer = %q: the stale worker wrote", w)
	}
}

// Shutdown lets a running step finish, then hands the job back for another replica.
func TestGracefulShutdownHandsBack(t *testing.T) {
	t.Parallel()
	inStep := make(chan struct{})
	release := make(chan struct{})
	b := setup(t, 3, func(ctx context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error) {
		if c.Step == "step2" && c.Attempt == 1 {
			close(inStep)
			<-release
		}
		return pipeline.Done(nil), nil
	})
	stop, e := b.startEngine(t, nil)
	j := b.submit(t)
	<-inStep
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	<-e.Draining()
	close(release)
	<-stopped
	got := b.get(t, j.ID)
	if got.Status != job.StatusQueued || got.LeaseOwner != "" || got.Steps[1].Status != job.StepDone || got.Steps[2].Status != job.StepPending {
		t.Fatalf("after shutdown: %s, owner %q, steps %+v", got.Status, got.LeaseOwner, got.Steps)
	}
	b.start(t, nil)
	b.waitStatus(t, j.ID, job.StatusCompleted)
	if n := b.calls.count(j.ID, "step2", false); n != 1 {
		t.Fatalf("step2 ran %d times", n)
	}
}

// Thousands of jobs waiting on a slow resource are carried by a handful of workers: every
// job gets started (and is waiting) before the resource is ready.
func TestManyWaitingJobsFewWorkers(t *testing.T) {
	t.Parallel()
	n := 10000
	if testing.Short() {
		n = 1000
	}
	var ready atomic.Bool
	b := setup(t, 2, func(ctx context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error) {
		if c.Step == "step1" && !ready.Load() {
			return pipeline.Wait(500*time.Millisecond, "waiting for the resource", nil), nil
		}
		return pipeline.Done(nil), nil
	})
	now := time.Now()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "job_" + ulid.Make().String()
		if _, err := b.store.CreateJob(context.Background(), &store.CreateJobParams{Job: b.pipe.NewJob(ids[i], now), Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	b.start(t, func(c *engine.Config) { c.Workers = 4 })
	waitFor(t, "every job to be waiting", 150*time.Second, func() bool { return b.distinctStarted() == n })
	// All n jobs are in flight at once, on 4 workers: none has completed, none has failed.
	if c, _ := b.store.CountJobs(context.Background()); c[job.StatusQueued]+c[job.StatusRunning] != n {
		t.Fatalf("jobs by status while waiting: %v", c)
	}
	ready.Store(true)
	waitFor(t, "every job to complete", 180*time.Second, func() bool {
		c, _ := b.store.CountJobs(context.Background())
		return c[job.StatusCompleted] == n
	})
}

func (b *bundle) distinctStarted() int {
	b.calls.mu.Lock()
	defer b.calls.mu.Unlock()
	return len(b.calls.started)
}
