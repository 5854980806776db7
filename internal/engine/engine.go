// Package engine is the reconciler: it claims due jobs with a lease, runs one step at a time,
// checkpoints each result under the lease's fencing token, and lets go of the job whenever it
// has to wait, so that a handful of workers can carry thousands of jobs.
package engine

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/store"
)

// Store is what the engine needs of the ledger.
type Store interface {
	ClaimJobs(ctx context.Context, p *store.ClaimJobsParams) ([]*job.Job, error)
	Checkpoint(ctx context.Context, p *store.CheckpointParams) (*job.Job, error)
	RenewLease(ctx context.Context, p *store.RenewLeaseParams) (time.Time, error)
	Wakeups(ctx context.Context) <-chan struct{}
}

// Config configures an Engine. Zero values take the defaults in New.
type Config struct {
	Store     Store
	Pipelines *pipeline.Registry
	// Owner names this replica in leases (host and pid is a good choice).
	Owner   string
	Workers int
	// PollInterval is the fallback when no wake-up arrives.
	PollInterval time.Duration
	// MaxAttempts bounds transient failures in a row of one step before the job fails as
	// retryable. Waits (polls of a resource still coming up) are not failures and reset it.
	MaxAttempts int
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// ShutdownGrace is how long running steps may finish after Run's context ends before they
	// are interrupted and their jobs handed back.
	ShutdownGrace time.Duration
	// LeaseMargin is how long before its lease expires (by the database's clock) a worker
	// treats it as lost and stops acting on the job. Zero means a quarter of the job's lease
	// TTL; it is capped at half of it.
	LeaseMargin time.Duration
	// Now is the engine's clock for scheduling and for the times it records. Whether a lease
	// has expired is also decided by the database's clock, which Now cannot move forward.
	Now     func() time.Time
	Logger  *slog.Logger
	Metrics *Metrics
	// Events, if set, is told of every committed change.
	Events Publisher
	// Tracer makes a span per step execution; nil traces nothing.
	Tracer trace.TracerProvider
	// Retention, if positive, is how long a job that is over (cancelled, torn down) stays in
	// the ledger before it is pruned, when the store can prune (store.Pruner). Zero keeps
	// every job.
	Retention time.Duration
	// PruneEvery is how often old jobs are pruned; zero means a tenth of Retention, between a
	// minute and an hour.
	PruneEvery time.Duration
	// Prefetch bounds how many claimed jobs may wait here for a free worker. Zero means four
	// times Workers; negative turns prefetching off. See prefetchRoom for how many are claimed.
	Prefetch int
	// PrefetchWait is how long a job claimed ahead may be expected to wait for a worker; zero
	// means 50ms.
	PrefetchWait time.Duration
}

// Publisher receives committed job changes (the API streams them as server-sent events).
type Publisher interface {
	Publish(j *job.Job)
}

// Engine runs jobs.
type Engine struct {
	cfg    Config
	log    *slog.Logger
	tracer trace.Tracer

	// hardStop is cancelled when the shutdown grace runs out; running steps see it.
	hardCtx  context.Context
	hardStop context.CancelFunc

	// draining is closed when shutdown begins: no new claims, jobs are handed back at their
	// next step boundary, and readiness reports false.
	draining  chan struct{}
	drainOnce sync.Once

	// due remembers when the jobs this replica released to wait fall due.
	due *timers

	// held is the recent average time a job holds a worker slot (nanoseconds, an exponential
	// moving average), from which prefetchRoom judges how long a prefetched job would wait.
	held atomic.Int64
}

