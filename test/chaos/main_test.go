// Package chaos runs Groundwork servers as child processes (this test binary, re-executed) with
// a test-only family whose steps log every execution, kills and freezes them, and checks from
// the log that no step re-ran after its checkpoint committed and that no job's steps ever ran in
// two processes at once.
package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
	"github.com/groundworkhq/groundwork/internal/testenv/serverproc"
)

// Environment of a child server, beside what serverproc passes.
const (
	envLog     = "GW_CHAOS_LOG"
	envTTL     = "GW_CHAOS_TTL"
	envStepMax = "GW_CHAOS_STEP_MAX"
)

func TestMain(m *testing.M) {
	serverproc.Main(m, configure)
}

// configure makes the child a server whose only family is the logging test family.
func configure(o *app.Options) error {
	logf, err := os.OpenFile(os.Getenv(envLog), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("execution log: %w", err)
	}
	pid := os.Getpid()
	var mu sync.Mutex
	write := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		// One write per line with O_APPEND: lines from concurrent processes never interleave,
		// and the file order is the order the writes happened in.
		fmt.Fprintf(logf, format+"\n", args...)
	}
	ttl, _ := time.ParseDuration(os.Getenv(envTTL))
	stepMax, _ := time.ParseDuration(os.Getenv(envStepMax))
	pipe := &testfamily.Pipeline{N: 5, TTL: ttl, Hook: func(ctx context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error) {
		write("start %s %s %d %d", c.JobID, c.Step, pid, time.Now().UnixNano())
		select {
		case <-time.After(time.Duration(rand.Int64N(int64(stepMax) + 1))):
		case <-ctx.Done():
			write("abort %s %s %d %d", c.JobID, c.Step, pid, time.Now().UnixNano())
			return pipeline.Result{}, ctx.Err()
		}
		write("end %s %s %d %d", c.JobID, c.Step, pid, time.Now().UnixNano())
		return pipeline.Done(map[string]any{c.Step: pid}), nil
	}}
	committed := map[string]bool{}
	var cmu sync.Mutex
	publish := func(j *job.Job) {
		cmu.Lock()
		defer cmu.Unlock()
		for _, s := range j.Steps {
			k := j.ID + " " + s.Name
			if s.Status == job.StepDone && !committed[k] {
				committed[k] = true
				write("commit %s %s %d %d", j.ID, s.Name, pid, time.Now().UnixNano())
			}
		}
	}
	o.Workers = 4
	o.Owner = "chaos-" + strconv.Itoa(pid)
	o.Logger = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	o.Pipelines, o.Publish = []pipeline.Pipeline{pipe}, publish
	return nil
}
