package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivermigrate"
)

// noopArgs is River's side of the workload: a job whose work does nothing.
type noopArgs struct{}

func (noopArgs) Kind() string { return "bench_noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	started func(id int64)
}

func (w *noopWorker) Work(_ context.Context, j *river.Job[noopArgs]) error {
	if w.started != nil {
		w.started(j.ID)
	}
	return nil
}

// riverRunner runs the same no-op workload through River on the database under test.
type riverRunner[TTx any] struct {
	driver  riverdriver.Driver[TTx]
	workers int
	// truncate empties River's job table between runs, so each starts on the same table size.
	truncate func(ctx context.Context) error
}

func (r *riverRunner[TTx]) migrate(ctx context.Context) error {
	m, err := rivermigrate.New(r.driver, &rivermigrate.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	return err
}

func (r *riverRunner[TTx]) client(workers int, started func(int64)) (*river.Client[TTx], error) {
	w := river.NewWorkers()
	river.AddWorker(w, &noopWorker{started: started})
	return river.NewClient(r.driver, &river.Config{
		Logger:            slog.New(slog.DiscardHandler),
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers:           w,
		FetchCooldown:     time.Millisecond,
		FetchPollInterval: 50 * time.Millisecond,
	})
}

// throughput inserts n jobs, then starts River with the given workers and times it until all
// n are completed.
func (r *riverRunner[TTx]) throughput(ctx context.Context, n, workers int, m *meter) (Throughput, error) {
	if err := r.truncate(ctx); err != nil {
		return Throughput{}, err
	}
	c, err := r.client(workers, nil)
	if err != nil {
		return Throughput{}, err
	}
	for i := 0; i < n; i += 1000 {
		batch := make([]river.InsertManyParams, 0, 1000)
		for k := i; k < min(n, i+1000); k++ {
			batch = append(batch, river.InsertManyParams{Args: noopArgs{}})
		}
		if _, err := c.InsertMany(ctx, batch); err != nil {
			return Throughput{}, fmt.Errorf("river insert: %w", err)
		}
	}
	events, cancel := c.SubscribeConfig(&river.SubscribeConfig{ChanSize: n + 1000, Kinds: []river.EventKind{river.EventKindJobCompleted}})
	defer cancel()
	m.start()
	start := time.Now()
	if err := c.Start(ctx); err != nil {
		return Throughput{}, err
	}
	done := 0
	timeout := time.After(10 * time.Minute)
	for done < n {
		select {
		case <-events:
			done++
		case <-timeout:
			return Throughput{}, fmt.Errorf("river: %d of %d jobs completed in 10 minutes", done, n)
		}
	}
	elapsed := time.Since(start)
	m.stop()
	stopCtx, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	_ = c.Stop(stopCtx)
	return newThroughput(n, 1, elapsed), nil
}

// latency starts River idle, then inserts jobs one at a time and measures from the insert
// call to the job's work starting.
func (r *riverRunner[TTx]) latency(ctx context.Context, samples int) (Latency, error) {
	if err := r.truncate(ctx); err != nil {
		return Latency{}, err
	}
	var mu sync.Mutex
	startedAt := map[int64]time.Time{}
	startedCh := make(chan int64, 1)
	c, err := r.client(r.workers, func(id int64) {
		mu.Lock()
		startedAt[id] = time.Now()
		mu.Unlock()
		startedCh <- id
	})
	if err != nil {
		return Latency{}, err
	}
	if err := c.Start(ctx); err != nil {
		return Latency{}, err
	}
	defer func() {
		stopCtx, stop := context.WithTimeout(context.Background(), 30*time.Second)
		defer stop()
		_ = c.Stop(stopCtx)
	}()
	time.Sleep(200 * time.Millisecond) // let the producer settle into its idle loop
	var lat []time.Duration
	for i := 0; i < samples; i++ {
		t0 := time.Now()
		res, err := c.Insert(ctx, noopArgs{}, nil)
		if err != nil {
			return Latency{}, err
		}
		select {
		case <-startedCh:
		case <-time.After(30 * time.Second):
			return Latency{}, fmt.Errorf("river: job %d not started in 30s", res.Job.ID)
		}
		mu.Lock()
		lat = append(lat, startedAt[res.Job.ID].Sub(t0))
		mu.Unlock()
		// Spread inserts out so that each one meets an idle client, as a job arriving alone does.
		time.Sleep(5 * time.Millisecond)
	}
	return newLatency(lat), nil
}
