package main

import (
	"context"
	"database/sql"
	"fmt"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/groundworkhq/groundwork/internal/engine"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/store/sqlstore"
)

// gwStore is what the bench needs of a Groundwork store: the ledger and its handle.
type gwStore interface {
	store.Store
	DB() *sql.DB
}

// gwRunner runs workloads through Groundwork's engine on the database under test.
type gwRunner struct {
	s       gwStore
	dialect string // "sqlite" or "postgres"
	spec    string // the database as the server names it: a SQLite path or a PostgreSQL URL
	workers int
	// prefetch is the engine's Prefetch (0: its default; negative: off).
	prefetch int
}

// publisher tells the bench when jobs end; the engine calls it after every committed change.
type publisher struct {
	ended   atomic.Int64
	allDone chan struct{}
	want    int64
	once    sync.Once
}

func (p *publisher) Publish(j *job.Job) {
	if j.Status != job.StatusCompleted && j.Status != job.StatusFailed && !j.Status.Terminal() {
		return
	}
	if p.ended.Add(1) == p.want {
		p.once.Do(func() { close(p.allDone) })
	}
}

func (g *gwRunner) start(p pipeline.Pipeline, workers int, events engine.Publisher, poll time.Duration) (stop func(), err error) {
	reg, err := pipeline.NewRegistry(p)
	if err != nil {
		return nil, err
	}
	e, err := engine.New(engine.Config{Store: g.s, Pipelines: reg, Owner: "bench", Workers: workers,
		PollInterval: poll, Events: events, Prefetch: g.prefetch})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go pprof.Do(ctx, pprof.Labels("side", "groundwork"), func(ctx context.Context) { _ = e.Run(ctx); close(done) })
	return func() { cancel(); <-done }, nil
}

// clear empties the job ledger between runs so that each starts on the same table size.
func (g *gwRunner) clear(ctx context.Context) error {
	_, err := g.s.DB().ExecContext(ctx, `DELETE FROM provisioning_jobs`)
	return err
}

// seed creates n copies of j (ids j.ID + "_" + i) in one statement, bypassing the API: the
// bench measures the engine, not inserts. status overrides the copies' status when not empty.
func (g *gwRunner) seed(ctx context.Context, j *job.Job, n int, status job.Status, nextRunAt time.Time, spread time.Duration) error {
	if _, err := g.s.CreateJob(ctx, &store.CreateJobParams{Job: j, Now: time.Now()}); err != nil {
		return err
	}
	cols := strings.Split(sqlstore.JobColumns, ",")
	sel := make([]string, len(cols))
	for i, c := range cols {
		c = strings.TrimSpace(c)
		cols[i] = c
		switch c {
		case "id":
			sel[i] = "id || '_' || CAST(seq.i AS TEXT)"
		case "status":
			if status != "" {
				sel[i] = "'" + string(status) + "'"
			} else {
				sel[i] = c
			}
		case "created_at", "updated_at":
			if status != "" {
				// Finished copies ended at nextRunAt, so that retention sees their age.
				sel[i] = fmt.Sprintf("%d", nextRunAt.UnixMilli())
			} else {
				sel[i] = c
			}
		case "next_run_at":
			// Copy i is due spread/10000*(i mod 10000) after nextRunAt.
			sel[i] = fmt.Sprintf("%d + (seq.i %% 10000) * %d / 10000", nextRunAt.UnixMilli(), max(spread.Milliseconds(), 1))
		default:
			sel[i] = c
		}
	}
	series := "generate_series(1, $2) AS seq(i)"
	if g.dialect == "sqlite" {
		series = "(WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < $2) SELECT i FROM s) AS seq"
	}
	for done := 0; done < n; {
		chunk := min(n-done, 100_000)
		q := `INSERT INTO provisioning_jobs (` + strings.Join(cols, ", ") + `) SELECT ` +
			strings.Replace(strings.Join(sel, ", "), "seq.i", fmt.Sprintf("(seq.i + %d)", done), -1) +
			` FROM provisioning_jobs, ` + series + ` WHERE provisioning_jobs.id = $1`
		if _, err := g.s.DB().ExecContext(ctx, q, j.ID, chunk); err != nil {
			return fmt.Errorf("seed jobs: %w", err)
		}
		done += chunk
	}
	// The template itself is removed so that exactly n rows are seeded.
	_, err := g.s.DB().ExecContext(ctx, `DELETE FROM provisioning_jobs WHERE id = $1`, j.ID)
	return err
}

func newID() string { return "job_" + ulid.Make().String() }

// throughput seeds n jobs of the given step count, then runs the engine with the given
// workers until all are done.
func (g *gwRunner) throughput(ctx context.Context, steps, n, workers int, m *meter) (Throughput, error) {
	if err := g.clear(ctx); err != nil {
		return Throughput{}, err
	}
	p := &testfamily.Pipeline{N: steps, Hook: func(context.Context, testfamily.Call, *pipeline.Run) (pipeline.Result, error) {
		return pipeline.Done(nil), nil
	}}
	if err := g.seed(ctx, p.NewJob(newID(), time.Now()), n, "", time.Now().Add(-time.Hour), time.Second); err != nil {
		return Throughput{}, err
	}
	pub := &publisher{allDone: make(chan struct{}), want: int64(n)}
	m.start()
	start := time.Now()
	stop, err := g.start(p, workers, pub, time.Second)
	if err != nil {
		return Throughput{}, err
	}
	defer stop()
	select {
	case <-pub.allDone:
	case <-time.After(10 * time.Minute):
		return Throughput{}, fmt.Errorf("groundwork: %d of %d jobs ended in 10 minutes", pub.ended.Load(), n)
	}
	elapsed := time.Since(start)
	m.stop()
	return newThroughput(n, steps, elapsed), nil
}

// latency runs the engine idle, then creates jobs one at a time and measures from the create
// call to the job's first step starting (the wake-up path, not the poll).
func (g *gwRunner) latency(ctx context.Context, samples int) (Latency, error) {
	if err := g.clear(ctx); err != nil {
		return Latency{}, err
	}
	started := make(chan time.Time, 1)
	p := &testfamily.Pipeline{N: 1, Hook: func(context.Context, testfamily.Call, *pipeline.Run) (pipeline.Result, error) {
		started <- time.Now()
		return pipeline.Done(nil), nil
	}}
	stop, err := g.start(p, g.workers, nil, time.Second)
	if err != nil {
		return Latency{}, err
	}
	defer stop()
	time.Sleep(200 * time.Millisecond) // let the engine settle into its idle wait
	var lat []time.Duration
	for i := 0; i < samples; i++ {
		t0 := time.Now()
		if _, err := g.s.CreateJob(ctx, &store.CreateJobParams{Job: p.NewJob(newID(), t0), Now: t0}); err != nil {
			return Latency{}, err
		}
		select {
		case t := <-started:
			lat = append(lat, t.Sub(t0))
		case <-time.After(30 * time.Second):
			return Latency{}, fmt.Errorf("groundwork: job not started in 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return newLatency(lat), nil
}
