package engine_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/groundworkhq/groundwork/internal/engine"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/store/postgres"
	"github.com/groundworkhq/groundwork/internal/store/sqlite"
	"github.com/groundworkhq/groundwork/internal/testenv/pgtest"
)

// benchStores opens each store kind fresh for one benchmark.
func benchStores(b *testing.B) map[string]func(b *testing.B) store.Store {
	return map[string]func(b *testing.B) store.Store{
		"sqlite": func(b *testing.B) store.Store {
			s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "gw.db"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		},
		"postgres": func(b *testing.B) store.Store {
			s, err := postgres.Open(context.Background(), pgtest.NewDatabase(b), slog.New(slog.DiscardHandler))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		},
	}
}

// countingStore counts the engine's calls into the store and the database round trips they
// cost: a terminal checkpoint is a transaction of four (begin, update, audit insert, commit),
// every other call one statement.
type countingStore struct {
	engine.Store
	claims, checkpoints, terminal, renewals atomic.Int64
}

func (c *countingStore) ClaimJobs(ctx context.Context, p *store.ClaimJobsParams) ([]*job.Job, error) {
	c.claims.Add(1)
	return c.Store.ClaimJobs(ctx, p)
}

func (c *countingStore) Checkpoint(ctx context.Context, p *store.CheckpointParams) (*job.Job, error) {
	c.checkpoints.Add(1)
	if p.Status != job.StatusRunning && p.Status != job.StatusQueued {
		c.terminal.Add(1)
	}
	return c.Store.Checkpoint(ctx, p)
}

func (c *countingStore) RenewLease(ctx context.Context, p *store.RenewLeaseParams) (time.Time, error) {
	c.renewals.Add(1)
	return c.Store.RenewLease(ctx, p)
}

// report adds the per-step call and round-trip counts to b's metrics.
func (c *countingStore) report(b *testing.B, steps int) {
	n := float64(steps)
	b.ReportMetric(float64(c.checkpoints.Load())/n, "checkpoints/step")
	trips := c.claims.Load() + c.checkpoints.Load() + 3*c.terminal.Load() + c.renewals.Load()
	b.ReportMetric(float64(trips)/n, "roundtrips/step")
}

func runEngine(b *testing.B, s engine.Store, p pipeline.Pipeline, workers int) func() {
	reg, _ := pipeline.NewRegistry(p)
	e, err := engine.New(engine.Config{Store: s, Pipelines: reg, Owner: "bench", Workers: workers, PollInterval: 50 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = e.Run(ctx); close(done) }()
	return func() { cancel(); <-done }
}

// BenchmarkStepTransitions measures steps carried through the engine per second (each step is
// an in-flight checkpoint, the step, and a done checkpoint). The baseline beside it is the raw
// rate of the store's fenced checkpoint write alone, the ceiling the engine works under.
func BenchmarkStepTransitions(b *testing.B) {
	for name, open := range benchStores(b) {
		b.Run(name+"/engine", func(b *testing.B) {
			s := open(b)
			var wg sync.WaitGroup
			p := &testfamily.Pipeline{N: 5, Hook: func(ctx context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error) {
				if c.Step == "step5" {
					defer wg.Done()
				}
				return pipeline.Done(nil), nil
			}}
			jobs := b.N/5 + 1
			wg.Add(jobs)
			now := time.Now()
			for i := 0; i < jobs; i++ {
				if _, err := s.CreateJob(context.Background(), &store.CreateJobParams{Job: p.NewJob("job_"+ulid.Make().String(), now), Now: now}); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			start := time.Now()
			cs := &countingStore{Store: s}
			stop := runEngine(b, cs, p, 8)
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			stop()
			b.ReportMetric(float64(jobs*5)/elapsed.Seconds(), "steps/s")
			cs.report(b, jobs*5)
		})
		b.Run(name+"/baseline-checkpoint", func(b *testing.B) {
			s := open(b)
			p := &testfamily.Pipeline{N: 5}
			now := time.Now()
			if _, err := s.CreateJob(context.Background(), &store.CreateJobParams{Job: p.NewJob("job_"+ulid.Make().String(), now), Now: now}); err != nil {
				b.Fatal(err)
			}
			claimed, err := s.ClaimJobs(context.Background(), &store.ClaimJobsParams{Owner: "bench", Now: now, Limit: 1})
			if err != nil || len(claimed) != 1 {
				b.Fatal("claim", err)
			}
			j := claimed[0]
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if _, err := s.Checkpoint(context.Background(), &store.CheckpointParams{ID: j.ID, LeaseToken: j.LeaseToken,
					Now: time.Now(), Steps: j.Steps, Infra: j.Infra, Status: job.StatusRunning, Phase: job.PhaseApply}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "writes/s")
		})
	}
}

// BenchmarkClaimToStart measures the time from a job being queued to its first step
// starting, with the engine idle and waiting (the wake-up path, not the poll), and reports the
// median and 99th percentile.
func BenchmarkClaimToStart(b *testing.B) {
	for name, open := range benchStores(b) {
		b.Run(name, func(b *testing.B) {
			s := open(b)
			var mu sync.Mutex
			queued := map[string]time.Time{}
			var lat []time.Duration
			started := make(chan struct{}, 1)
			p := &testfamily.Pipeline{N: 1, Hook: func(ctx context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error) {
				mu.Lock()
				lat = append(lat, time.Since(queued[c.JobID]))
				mu.Unlock()
				started <- struct{}{}
				return pipeline.Done(nil), nil
			}}
			stop := runEngine(b, s, p, 4)
			defer stop()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				j := p.NewJob("job_"+ulid.Make().String(), time.Now())
				mu.Lock()
				queued[j.ID] = time.Now()
				mu.Unlock()
				if _, err := s.CreateJob(context.Background(), &store.CreateJobParams{Job: j, Now: time.Now()}); err != nil {
					b.Fatal(err)
				}
				<-started
			}
			b.StopTimer()
			sort.Slice(lat, func(i, k int) bool { return lat[i] < lat[k] })
			pct := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000 }
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
		})
	}
}
