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
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"testing"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
	"github.com/groundworkhq/groundwork/internal/testenv/pgtest"
)

// Environment of a child server.
const (
	envServe    = "GW_CHAOS_SERVE"
	envLog      = "GW_CHAOS_LOG"
	envAddrFile = "GW_CHAOS_ADDR_FILE"
	envDB       = "GW_CHAOS_DB"
	envDataDir  = "GW_CHAOS_DATA_DIR"
	envTTL      = "GW_CHAOS_TTL"
	envStepMax  = "GW_CHAOS_STEP_MAX"
)

const bootstrapToken = "chaos-token"

func TestMain(m *testing.M) {
	if os.Getenv(envServe) == "1" {
		os.Exit(serve())
	}
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// serve is the child: a real server whose only family is the logging test family.
func serve() int {
	logf, err := os.OpenFile(os.Getenv(envLog), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
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
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err = app.Run(ctx, app.Options{
		Addr: "127.0.0.1:0", Database: os.Getenv(envDB), DataDir: os.Getenv(envDataDir),
		BootstrapToken: bootstrapToken, Workers: 4, PollInterval: 50 * time.Millisecond,
		Owner:     "chaos-" + strconv.Itoa(pid),
		Logger:    slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Pipelines: []pipeline.Pipeline{pipe}, Publish: publish,
		Listening: func(addr string) {
			_ = os.WriteFile(os.Getenv(envAddrFile)+".tmp", []byte(addr), 0o644)
			_ = os.Rename(os.Getenv(envAddrFile)+".tmp", os.Getenv(envAddrFile))
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	return 0
}
