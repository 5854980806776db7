package engine_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/engine"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
	"github.com/groundworkhq/groundwork/internal/store"
)

// limitsStore records the limit of every claim and what it brought.
type limitsStore struct {
	engine.Store
	mu     sync.Mutex
	limits []int
}

func (s *limitsStore) ClaimJobs(ctx context.Context, p *store.ClaimJobsParams) ([]*job.Job, error) {
	s.mu.Lock()
	s.limits = append(s.limits, p.Limit)
	s.mu.Unlock()
	return s.Store.ClaimJobs(ctx, p)
}

func (s *limitsStore) maxLimit() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := 0
	for _, l := range s.limits {
		m = max(m, l)
	}
	return m
}

// TestShortStepsAreClaimedAhead: while steps leave their workers quickly, a claim takes more
// jobs than there are free workers (each claim is a commit, and claiming one or two at a time
// capped polling at the claim rate), and still no more steps run at once than Workers.
func TestShortStepsAreClaimedAhead(t *testing.T) {
	t.Parallel()
	var running, most atomic.Int32
	b := setup(t, 1, func(_ context.Context, c testfamily.Call, _ *pipeline.Run) (pipeline.Result, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		return pipeline.Done(nil), nil
	})
	ls := &limitsStore{Store: b.store}
	const workers, jobs = 2, 40
	var ids []string
	for range jobs {
		ids = append(ids, b.submit(t).ID)
	}
	b.start(t, func(c *engine.Config) {
		c.Store, c.Workers, c.Prefetch, c.PrefetchWait = ls, workers, 16, time.Minute
	})
	for _, id := range ids {
		b.waitStatus(t, id, job.StatusCompleted)
	}
	if got := ls.maxLimit(); got <= workers {
		t.Errorf("the largest claim asked for %d jobs (claims: %v); want more than the %d workers once steps proved short", got, ls.limits, workers)
	}
	if got := most.Load(); got > workers {
		t.Errorf("%d steps ran at once; Workers is %d", got, workers)
	}
}

// TestPrefetchedJobsGoBackAtShutdown: jobs claimed ahead and never started are handed back
// (queued, lease released) when the engine stops, so that another replica takes them at once
// instead of waiting out their leases, and none of them is run after the shutdown began.
func TestPrefetchedJobsGoBackAtShutdown(t *testing.T) {
	t.Parallel()
	var block atomic.Bool
	entered := make(chan string, 16)
	b := setup(t, 1, func(ctx context.Context, c testfamily.Call, _ *pipeline.Run) (pipeline.Result, error) {
		if block.Load() {
			entered <- c.JobID
			<-ctx.Done()
			return pipeline.Result{}, ctx.Err()
		}
		return pipeline.Done(nil), nil
	})
	stop := b.start(t, func(c *engine.Config) {
		c.Workers, c.Prefetch, c.PrefetchWait, c.ShutdownGrace = 1, 8, time.Minute, 50*time.Millisecond
	})
	// A short job first, so that the engine has seen how long a step holds its worker.
	warm := b.submit(t)
	b.waitStatus(t, warm.ID, job.StatusCompleted)
	block.Store(true)
	var ids []string
	for range 5 {
		ids = append(ids, b.submit(t).ID)
	}
	var first string
	select {
	case first = <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no step started")
	}
	held := func() int {
		n := 0
		for _, id := range ids {
			if id != first && b.get(t, id).Status == job.StatusRunning {
				n++
			}
		}
		return n
	}
	waitFor(t, "a job claimed ahead of the busy worker", 10*time.Second, func() bool { return held() > 0 })
	stop()
	for _, id := range ids {
		j := b.get(t, id)
		if j.Status != job.StatusQueued || j.LeaseOwner != "" {
			t.Errorf("job %s after shutdown: %s, lease owner %q; want queued and released", id, j.Status, j.LeaseOwner)
		}
		if id != first && b.calls.count(id, "step1", false) != 0 {
			t.Errorf("job %s, claimed ahead, ran during the shutdown", id)
		}
	}
}

// handBacksStore records the jobs released to the queue by a checkpoint that changed nothing
// else (a hand-back).
type handBacksStore struct {
	engine.Store
	mu   sync.Mutex
	back map[string]int
}

