package chaos

import (
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/testenv/pgtest"
)

// 200 jobs of 5 steps on the SQLite default; the server is SIGKILLed at random moments at
// least 10 times and restarted each time. Every job completes, no committed step re-runs, and
// no job's steps ever run in two processes at once.
func TestCrashSafetySQLite(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "", 2*time.Second, 20*time.Millisecond)
	s := c.start()
	ids := s.submit(t, 200)
	kills := 0
	for kills < 10 {
		time.Sleep(time.Duration(50+rand.IntN(300)) * time.Millisecond)
		s = s.restart()
		kills++
	}
	waitFor(t, "all 200 jobs to complete", 3*time.Minute, func() bool { return s.countStatus(t)["completed"] == 200 })
	starts := c.verify(t, ids, 5, s.doneSteps(t))
	t.Logf("%d kills, %d step executions for %d steps (re-runs are steps in flight at a kill)", kills, starts, 200*5)
}

// Three replicas share one PostgreSQL; one is SIGKILLed mid-run. All 500 jobs complete, and
// none ran on two replicas at once.
func TestScaleOutPostgres(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDatabase(t)
	c := newCluster(t, db, 2*time.Second, 10*time.Millisecond)
	a := c.start()
	ids := a.submit(t, 500)
	b, victim := c.start(), c.start()
	waitFor(t, "the victim to run steps", time.Minute, func() bool {
		for _, e := range c.events(t) {
			if e.kind == "start" && e.pid == victim.Pid() {
				return true
			}
		}
		return false
	})
	victim.Kill()
	waitFor(t, "all 500 jobs to complete", 3*time.Minute, func() bool { return b.countStatus(t)["completed"] == 500 })
	c.verify(t, ids, 5, b.doneSteps(t))
	busy := map[int]int{}
	for _, e := range c.events(t) {
		if e.kind == "commit" {
			busy[e.pid]++
		}
	}
	if len(busy) < 2 {
		t.Fatalf("work was not shared across replicas: commits by pid %v", busy)
	}
	t.Logf("commits by replica: %v", busy)
}

// A replica frozen with SIGSTOP past its lease, then resumed, writes nothing: its in-flight
// step finishes in its own memory, but the fencing token refuses the checkpoint.
func TestFrozenReplicaIsFenced(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDatabase(t)
	c := newCluster(t, db, time.Second, 400*time.Millisecond)
	frozen := c.start()
	frozen.submit(t, 4)
	// Freeze the replica at a moment when it has a step in flight (a start with no end yet).
	var victimJob, victimStep string
	waitFor(t, "the replica to be frozen mid-step", time.Minute, func() bool {
		if err := frozen.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		open := map[string]bool{}
		for _, e := range c.events(t) {
			k := e.job + " " + e.step
			switch e.kind {
			case "start":
				open[k] = true
				victimJob, victimStep = e.job, e.step
			case "end", "abort":
				delete(open, k)
			}
		}
		if open[victimJob+" "+victimStep] {
			return true
		}
		_ = frozen.Signal(syscall.SIGCONT)
		return false
	})
	other := c.start()
	waitFor(t, "all jobs to complete on the other replica", 2*time.Minute, func() bool { return other.countStatus(t)["completed"] == 4 })
	stoppedAt := len(c.events(t))
	if err := frozen.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Give the resumed replica the chance to do the wrong thing: its step finishes (an "end"
	// line) and its heartbeat or checkpoint then meets a newer token.
	waitFor(t, "the resumed replica to finish its stale step", 30*time.Second, func() bool {
		for _, e := range c.events(t)[stoppedAt:] {
			if e.pid == frozen.Pid() && (e.kind == "end" || e.kind == "abort") {
				return true
			}
		}
		return false
	})
	// The freeze can fall between a checkpoint's commit in the database and its "commit" line,
	// which the resumed replica then writes late. Such a step was done before the other replica
	// took its job over, so the other never ran it; every step the other ran, the resumed
	// replica must not commit.
	ranByOther := map[string]bool{}
	for _, e := range c.events(t)[:stoppedAt] {
		if e.pid == other.Pid() && e.kind == "start" {
			ranByOther[e.job+" "+e.step] = true
		}
	}
	// The step in flight at the freeze had no checkpoint, so the other replica ran it: without
	// that, the check below would have nothing to look at.
	if !ranByOther[victimJob+" "+victimStep] {
		t.Fatalf("the other replica never ran %s %s, the step the frozen replica had in flight", victimJob, victimStep)
	}
	for _, e := range c.events(t)[stoppedAt:] {
		if e.pid == frozen.Pid() && e.kind == "commit" && ranByOther[e.job+" "+e.step] {
			t.Fatalf("the resumed replica committed %s %s", e.job, e.step)
		}
	}
	var j struct {
		Status string         `json:"status"`
		Infra  map[string]int `json:"infra"`
	}
	other.call(t, "GET", "/api/provisioning-jobs/"+victimJob, nil, &j)
	if j.Status != "completed" || j.Infra[victimStep] == frozen.Pid() {
		t.Fatalf("job %s after resume: %s, %s written by pid %d (frozen pid %d)", victimJob, j.Status, victimStep, j.Infra[victimStep], frozen.Pid())
	}
}
