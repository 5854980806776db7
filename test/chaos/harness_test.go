package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"

	"github.com/groundworkhq/groundwork/internal/testenv/serverproc"
)

// cluster is a set of child servers sharing one database and one execution log.
type cluster struct {
	t       *testing.T
	dir     string
	db      string
	logPath string
	ttl     time.Duration
	stepMax time.Duration

	mu   sync.Mutex
	logW *os.File
}

type server struct {
	*serverproc.Proc
}

func newCluster(t *testing.T, db string, ttl, stepMax time.Duration) *cluster {
	dir := t.TempDir()
	c := &cluster{t: t, dir: dir, db: db, logPath: filepath.Join(dir, "exec.log"), ttl: ttl, stepMax: stepMax}
	f, err := os.OpenFile(c.logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	c.logW = f
	t.Cleanup(func() { f.Close() })
	return c
}

func (c *cluster) start() *server {
	c.t.Helper()
	return &server{serverproc.Start(c.t, serverproc.Options{
		DataDir: filepath.Join(c.dir, "data"), Database: c.db,
		Env:    []string{envLog + "=" + c.logPath, envTTL + "=" + c.ttl.String(), envStepMax + "=" + c.stepMax.String()},
		Killed: c.killed,
	})}
}

// killed notes a SIGKILLed server in the execution log once the process is gone, so the
// checker knows that its open steps ended there.
func (c *cluster) killed(pid int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(c.logW, "killed - - %d %d\n", pid, time.Now().UnixNano())
}

// restart SIGKILLs the server and starts another on the same database.
func (s *server) restart() *server {
	return &server{s.Restart()}
}

func (s *server) call(t *testing.T, method, path string, body any, out any) int {
	t.Helper()
	st, raw := s.Call(t, method, path, body)
	if out != nil {
		_ = json.Unmarshal(raw, out)
	}
	return st
}

func (s *server) submit(t *testing.T, n int) []string {
	t.Helper()
	var sp struct{ ID string }
	if st := s.call(t, "POST", "/api/spaces", map[string]string{"name": "chaos", "provider": "local", "region": "local"}, &sp); st != 201 {
		t.Fatalf("create space: %d", st)
	}
	ids := make([]string, n)
	for i := range ids {
		var j struct{ ID string }
		if st := s.call(t, "POST", "/api/provisioning-jobs", map[string]any{"spaceID": sp.ID, "kind": "test"}, &j); st != 201 {
			t.Fatalf("create job: %d", st)
		}
		ids[i] = j.ID
	}
	return ids
}

// countStatus returns how many of the org's jobs have each status.
func (s *server) countStatus(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	cursor := ""
	for {
		var page struct {
			Data []struct {
				Status string `json:"status"`
			} `json:"data"`
			NextCursor string `json:"nextCursor"`
		}
		s.call(t, "GET", "/api/provisioning-jobs?limit=500&cursor="+cursor, nil, &page)
		for _, j := range page.Data {
			out[j.Status]++
		}
		if page.NextCursor == "" {
			return out
		}
		cursor = page.NextCursor
	}
}

// doneSteps reads every job's record and returns "jobID stepName" for each step it holds as
// done. The execution log's "commit" lines come from the server's publish after a commit, so
// a kill between the two loses the line, not the step; the record is the truth it falls back on.
func (s *server) doneSteps(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	cursor := ""
	for {
		var page struct {
			Data []struct {
				ID    string `json:"id"`
				Steps []struct {
					Name   string `json:"name"`
					Status string `json:"status"`
				} `json:"steps"`
			} `json:"data"`
			NextCursor string `json:"nextCursor"`
		}
		s.call(t, "GET", "/api/provisioning-jobs?limit=500&cursor="+cursor, nil, &page)
		for _, j := range page.Data {
			for _, st := range j.Steps {
				if st.Status == string(job.StepDone) {
					out[j.ID+" "+st.Name] = true
				}
			}
		}
		if page.NextCursor == "" {
			return out
		}
		cursor = page.NextCursor
	}
}

type event struct {
	kind, job, step string
	pid             int
	at              int64
}

func (c *cluster) events(t *testing.T) []event {
	t.Helper()
	f, err := os.Open(c.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e event
		if _, err := fmt.Sscanf(sc.Text(), "%s %s %s %d %d", &e.kind, &e.job, &e.step, &e.pid, &e.at); err != nil {
			t.Fatalf("bad log line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

// verify checks the execution log: (1) no step started again after its checkpoint committed;
// (2) no job had steps running in two processes at once; (3) every step of every job committed.
// frozen lists pids that were SIGSTOPped: their late steps are expected to overlap, and must
// not have committed.
func (c *cluster) verify(t *testing.T, ids []string, steps int, done map[string]bool) (starts int) {
	t.Helper()
	evs := c.events(t)
	committed := map[string]bool{}
	open := map[string]map[int]bool{} // job → pids with a step in flight
	for i, e := range evs {
		key := e.job + " " + e.step
		switch e.kind {
		case "start":
			starts++
			if committed[key] {
				t.Errorf("line %d: %s re-ran in pid %d after its checkpoint committed", i+1, key, e.pid)
			}
			if open[e.job] == nil {
				open[e.job] = map[int]bool{}
			}
			for pid := range open[e.job] {
				if pid != e.pid {
					t.Errorf("line %d: job %s ran in pid %d while pid %d was still running a step", i+1, e.job, e.pid, pid)
				}
			}
			open[e.job][e.pid] = true
		case "end", "abort":
			delete(open[e.job], e.pid)
		case "commit":
			committed[key] = true
		case "killed":
			for _, pids := range open {
				delete(pids, e.pid)
			}
		}
	}
	lost := 0
	for _, id := range ids {
		for s := 1; s <= steps; s++ {
			key := fmt.Sprintf("%s step%d", id, s)
			switch {
			case committed[key]:
			case done[key]:
				lost++ // committed, and the process was killed before it published the commit
			default:
				t.Errorf("%s never committed", key)
			}
		}
	}
	if lost > 0 {
		t.Logf("%d commits are on record but not in the log (a kill fell between commit and publish)", lost)
	}
	return starts
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
