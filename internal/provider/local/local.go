// Package local is the embedded provider: it runs real PostgreSQL, MariaDB (for the mysql
// engine) and Redis server processes on the machine Groundwork runs on, one per datastore job,
// with their data under <dataDir>/datastores/<jobID>/. Servers are detached (their own session)
// so that they outlive Groundwork; a state file lets a restarted Groundwork find the same
// process again instead of starting a second one.
package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
)

// Options configure a Provider.
type Options struct {
	// DataDir is Groundwork's data dir; servers live under DataDir/datastores.
	DataDir string
	Logger  *slog.Logger
	// PostgresBinDir overrides the search of /usr/lib/postgresql/*/bin.
	PostgresBinDir string
	// PostgresUser is the unprivileged account PostgreSQL runs as when Groundwork is root
	// (PostgreSQL refuses to run as root). Default "postgres".
	PostgresUser string
}

// Provider manages local server processes. It is safe for concurrent use; a file lock per job
// also keeps two Groundwork processes sharing a data dir from starting one job's server twice.
type Provider struct {
	opts Options
	root string
	log  *slog.Logger

	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// New returns a Provider over opts.DataDir.
func New(opts Options) (*Provider, error) {
	if opts.DataDir == "" {
		return nil, errors.New("local provider: data dir is required")
	}
	abs, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("local provider: %w", err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.PostgresUser == "" {
		opts.PostgresUser = "postgres"
	}
	root := filepath.Join(abs, "datastores")
	if err := os.MkdirAll(root, 0o711); err != nil {
		return nil, fmt.Errorf("local provider: %w", err)
	}
	// Servers are recognised by their working directory as the kernel reports it, which has
	// symlinks resolved.
	if root, err = filepath.EvalSymlinks(root); err != nil {
		return nil, fmt.Errorf("local provider: %w", err)
	}
	return &Provider{opts: opts, root: root, log: opts.Logger, locks: map[string]*sync.Mutex{}}, nil
}

// ServerSpec asks for one job's server.
type ServerSpec struct {
	JobID   string
	Engine  datastore.Engine
	Version string // requested; empty accepts what is installed
	// AdminPassword is set on the admin account at first start. It is never written to disk
	// in clear: PostgreSQL reads it from a file removed right after initdb, MariaDB from a pipe,
	// Redis keeps only its SHA-256.
	AdminPassword string
}

// Server describes a running (or at least initialised) server.
type Server struct {
	JobID     string           `json:"jobID"`
	Engine    datastore.Engine `json:"engine"`
	Version   string           `json:"version"`
	Host      string           `json:"host"`
	Port      int              `json:"port"`
	AdminUser string           `json:"adminUser"`
	PID       int              `json:"pid"`
	Dir       string           `json:"dir"`
}

// Admin returns the admin connection for s with password pw.
func (s Server) Admin(pw string) datastore.Conn {
	return datastore.Conn{Engine: s.Engine, Host: s.Host, Port: s.Port, User: s.AdminUser, Password: pw}
}

type state struct {
	Engine      datastore.Engine `json:"engine"`
	Version     string           `json:"version"`
	Port        int              `json:"port"`
	PID         int              `json:"pid"`
	Initialized bool             `json:"initialized"`
	// AdminReady records that the admin password is known to work, so MariaDB's init SQL is
	// not needed on later starts.
	AdminReady bool `json:"adminReady"`
}

func adminUser(e datastore.Engine) string {
	switch e {
	case datastore.EnginePostgres:
		return "postgres"
	case datastore.EngineMySQL:
		return "root"
	}
	return "default"
}

func (p *Provider) jobDir(jobID string) (string, error) {
	// The job ID becomes a path element: refuse anything that could climb out of root.
	if jobID == "" || strings.ContainsAny(jobID, `/\`) || jobID == "." || jobID == ".." || strings.ContainsRune(jobID, 0) {
		return "", fault.System(fmt.Errorf("invalid job id %q", jobID))
	}
	return filepath.Join(p.root, jobID), nil
}

// lock serialises work on one job within this process and, through flock, across processes.
func (p *Provider) lock(jobID string) (unlock func(), err error) {
	p.mu.Lock()
	m, ok := p.locks[jobID]
	if !ok {
		m = &sync.Mutex{}
		p.locks[jobID] = m
	}
	p.mu.Unlock()
	m.Lock()
	f, err := os.OpenFile(filepath.Join(p.root, "."+jobID+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		m.Unlock()
		return nil, fmt.Errorf("lock %s: %w", jobID, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		m.Unlock()
		return nil, fmt.Errorf("lock %s: %w", jobID, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
		m.Unlock()
	}, nil
}

func loadState(dir string) (state, error) {
	var st state
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("read server state: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("decode server state: %w", err)
	}
	return st, nil
}

func saveState(dir string, st state) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode server state: %w", err)
	}
	tmp := filepath.Join(dir, ".state.json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write server state: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "state.json")); err != nil {
		return fmt.Errorf("write server state: %w", err)
	}
	return nil
}

func (p *Provider) server(jobID, dir string, st state) Server {
	return Server{JobID: jobID, Engine: st.Engine, Version: st.Version, Host: "127.0.0.1", Port: st.Port,
		AdminUser: adminUser(st.Engine), PID: st.PID, Dir: dir}
}

// Ensure makes sure the job's server exists and runs: initialising it on first call, reusing
// the running process when there is one (also one left by a previous Groundwork), starting it
// again on its data when it died. It does not wait for readiness; see Ready.
func (p *Provider) Ensure(ctx context.Context, spec ServerSpec) (Server, error) {
	dir, err := p.jobDir(spec.JobID)
	if err != nil {
		return Server{}, err
	}
	bins, err := p.resolve(ctx, spec.Engine)
	if err != nil {
		return Server{}, err
	}
	if err := checkVersion(spec.Engine, spec.Version, bins); err != nil {
		return Server{}, err
	}
	if err := datastore.CheckPassword(spec.AdminPassword); err != nil {
		return Server{}, fault.System(fmt.Errorf("admin password: %w", err))
	}
	unlock, err := p.lock(spec.JobID)
	if err != nil {
		return Server{}, err
	}
	defer unlock()

	st, err := loadState(dir)
	if err != nil {
		return Server{}, err
	}
	if st.Engine != "" && st.Engine != spec.Engine {
		return Server{}, fault.System(fmt.Errorf("job %s already has a %s server, not %s", spec.JobID, st.Engine, spec.Engine))
	}
	if st.Initialized {
		if pid := findServer(filepath.Join(dir, "data"), st.PID); pid > 0 {
			if pid != st.PID {
				st.PID = pid
				if err := saveState(dir, st); err != nil {
					return Server{}, err
				}
			}
			p.log.InfoContext(ctx, "reusing running datastore server", "job", spec.JobID, "engine", st.Engine, "pid", pid, "port", st.Port)
			return p.server(spec.JobID, dir, st), nil
		}
	} else {
		if st, err = p.initialise(ctx, dir, spec, bins); err != nil {
			return Server{}, err
		}
	}
	// A server that died may leave helpers that still hold its data dir (PostgreSQL's shared
	// memory); a new server started over them refuses to run.
	if !waitGone(ctx, filepath.Join(dir, "data"), 15*time.Second) {
		return Server{}, fault.Transientf("processes of the previous %s server of job %s have not exited yet", spec.Engine, spec.JobID)
	}
	pid, err := p.start(ctx, dir, spec, st, bins)
	if err != nil {
		return Server{}, err
	}
	st.PID = pid
	if err := saveState(dir, st); err != nil {
		return Server{}, err
	}
	p.log.InfoContext(ctx, "started datastore server", "job", spec.JobID, "engine", st.Engine, "version", st.Version, "pid", pid, "port", st.Port)
	return p.server(spec.JobID, dir, st), nil
}

// initialise lays out a fresh data dir. Leftovers of an interrupted earlier attempt are
// removed first: until state says initialised, nothing in there holds user data.
func (p *Provider) initialise(ctx context.Context, dir string, spec ServerSpec, bins binaries) (state, error) {
	if pid := findServer(filepath.Join(dir, "data"), 0); pid > 0 {
		return state{}, fault.Transientf("a server for job %s is running but its state file is incomplete (pid %d)", spec.JobID, pid)
	}
	if err := os.RemoveAll(dir); err != nil {
		return state{}, fmt.Errorf("clear %s: %w", dir, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		return state{}, fmt.Errorf("create %s: %w", dir, err)
	}
	port, err := freePort()
	if err != nil {
		return state{}, fault.Transient(fmt.Errorf("find a free port: %w", err))
	}
	st := state{Engine: spec.Engine, Version: bins.version, Port: port}
	switch spec.Engine {
	case datastore.EnginePostgres:
		err = p.initPostgres(ctx, dir, spec.AdminPassword, bins)
	case datastore.EngineMySQL:
		err = p.initMySQL(ctx, dir, bins)
	case datastore.EngineRedis:
		err = initRedis(dir, port, spec.AdminPassword)
	}
	if err != nil {
		return state{}, err
	}
	st.Initialized = true
	if err := saveState(dir, st); err != nil {
		return state{}, err
	}
	return st, nil
}

// freePort asks the kernel for an unused port on the loopback address.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Find reports the job's server as recorded, and whether its process is alive.
func (p *Provider) Find(ctx context.Context, jobID string) (Server, bool, error) {
	dir, err := p.jobDir(jobID)
	if err != nil {
		return Server{}, false, err
	}
	st, err := loadState(dir)
	if err != nil || !st.Initialized {
		return Server{}, false, err
	}
	pid := findServer(filepath.Join(dir, "data"), st.PID)
	st.PID = pid
	return p.server(jobID, dir, st), pid > 0, nil
}

// Ready reports whether the job's server answers its admin login. A server that is not yet
// accepting connections is not ready (no error); a dead process or refused credentials are
// errors.
func (p *Provider) Ready(ctx context.Context, jobID, adminPassword string) (bool, error) {
	s, alive, err := p.Find(ctx, jobID)
	if err != nil {
		return false, err
	}
	if s.Port == 0 {
		return false, fault.System(fmt.Errorf("job %s has no local server", jobID))
	}
	if !alive {
		return false, fault.Transientf("the %s server of job %s is not running; last log lines: %s", s.Engine, jobID, tailLog(s.Dir))
	}
	err = datastore.Check(ctx, s.Admin(adminPassword))
	if err != nil {
		if fault.ClassOf(err) == job.ClassTransient {
			return false, nil
		}
		return false, err
	}
	if s.Engine == datastore.EngineMySQL {
		unlock, err := p.lock(jobID)
		if err != nil {
			return false, err
		}
		defer unlock()
		st, err := loadState(s.Dir)
		if err != nil {
			return false, err
		}
		if !st.AdminReady {
			st.AdminReady = true
			if err := saveState(s.Dir, st); err != nil {
				return false, err
			}
		}
	}
	return true, nil
}

// Delete stops the job's server and removes its data. Deleting what is already gone succeeds.
func (p *Provider) Delete(ctx context.Context, jobID string) error {
	dir, err := p.jobDir(jobID)
	if err != nil {
		return err
	}
	unlock, err := p.lock(jobID)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := loadState(dir)
	if err != nil {
		return err
	}
	if err := stopServer(ctx, filepath.Join(dir, "data"), st); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	_ = os.Remove(mysqlSocket(dir))
	_ = os.Remove(filepath.Join(p.root, "."+jobID+".lock"))
	p.log.InfoContext(ctx, "deleted datastore server", "job", jobID, "engine", st.Engine)
	return nil
}
