package datastores

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/provider/local"
	"github.com/groundworkhq/groundwork/internal/provider/local/localtest"
	"github.com/groundworkhq/groundwork/internal/testenv/pgtest"
	"github.com/groundworkhq/groundwork/internal/testenv/serverproc"
)

// env is one Groundwork installation (data dir and job store) that child servers come and go
// on. It keeps every API answer and the passwords revealed, for the leak scan.
type env struct {
	t       *testing.T
	dir     string // holds the data dir and markers
	dataDir string
	db      string // "" for SQLite in the data dir

	mu       sync.Mutex
	answers  []string // every response body, except reveal answers (which carry the value by design)
	secrets  []string // every value revealed
	logPaths []string
}

func newEnv(t *testing.T, db string) *env {
	t.Helper()
	dir := localtest.DataDir(t)
	e := &env{t: t, dir: dir, dataDir: filepath.Join(dir, "data"), db: db}
	if err := os.MkdirAll(filepath.Join(dir, "markers"), 0o755); err != nil {
		t.Fatal(err)
	}
	return e
}

// onEachStore runs body in a parallel subtest per job store (SQLite in the data dir, and a
// fresh PostgreSQL database), each on a new installation with one server and a local space.
// When body returns, the server is stopped and everything it wrote, logged or answered (and
// the PostgreSQL job store's dump) is scanned for the passwords the test saw.
func onEachStore(t *testing.T, body func(t *testing.T, e *env, s *server, spaceID string)) {
	t.Helper()
	stores := map[string]func(t *testing.T) string{
		"sqlite":   func(*testing.T) string { return "" },
		"postgres": func(t *testing.T) string { return pgtest.NewDatabase(t) },
	}
	for name, db := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, db(t))
			s := e.start("")
			body(t, e, s, s.space(t))
			s.stop()
			e.scan(t)
			if e.db != "" {
				scanDump(t, e)
			}
		})
	}
}

// server is a child server of env as the tests drive it.
type server struct {
	proc *serverproc.Proc
	addr string // base URL
	e    *env
}

// start runs a child server; stopAt is "" or one of the points configure knows.
func (e *env) start(stopAt string) *server {
	e.t.Helper()
	p := serverproc.Start(e.t, serverproc.Options{
		DataDir: e.dataDir, Database: e.db, Token: bootstrapToken,
		Env: []string{envStopAt + "=" + stopAt, envMarkers + "=" + filepath.Join(e.dir, "markers")},
	})
	e.mu.Lock()
	e.logPaths = append(e.logPaths, p.LogPath())
	e.mu.Unlock()
	return &server{proc: p, addr: p.URL, e: e}
}

// kill sends SIGKILL and waits for the process to be gone.
func (s *server) kill() { s.proc.Kill() }

// stop shuts the server down gracefully.
func (s *server) stop() { s.proc.Stop() }

type reply = apptest.Reply

// firstField returns the first field named in a problem answer.
func firstField(r reply) string {
	if f := r.Fields(); len(f) > 0 {
		return f[0]
	}
	return ""
}

func (s *server) call(t *testing.T, method, path string, body any) reply {
	t.Helper()
	return s.callAs(t, s.proc.Token, method, path, body)
}

func (s *server) callAs(t *testing.T, tok, method, path string, body any) reply {
	t.Helper()
	status, raw := s.proc.CallAs(t, tok, method, path, body)
	if path != "/api/secrets/reveal" || status != http.StatusOK {
		s.e.mu.Lock()
		s.e.answers = append(s.e.answers, string(raw))
		s.e.mu.Unlock()
	}
	return reply{Status: status, Raw: raw}
}

// must calls and fails the test unless the answer has status want.
func (s *server) must(t *testing.T, want int, method, path string, body, out any) {
	t.Helper()
	r := s.call(t, method, path, body)
	if r.Status != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, r.Status, want, r.Raw)
	}
	if out != nil {
		r.Decode(t, out)
	}
}

// reveal answers the value behind ref and remembers it for the leak scan.
func (s *server) reveal(t *testing.T, ref string) string {
	t.Helper()
	var out struct {
		Value string `json:"value"`
	}
	s.must(t, http.StatusOK, "POST", "/api/secrets/reveal", map[string]string{"ref": ref}, &out)
	if out.Value == "" {
		t.Fatalf("reveal %s: empty value", ref)
	}
	s.e.mu.Lock()
	s.e.secrets = append(s.e.secrets, out.Value)
	s.e.mu.Unlock()
	return out.Value
}

