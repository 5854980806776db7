package chaos

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
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
	n    int
	logW *os.File
}

type server struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{}
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
	c.mu.Lock()
	c.n++
	n := c.n
	c.mu.Unlock()
	addrFile := filepath.Join(c.dir, fmt.Sprintf("addr-%d", n))
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envServe+"=1", envLog+"="+c.logPath, envAddrFile+"="+addrFile,
		envDB+"="+c.db, envDataDir+"="+filepath.Join(c.dir, "data"), envTTL+"="+c.ttl.String(),
		envStepMax+"="+c.stepMax.String())
	stderr, _ := os.Create(filepath.Join(c.dir, fmt.Sprintf("server-%d.log", n)))
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	s := &server{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); stderr.Close(); close(s.done) }()
	c.t.Cleanup(func() { s.kill(c) })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(addrFile); err == nil && len(b) > 0 {
			s.addr = "http://" + string(b)
			return s
		}
		select {
		case <-s.done:
			out, _ := os.ReadFile(filepath.Join(c.dir, fmt.Sprintf("server-%d.log", n)))
			c.t.Fatalf("server exited at start: %s", out)
		default:
		}
		if time.Now().After(deadline) {
			c.t.Fatal("server did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill sends SIGKILL and notes it in the execution log once the process is gone, so the
// checker knows that its open steps ended there.
func (s *server) kill(c *cluster) {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	_ = s.cmd.Process.Kill()
	<-s.done
	c.mu.Lock()
	fmt.Fprintf(c.logW, "killed - - %d %d\n", s.cmd.Process.Pid, time.Now().UnixNano())
	c.mu.Unlock()
}

func (s *server) call(t *testing.T, method, path string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.addr+path, rd)
	req.Header.Set("Authorization", "Bearer "+bootstrapToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
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
func (c *cluster) verify(t *testing.T, ids []string, steps int) (starts int) {
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
	for _, id := range ids {
		for s := 1; s <= steps; s++ {
			if !committed[fmt.Sprintf("%s step%d", id, s)] {
				t.Errorf("%s step%d never committed", id, s)
			}
		}
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