// New checks cfg and fills in defaults.
func New(cfg Config) (*Engine, error) {
	if cfg.Store == nil || cfg.Pipelines == nil {
		return nil, errors.New("engine: Store and Pipelines are required")
	}
	if cfg.Owner == "" {
		return nil, errors.New("engine: Owner is required")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 2 * time.Second
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 5
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = time.Second
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = 5 * time.Minute
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	hard, stop := context.WithCancel(context.Background())
	if cfg.Tracer == nil {
		cfg.Tracer = noop.NewTracerProvider()
	}
	if cfg.Prefetch == 0 {
		cfg.Prefetch = 4 * cfg.Workers
	}
	if cfg.PrefetchWait <= 0 {
		cfg.PrefetchWait = 50 * time.Millisecond
	}
	return &Engine{cfg: cfg, log: cfg.Logger.With("component", "engine", "owner", cfg.Owner), hardCtx: hard, hardStop: stop,
		draining: make(chan struct{}), due: newTimers(), tracer: cfg.Tracer.Tracer("github.com/groundworkhq/groundwork/internal/engine")}, nil
}

// Run claims and runs jobs until ctx ends, then shuts down gracefully: no new claims, running
// steps get ShutdownGrace to finish, and every job still held is handed back (queued, lease
// released) so another replica takes it at once.
func (e *Engine) Run(ctx context.Context) error {
	wake := e.cfg.Store.Wakeups(ctx)
	if p, ok := e.cfg.Store.(store.Pruner); ok && e.cfg.Retention > 0 {
		rctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); e.retain(rctx, p) }()
		defer func() { stop(); <-done }()
	}
	poll := time.NewTicker(e.cfg.PollInterval)
	defer poll.Stop()
	freed := make(chan struct{}, e.cfg.Workers)
	var wg sync.WaitGroup
	busy := 0
	// ready holds jobs claimed ahead of a free worker (see prefetchRoom), oldest first.
	var ready []claimed
	start := func(c claimed) {
		busy++
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The slot frees when the worker starts the write that lets go of the job,
			// not when the write commits: the next job's claim overlaps the last
			// write's commit, as a queue's asynchronous completer does. Steps running
			// at once stay within Workers; the write still has its fence.
			began := time.Now()
			var once sync.Once
			free := func() {
				once.Do(func() {
					e.noteHeld(time.Since(began))
					freed <- struct{}{}
				})
			}
			defer free()
			e.work(c, free)
		}()
	}
	// dueTimer fires when the earliest job this replica released to wait falls due. Jobs are
	// due by the caller's clock (Now), which tests may move; the timer runs on the real one.
	dueTimer := time.NewTimer(time.Hour)
	defer dueTimer.Stop()
	for {
		dueTimer.Stop()
		if at := e.due.next(e.cfg.Now()); !at.IsZero() {
			dueTimer.Reset(max(at.Sub(e.cfg.Now()), time.Millisecond))
		}
		// Count every worker that freed up while the last claim was out, so that one claim
		// fills them all: a claim is a commit, and claiming one job per freed worker would
		// cap the engine at the database's serial commit rate.
	drained:
		for {
			select {
			case <-freed:
				busy--
			default:
				break drained
			}
		}
		for ctx.Err() == nil {
			ready = e.dropStale(ready, &wg)
			for busy < e.cfg.Workers && len(ready) > 0 {
				start(ready[0])
				ready = ready[1:]
			}
			want := e.cfg.Workers - busy + e.prefetchRoom(len(ready))
			if want <= 0 || busy >= e.cfg.Workers && len(ready) > 0 && want < e.cfg.Workers {
				// Nothing free, or only a few prefetch places: not worth a claim's commit yet.
				break
			}
			now, sent := e.cfg.Now(), time.Now()
			// A claim in flight when the engine stops is let finish: its jobs are leased to
			// this replica once it commits, and an answer cut off by the shutdown would leave
			// them running under a lease nobody holds until it expires. They go back below
			// with the other jobs claimed ahead.
			cctx, cancelClaim := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
			jobs, err := e.cfg.Store.ClaimJobs(cctx, &store.ClaimJobsParams{Owner: e.cfg.Owner, Now: now, Limit: want})
			cancelClaim()
			if err != nil {
				if ctx.Err() == nil {
					e.log.Error("claim failed", "error", err)
				}
				break
			}
			at := time.Now()
			for _, j := range jobs {
				ready = append(ready, claimed{j: j, sent: sent, now: now, at: at, mark: e.claimMarks(j)})
			}
			for busy < e.cfg.Workers && len(ready) > 0 && ctx.Err() == nil {
				start(ready[0])
				ready = ready[1:]
			}
			if len(jobs) < want {
				break
			}
		}
		select {
		case <-ctx.Done():
			// Jobs claimed ahead and never started go back at once (work hands a job back
			// when the engine is draining), so another replica need not wait out their leases.
			e.drainOnce.Do(func() { close(e.draining) })
			for _, c := range ready {
				wg.Add(1)
				go func() { defer wg.Done(); e.work(c, nil) }()
			}
			return e.shutdown(&wg)
		case <-wake:
		case <-poll.C:
		case <-dueTimer.C:
		case <-e.due.changed:
		case <-freed:
			busy--
		}
	}
}

