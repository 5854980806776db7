// Package upgrade runs a rolling upgrade: replicas of an earlier build and of this one share
// one PostgreSQL while jobs run, and every job completes.
package upgrade

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
	"github.com/groundworkhq/groundwork/internal/testenv/pgtest"
	"github.com/groundworkhq/groundwork/internal/testenv/serverproc"
)

// oldCommit is the release the rolling upgrade starts from.
const oldCommit = "f71a546"

// The variables the old build's test/chaos server reads; this build's server reads the same.
const (
	envLog     = "GW_CHAOS_LOG"
	envTTL     = "GW_CHAOS_TTL"
	envStepMax = "GW_CHAOS_STEP_MAX"
)

func TestMain(m *testing.M) {
	serverproc.Main(m, configure)
}

// configure makes this build's server run the same five-step "test" family as the old build's
// chaos server, so that either may pick up a job the other started.
func configure(o *app.Options) error {
	ttl, _ := time.ParseDuration(os.Getenv(envTTL))
	stepMax, _ := time.ParseDuration(os.Getenv(envStepMax))
	pid := os.Getpid()
	pipe := &testfamily.Pipeline{N: 5, TTL: ttl, Hook: func(ctx context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error) {
		select {
		case <-time.After(time.Duration(rand.Int64N(int64(stepMax) + 1))):
		case <-ctx.Done():
			return pipeline.Result{}, ctx.Err()
		}
		return pipeline.Done(map[string]any{c.Step: pid}), nil
	}}
	o.Workers = 4
	o.Pipelines = []pipeline.Pipeline{pipe}
	return nil
}

func TestRollingUpgradePostgres(t *testing.T) {
	oldBin := oldServer(t, oldCommit)
	db := pgtest.NewDatabase(t)
	dir := t.TempDir()
	env := []string{envLog + "=" + filepath.Join(dir, "exec.log"), envTTL + "=3s", envStepMax + "=150ms"}
	start := func(bin string) *serverproc.Proc {
		return serverproc.Start(t, serverproc.Options{Binary: bin, DataDir: filepath.Join(dir, "data"), Database: db,
			Token: "gw_test_rolling_upgrade_0123456789abcdef", Env: env})
	}
	old1, old2 := start(oldBin), start(oldBin)
	oldPids := map[int]bool{old1.Pid(): true, old2.Pid(): true}

	var sp struct{ ID string }
	if st, raw := old1.Call(t, "POST", "/api/spaces", map[string]string{"name": "rolling", "provider": "local", "region": "local"}); st != 201 || json.Unmarshal(raw, &sp) != nil {
		t.Fatalf("create space: %d %s", st, raw)
	}
	ids := make([]string, 24)
	for i := range ids {
		var j struct{ ID string }
		if st, raw := old2.Call(t, "POST", "/api/provisioning-jobs", map[string]any{"spaceID": sp.ID, "kind": "test"}); st != 201 || json.Unmarshal(raw, &j) != nil {
			t.Fatalf("create job: %d %s", st, raw)
		}
		ids[i] = j.ID
	}
	// The new replica joins while the old ones work; then the old ones are replaced one at a
	// time, the first gracefully, the second killed, as a rollout (or a crash in it) would.
	waitFor(t, "the old replicas to start jobs", 30*time.Second, func() bool { return count(t, old1, "running", "completed") > 0 })
	newer := start("")
	old1.Stop()
	waitFor(t, "more jobs to complete", 60*time.Second, func() bool { return count(t, newer, "completed") >= len(ids)/3 })
	old2.Kill()
	waitFor(t, "every job to complete", 90*time.Second, func() bool { return count(t, newer, "completed") == len(ids) })
	// Each step records the pid that ran it: both builds must have done work.
	ranBy := map[string]int{}
	for _, id := range ids {
		var j struct {
			Status string
			Infra  map[string]int
			Steps  []struct{ Status string }
		}
		_, raw := newer.Call(t, "GET", "/api/provisioning-jobs/"+id, nil)
		if err := json.Unmarshal(raw, &j); err != nil {
			t.Fatal(err)
		}
		for i, s := range j.Steps {
			if s.Status != "done" {
				t.Errorf("job %s step %d is %s after the upgrade", id, i+1, s.Status)
			}
		}
		for _, pid := range j.Infra {
			switch {
			case pid == newer.Pid():
				ranBy["new"]++
			case oldPids[pid]:
				ranBy["old"]++
			}
		}
	}
	if ranBy["old"] == 0 || ranBy["new"] == 0 {
		t.Errorf("steps run by each build = %v; the upgrade did not mix builds", ranBy)
	}
}

// count returns how many of the org's jobs have one of statuses.
func count(t *testing.T, p *serverproc.Proc, statuses ...string) int {
	t.Helper()
	var page struct {
		Data []struct {
			Status string `json:"status"`
		} `json:"data"`
	}
	_, raw := p.Call(t, "GET", "/api/provisioning-jobs?limit=500", nil)
	if err := json.Unmarshal(raw, &page); err != nil {
		t.Fatalf("list jobs: %v %s", err, raw)
	}
	n := 0
	for _, j := range page.Data {
		for _, s := range statuses {
			if j.Status == s {
				n++
			}
		}
	}
	return n
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
