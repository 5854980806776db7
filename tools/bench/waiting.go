package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
)

// WaitingResult is the waiting case: many jobs each polling a resource that is not ready.
type WaitingResult struct {
	Jobs             int     `json:"jobs"`
	Workers          int     `json:"workers"`
	Poll             string  `json:"poll"`
	Measured         string  `json:"measured"`
	Polls            int     `json:"polls"`
	PollsPerSec      float64 `json:"pollsPerSec"`
	RSSMB            float64 `json:"rssMB"`
	CPUPercent       float64 `json:"cpuPercentOfACore"`
	ServerCPUPercent float64 `json:"serverCPUPercentOfACore,omitempty"`
	LagP50ms         float64 `json:"lagP50ms"`
	LagP99ms         float64 `json:"lagP99ms"`
}

const pollEvery = 10 * time.Second

// waiting seeds n jobs whose one step waits on a resource polled every 10s, due times spread
// over the first 10s, runs the engine with 4 workers, and after a warm-up of one poll
// interval measures, for d: this process's CPU and RSS, the PostgreSQL server's CPU when the
// bench started it, and each poll's lag behind the time it was due.
func (g *gwRunner) waiting(ctx context.Context, n int, d time.Duration, serverPID int) (*WaitingResult, error) {
	if err := g.clear(ctx); err != nil {
		return nil, err
	}
	base := time.Now().Add(time.Second)
	var (
		mu        sync.Mutex
		due       = map[string]time.Time{}
		lag       []time.Duration
		measuring bool
	)
	p := &testfamily.Pipeline{N: 1, Hook: func(_ context.Context, c testfamily.Call, _ *pipeline.Run) (pipeline.Result, error) {
		now := time.Now()
		mu.Lock()
		at, ok := due[c.JobID]
		if !ok {
			// A seeded copy's first due time follows from its number (see seed).
			i, _ := strconv.Atoi(c.JobID[strings.LastIndexByte(c.JobID, '_')+1:])
			at = base.Add(time.Duration(i%10000) * pollEvery / 10000)
		}
		if measuring {
			lag = append(lag, max(now.Sub(at), 0))
		}
		// The engine sets the next run from its clock after the step returns, a little later
		// than this: the lag measured next time is, if anything, overstated.
		due[c.JobID] = now.Add(pollEvery)
		mu.Unlock()
		return pipeline.Wait(pollEvery, "not ready yet", nil), nil
	}}
	if err := g.seed(ctx, p.NewJob(newID(), base), n, "", base, pollEvery); err != nil {
		return nil, err
	}
	runtime.GC()
	stop, err := g.start(p, 4, nil, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer stop()
	// The warm-up: every job has been polled once, and the first round has been worked off
	// (its last polls may run late: the engine starts cold, with no measure of how long a
	// step holds a worker to claim ahead by). Measuring from a fixed 11 s counted the tail of
	// that first round as lag.
	warm := time.Now().Add(time.Second + pollEvery)
	for deadline := warm.Add(5 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		mu.Lock()
		polled := len(due)
		mu.Unlock()
		if polled >= n && !time.Now().Before(warm) {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("waiting: %d of %d jobs polled once in the warm-up", polled, n)
		}
	}
	mu.Lock()
	measuring = true
	mu.Unlock()
	cpu0, srv0, t0 := selfCPU(), serverCPU(serverPID), time.Now()
	var peakRSS float64
	for end := t0.Add(d); time.Now().Before(end); time.Sleep(time.Second) {
		peakRSS = max(peakRSS, rssMB())
	}
	cpu1, srv1, elapsed := selfCPU(), serverCPU(serverPID), time.Since(t0)
	mu.Lock()
	measuring = false
	got := append([]time.Duration(nil), lag...)
	mu.Unlock()
	l := newLatency(got)
	r := &WaitingResult{Jobs: n, Workers: 4, Poll: pollEvery.String(), Measured: elapsed.Round(time.Second).String(),
		Polls: len(got), PollsPerSec: float64(len(got)) / elapsed.Seconds(), RSSMB: peakRSS,
		CPUPercent: 100 * (cpu1 - cpu0).Seconds() / elapsed.Seconds(), LagP50ms: l.P50ms, LagP99ms: l.P99ms}
	if serverPID > 0 {
		r.ServerCPUPercent = 100 * (srv1 - srv0).Seconds() / elapsed.Seconds()
	}
	if len(got) == 0 {
		return r, fmt.Errorf("waiting: no poll ran in %s", elapsed)
	}
	return r, nil
}

// selfCPU is the CPU time (user and system) this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rssMB is this process's resident set size now.
func rssMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// serverCPU is the CPU time used by the PostgreSQL server pid and its children (the backends
// serving this bench), 0 when pid is 0.
func serverCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var ticks int64
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields after the command (which may hold spaces) start after the last ')'.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		if p != pid && ppid != pid {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += ut + st
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ is 100 on Linux
}