func (s *handBacksStore) Checkpoint(ctx context.Context, p *store.CheckpointParams) (*job.Job, error) {
	if p.Release && p.Status == job.StatusQueued {
		s.mu.Lock()
		s.back[p.ID]++
		s.mu.Unlock()
	}
	return s.Store.Checkpoint(ctx, p)
}

func (s *handBacksStore) count(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.back[id]
}

// TestJobsClaimedAheadAreHandedBackWhenStepsTurnLong: a job claimed ahead that has waited a
// quarter of its lease for a worker (the steps before it turned long) goes back to the queue
// rather than sit leased here, and it never runs on a lease that is running out.
func TestJobsClaimedAheadAreHandedBackWhenStepsTurnLong(t *testing.T) {
	t.Parallel()
	var block atomic.Bool
	release := make(chan struct{})
	entered := make(chan string, 16)
	b := setup(t, 1, func(ctx context.Context, c testfamily.Call, _ *pipeline.Run) (pipeline.Result, error) {
		if block.Load() {
			entered <- c.JobID
			select {
			case <-release:
			case <-ctx.Done():
				return pipeline.Result{}, ctx.Err()
			}
		}
		return pipeline.Done(nil), nil
	})
	b.pipe.TTL = 400 * time.Millisecond
	hs := &handBacksStore{Store: b.store, back: map[string]int{}}
	b.start(t, func(c *engine.Config) {
		c.Store, c.Workers, c.Prefetch, c.PrefetchWait = hs, 1, 8, time.Minute
	})
	warm := b.submit(t)
	b.waitStatus(t, warm.ID, job.StatusCompleted)
	block.Store(true)
	first := b.submit(t)
	if got := <-entered; got != first.ID {
		t.Fatalf("step of %s started; want %s", got, first.ID)
	}
	block.Store(false)
	var ids []string
	for range 3 {
		ids = append(ids, b.submit(t).ID)
	}
	waitFor(t, "a job claimed ahead to be handed back", 10*time.Second, func() bool {
		for _, id := range ids {
			if hs.count(id) > 0 {
				return true
			}
		}
		return false
	})
	for _, id := range ids {
		if b.calls.count(id, "step1", false) != 0 {
			t.Errorf("job %s ran while the only worker was busy", id)
		}
	}
	close(release)
	for _, id := range append(ids, first.ID) {
		b.waitStatus(t, id, job.StatusCompleted)
	}
}

// heldClaimStore holds the first claim until the test releases it, then claims; like a driver
// that drops a statement's answer once its context ends, it then returns nothing if the
// claim's context has ended, though the claim has committed.
type heldClaimStore struct {
	engine.Store
	held, release chan struct{}
	once          sync.Once
}

func (s *heldClaimStore) ClaimJobs(ctx context.Context, p *store.ClaimJobsParams) ([]*job.Job, error) {
	first := false
	s.once.Do(func() { first = true })
	if !first {
		return s.Store.ClaimJobs(ctx, p)
	}
	close(s.held)
	<-s.release
	jobs, err := s.Store.ClaimJobs(context.WithoutCancel(ctx), p)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return jobs, err
}

// TestClaimInFlightAtShutdownGoesBack: a claim still out when the engine stops is let finish,
// and its jobs are handed back unstarted; a claim cut off by the shutdown would have left them
// running under a lease nobody holds.
func TestClaimInFlightAtShutdownGoesBack(t *testing.T) {
	t.Parallel()
	b := setup(t, 1, nil)
	j := b.submit(t)
	hs := &heldClaimStore{Store: b.store, held: make(chan struct{}), release: make(chan struct{})}
	reg, err := pipeline.NewRegistry(b.pipe)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Store: hs, Pipelines: reg, Owner: "test-held-claim", Workers: 2,
		PollInterval: 20 * time.Millisecond, ShutdownGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = e.Run(ctx); close(done) }()
	select {
	case <-hs.held:
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("the engine made no claim")
	}
	cancel() // the shutdown begins while the claim is out
	close(hs.release)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the engine did not stop")
	}
	got := b.get(t, j.ID)
	if got.Status != job.StatusQueued || got.LeaseOwner != "" {
		t.Fatalf("job after shutdown: %s, lease owner %q; want queued and released", got.Status, got.LeaseOwner)
	}
	if n := b.calls.count(j.ID, "step1", false); n != 0 {
		t.Fatalf("the job claimed during the shutdown ran %d times", n)
	}
}
