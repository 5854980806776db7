package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groundworkhq/groundwork/internal/api"
	"github.com/groundworkhq/groundwork/internal/engine"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/store/sqlite"
)

// countingStore counts the job queries the process makes: the API's and the feed's reads, the
// engine's claims, heartbeats and checkpoints.
type countingStore struct {
	store.Full
	n atomic.Int64
}

func (c *countingStore) GetJob(ctx context.Context, p *store.GetJobParams) (*job.Job, error) {
	c.n.Add(1)
	return c.Full.GetJob(ctx, p)
}

func (c *countingStore) ClaimJobs(ctx context.Context, p *store.ClaimJobsParams) ([]*job.Job, error) {
	c.n.Add(1)
	return c.Full.ClaimJobs(ctx, p)
}

func (c *countingStore) RenewLease(ctx context.Context, p *store.RenewLeaseParams) (time.Time, error) {
	c.n.Add(1)
	return c.Full.RenewLease(ctx, p)
}

func (c *countingStore) Checkpoint(ctx context.Context, p *store.CheckpointParams) (*job.Job, error) {
	c.n.Add(1)
	return c.Full.Checkpoint(ctx, p)
}

func (c *countingStore) UpdateJob(ctx context.Context, p *store.UpdateJobParams) (*job.Job, error) {
	c.n.Add(1)
	return c.Full.UpdateJob(ctx, p)
}

// 500 event streams open at once on SQLite, over 8 running jobs whose leases are short: the
// heartbeats keep every lease (no lease loss in the engine's metrics) and the process's job
// query rate stays flat as the streams grow from 0 to 50 to 500 (the streams share one feed,
// which reads each watched job once a second). Prints both.
func TestFiveHundredStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 500 streams and measures for ~10s")
	}
	ctx := context.Background()
	raw, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	st := &countingStore{Full: raw}
	release := make(chan struct{})
	var running atomic.Int32
	pipe := &testfamily.Pipeline{N: 1, TTL: 3 * time.Second, Hook: func(ctx context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error) {
		running.Add(1)
		defer running.Add(-1)
		select {
		case <-release:
		case <-ctx.Done():
			return pipeline.Result{}, ctx.Err()
		}
		return pipeline.Done(nil), nil
	}}
	reg, _ := pipeline.NewRegistry(pipe)
	metrics := prometheus.NewRegistry()
	hub := api.NewHub()
	hub.MaxStreams = 1000 // one static token opens them all
	eng, err := engine.New(engine.Config{Store: st, Pipelines: reg, Owner: "load", Workers: 8, PollInterval: 200 * time.Millisecond,
		Events: hub, Metrics: engine.NewMetrics(metrics)})
	if err != nil {
		t.Fatal(err)
	}
	engCtx, stop := context.WithCancel(ctx)
	engDone := make(chan struct{})
	go func() { _ = eng.Run(engCtx); close(engDone) }()
	t.Cleanup(func() { close(release); stop(); <-engDone })
	srv := httptest.NewServer(api.New(api.Config{Store: st, Pipelines: reg, Hub: hub,
		Auth: api.StaticToken{Token: "load-token-0123456789abcdef0123456789", OrgID: "org1"}}))
	t.Cleanup(srv.Close)

	now := time.Now()
	if err := raw.CreateSpace(ctx, &store.Space{ID: "spc_l", OrgID: "org1", Name: "l", Provider: "local", Region: "local",
		SpaceType: "kubernetes", Status: "ready", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	const jobs = 8
	ids := make([]string, jobs)
	for i := range ids {
		ids[i] = fmt.Sprintf("job_load%02d", i)
		if _, err := raw.CreateJob(ctx, &store.CreateJobParams{Now: now, Job: &job.Job{ID: ids[i], OrgID: "org1", SpaceID: "spc_l",
			Kind: job.KindProvisioning, Family: testfamily.Family, Provider: "local", Mode: job.ModeCreate,
			Config: json.RawMessage(`{}`), Infra: json.RawMessage(`{}`), Status: job.StatusQueued, Phase: job.PhaseApply,
			Steps: []job.StepRecord{{Name: "step1", Status: job.StepPending}}, LeaseTTL: pipe.TTL, NextRunAt: now}}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "all jobs running", func() bool { return running.Load() == jobs })

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1000}}
	var opened sync.WaitGroup
	open := func(n int) {
		for i := range n {
			req, _ := http.NewRequest("GET", srv.URL+"/api/provisioning-jobs/"+ids[i%jobs]+"/events", nil)
			req.Header.Set("Authorization", "Bearer load-token-0123456789abcdef0123456789")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 200 {
				t.Fatalf("stream %d: %d", i, resp.StatusCode)
			}
			t.Cleanup(func() { resp.Body.Close() })
			opened.Add(1)
			go func() {
				sc := bufio.NewScanner(resp.Body)
				first := true
				for sc.Scan() {
					if first && strings.HasPrefix(sc.Text(), "data: ") {
						first = false
						opened.Done()
					}
				}
				if first {
					opened.Done()
				}
			}()
		}
		opened.Wait()
	}
	measure := func() float64 {
		const window = 3 * time.Second
		before, start := st.n.Load(), time.Now()
		<-time.After(window) // the measurement window
		return float64(st.n.Load()-before) / time.Since(start).Seconds()
	}
	type point struct {
		streams int
		rate    float64
	}
	var points []point
	total := 0
	for _, n := range []int{0, 50, 500} {
		open(n - total)
		total = n
		points = append(points, point{n, measure()})
	}
	losses := counterValue(t, metrics, "groundwork_lease_losses_total")
	for _, p := range points {
		t.Logf("streams open: %3d  job queries/s: %6.1f", p.streams, p.rate)
		fmt.Printf("streams open: %3d  job queries/s: %6.1f\n", p.streams, p.rate)
	}
	fmt.Printf("lease losses: %v  jobs still running: %d/%d\n", losses, running.Load(), jobs)
	if losses != 0 || running.Load() != jobs {
		t.Fatalf("lease losses %v, running %d/%d", losses, running.Load(), jobs)
	}
	// The feed adds one read per watched job per second once anything is watched; beyond that
	// the rate must not grow with the streams (one query per stream per second would add 450/s).
	if r50, r500 := points[1].rate, points[2].rate; r500 > r50*1.5+jobs {
		t.Fatalf("the query rate grew with the streams: %.1f/s at 50, %.1f/s at 500", r50, r500)
	}
	for _, id := range ids {
		j, err := raw.GetJob(ctx, &store.GetJobParams{OrgID: "org1", ID: id})
		if err != nil || j.Status != job.StatusRunning || j.LeaseOwner != "load" {
			t.Fatalf("%s: %v %+v", id, err, j)
		}
	}
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		<-time.After(10 * time.Millisecond)
	}
}

// counterValue reads a counter from the registry; a counter not registered fails the test.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
