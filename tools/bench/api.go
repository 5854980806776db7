package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
	"github.com/groundworkhq/groundwork/internal/store"
)

// APIPoint is one endpoint held at one request rate.
type APIPoint struct {
	Endpoint string  `json:"endpoint"`
	Rate     int     `json:"requestsPerSec"`
	Duration string  `json:"duration"`
	Requests int     `json:"requests"`
	Errors   int     `json:"errors"`
	P50ms    float64 `json:"p50ms"`
	P99ms    float64 `json:"p99ms"`
}

// apiLoad starts the real server (app.Run) on the database under test, with the no-op
// pipeline as its only family, keeps its engine busy with a stream of 5-step jobs, and holds
// each endpoint at each rate with open-loop requests from this process over loopback: a
// request leaves on its tick whether or not earlier ones have answered, so a slow server shows
// as latency, not as a lower rate.
func apiLoad(ctx context.Context, g *gwRunner, spec string, rates []int, d time.Duration) ([]APIPoint, error) {
	if err := g.clear(ctx); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "gw-bench-api-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	p := &testfamily.Pipeline{N: 5, Hook: func(context.Context, testfamily.Call, *pipeline.Run) (pipeline.Result, error) {
		return pipeline.Done(nil), nil
	}}
	// The ledger the pages are read from: 10,000 finished jobs in the server's org.
	finished := p.NewJob(newID(), time.Now())
	finished.OrgID = app.DefaultOrg
	if err := g.seed(ctx, finished, 10000, job.StatusCompleted, time.Now().Add(-time.Hour), time.Second); err != nil {
		return nil, err
	}
	oneID := finished.ID + "_5000"
	const token = "bench-bootstrap-token-0123456789abcdef"
	sctx, stop := context.WithCancel(ctx)
	addrc := make(chan string, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- app.Run(sctx, app.Options{Addr: "127.0.0.1:0", Database: spec, DataDir: dir, BootstrapToken: token,
			Workers: 8, Owner: "bench-api", Logger: slog.New(slog.DiscardHandler), Out: io.Discard,
			Pipelines: []pipeline.Pipeline{p}, Listening: func(a string) { addrc <- a }})
	}()
	defer func() { stop(); <-errc }()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-errc:
		return nil, fmt.Errorf("server: %w", err)
	case <-time.After(60 * time.Second):
		return nil, fmt.Errorf("server did not start in 60s")
	}
	// The engine works while the API is measured: 100 new 5-step jobs a second.
	feedCtx, stopFeed := context.WithCancel(ctx)
	var fed sync.WaitGroup
	fed.Add(1)
	go func() {
		defer fed.Done()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-feedCtx.Done():
				return
			case <-t.C:
			}
			j := p.NewJob(newID(), time.Now())
			j.OrgID = app.DefaultOrg
			_, _ = g.s.CreateJob(feedCtx, &store.CreateJobParams{Job: j, Now: time.Now()})
		}
	}()
	defer func() { stopFeed(); fed.Wait() }()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1000, MaxConnsPerHost: 0}}
	endpoints := []struct{ name, path string }{
		{"GET /api/provisioning-jobs/{id}", "/api/provisioning-jobs/" + oneID},
		{"GET /api/provisioning-jobs?limit=50", "/api/provisioning-jobs?limit=50"},
	}
	// Check both answer before timing them.
	for _, e := range endpoints {
		if code, err := get(client, "http://"+addr+e.path, token); err != nil || code != http.StatusOK {
			return nil, fmt.Errorf("%s: %d %v", e.name, code, err)
		}
	}
	var out []APIPoint
	for _, rate := range rates {
		for _, e := range endpoints {
			out = append(out, openLoop(client, "http://"+addr+e.path, token, e.name, rate, d))
		}
	}
	return out, nil
}

func get(c *http.Client, url, token string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func openLoop(c *http.Client, url, token, name string, rate int, d time.Duration) APIPoint {
	var (
		mu   sync.Mutex
		lat  []time.Duration
		errs atomic.Int64
		wg   sync.WaitGroup
	)
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	n := int(d / interval)
	for i := 0; i < n; i++ {
		// Each request is due at its own tick from the start, so a late tick is not absorbed.
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			code, err := get(c, url, token)
			el := time.Since(t0)
			if err != nil || code != http.StatusOK {
				errs.Add(1)
				return
			}
			mu.Lock()
			lat = append(lat, el)
			mu.Unlock()
		}()
	}
	wg.Wait()
	l := newLatency(lat)
	return APIPoint{Endpoint: name, Rate: rate, Duration: d.String(), Requests: n, Errors: int(errs.Load()), P50ms: l.P50ms, P99ms: l.P99ms}
}