type jobView struct {
	ID      string          `json:"id"`
	Status  string          `json:"status"`
	Version int64           `json:"version"`
	Infra   json.RawMessage `json:"infra"`
	Failure json.RawMessage `json:"failure"`
}

func (s *server) space(t *testing.T) string {
	t.Helper()
	var sp struct{ ID string }
	s.must(t, http.StatusCreated, "POST", "/api/spaces", map[string]string{"name": "local", "provider": "local", "region": "local"}, &sp)
	return sp.ID
}

// createJob submits a datastore job for e in the installed version (the catalog's default
// version is a cloud one, which the local provider refuses when another is installed).
func (s *server) createJob(t *testing.T, spaceID string, e datastore.Engine) string {
	t.Helper()
	var j jobView
	s.must(t, http.StatusCreated, "POST", "/api/provisioning-jobs", map[string]any{"spaceID": spaceID, "kind": "datastore",
		"config": map[string]any{"engine": e, "version": installed(t, e), "name": "shop"}}, &j)
	return j.ID
}

func installed(t *testing.T, e datastore.Engine) string {
	t.Helper()
	p, err := local.New(local.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	v, err := p.Installed(context.Background(), e)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// waitJob polls the job until it has status want, failing on any other settled status.
func (s *server) waitJob(t *testing.T, id, want string) jobView {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var j jobView
		s.must(t, http.StatusOK, "GET", "/api/provisioning-jobs/"+id, nil, &j)
		if j.Status == want {
			return j
		}
		if j.Status == "failed" || j.Status == "cancelled" {
			t.Fatalf("job %s is %s, want %s: %s", id, j.Status, want, j.Failure)
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %s, want %s", id, j.Status, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitMarkers waits for the child to reach its stop point for every job.
func (e *env) waitMarkers(t *testing.T, s *server, ids ...string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for _, id := range ids {
		for {
			if _, err := os.Stat(filepath.Join(e.dir, "markers", id)); err == nil {
				break
			}
			select {
			case <-s.proc.Done():
				t.Fatalf("server exited before reaching its stop point for %s", id)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("no stop point reached for %s", id)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// serverProcesses returns the pids of the top-level server processes of a job: processes
// whose working directory is inside the job's directory and whose parent's is not (PostgreSQL's
// backends are children of the postmaster and do not count).
func (e *env) serverProcesses(t *testing.T, jobID string) []int {
	t.Helper()
	root, err := filepath.EvalSymlinks(filepath.Join(e.dataDir, "datastores"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, jobID)
	in := map[int]int{} // pid → ppid
	entries, _ := os.ReadDir("/proc")
	for _, en := range entries {
		pid, err := strconv.Atoi(en.Name())
		if err != nil || !localtest.Alive(pid) {
			continue
		}
		cwd, err := os.Readlink("/proc/" + en.Name() + "/cwd")
		if err != nil || (cwd != dir && !strings.HasPrefix(cwd, dir+"/")) {
			continue
		}
		stat, err := os.ReadFile("/proc/" + en.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		f := strings.Fields(string(stat[i+2:])) // state, ppid, ...
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		in[pid] = ppid
	}
	var out []int
	for pid, ppid := range in {
		if _, child := in[ppid]; !child {
			out = append(out, pid)
		}
	}
	return out
}

// scan fails when any of the revealed passwords is in the data dir's files (the SQLite job
// store, the secret store, the servers' data), a log, or an API answer.
func (e *env) scan(t *testing.T) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.secrets) == 0 {
		t.Fatal("no secret was revealed; the scan would prove nothing")
	}
	localtest.AssertNotOnDisk(t, e.dataDir, e.secrets...)
	for _, p := range e.logPaths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range e.secrets {
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("log %s holds a generated password", p)
			}
		}
	}
	for _, a := range e.answers {
		for _, v := range e.secrets {
			if strings.Contains(a, v) {
				t.Errorf("an API answer holds a generated password: %s", a)
			}
		}
	}
}