// claimTimeout bounds a claim, which a shutdown does not cut short.
const claimTimeout = 30 * time.Second

// claimed is a job leased by a claim, with the claim's times (see work), when the claim
// answered, and the step the claim is the in-flight marker of (claimMarks).
type claimed struct {
	j             *job.Job
	sent, now, at time.Time
	mark          int
}

// dropStale hands back, at once, the jobs claimed ahead that have waited here for a quarter of
// their lease: steps turned long since they were claimed, and the lease that a worker would
// start with is running out while another replica might have a free worker for them.
func (e *Engine) dropStale(ready []claimed, wg *sync.WaitGroup) []claimed {
	keep := ready[:0]
	for _, c := range ready {
		if time.Since(c.at) < c.j.LeaseTTL/4 {
			keep = append(keep, c)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := &lease{id: c.j.ID, token: c.j.LeaseToken, ttl: c.j.LeaseTTL, margin: e.leaseMargin(c.j.LeaseTTL),
				expired: func() {}, cancel: func() {}}
			defer l.stop()
			if c.j.LeaseExpiresAt != nil {
				l.extended(c.sent, c.now, *c.j.LeaseExpiresAt, c.j.DBNow)
			}
			e.handBack(l, c.j, e.log.With("job_id", c.j.ID, "reason", "claimed ahead and not started in time"))
		}()
	}
	return keep
}

// prefetchRoom is how many more jobs the next claim may take beyond the free workers, with
// queued of them already waiting here. Claiming only for free workers makes every claim (a
// commit) bring one or two jobs when steps are short and workers free one at a time, which
// capped polling at the claim rate. Claiming ahead is worth it only while jobs leave their
// worker quickly: by Little's law a job behind n others waits n×held/Workers, so the room is
// what keeps that under PrefetchWait, and none while steps hold workers for long (a job
// claimed ahead would sit leased here while another replica could have run it).
func (e *Engine) prefetchRoom(queued int) int {
	if e.cfg.Prefetch <= 0 {
		return 0
	}
	held := time.Duration(e.held.Load())
	if held <= 0 {
		return 0 // nothing measured yet
	}
	n := int(min(e.cfg.PrefetchWait*time.Duration(e.cfg.Workers)/held, 1<<20))
	return max(min(n, e.cfg.Prefetch)-queued, 0)
}

// noteHeld folds one job's time in a worker slot into the moving average.
func (e *Engine) noteHeld(d time.Duration) {
	for {
		old := e.held.Load()
		next := int64(d)
		if old > 0 {
			next = old + (int64(d)-old)/8
		}
		if e.held.CompareAndSwap(old, next) {
			return
		}
	}
}

func (e *Engine) shutdown(wg *sync.WaitGroup) error {
	e.drainOnce.Do(func() { close(e.draining) })
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-time.After(e.cfg.ShutdownGrace):
		e.log.Warn("shutdown grace ran out; interrupting running steps")
		e.hardStop()
		<-done
		return nil
	}
}

func (e *Engine) isStopping() bool {
	select {
	case <-e.draining:
		return true
	default:
		return false
	}
}

// Draining is closed once shutdown has begun.
func (e *Engine) Draining() <-chan struct{} { return e.draining }

// backoff returns the pause before transient attempt n+1: exponential, capped, with jitter so
// that jobs failing together do not retry together.
func (e *Engine) backoff(attempt int) time.Duration {
	d := e.cfg.BackoffBase
	for i := 1; i < attempt && d < e.cfg.BackoffMax; i++ {
		d *= 2
	}
	if d > e.cfg.BackoffMax {
		d = e.cfg.BackoffMax
	}
	return d/2 + rand.N(d/2+1)
}
