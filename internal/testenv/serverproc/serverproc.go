// Package serverproc runs a Groundwork server as a child process, for end-to-end tests that
// SIGKILL, freeze, restart or stop it: the test binary re-executes itself, and the package's
// TestMain (Main) makes the child a server (app.Run) instead of running tests. An in-process
// server (apptest) cannot be killed mid-write; a child can, which is what crash tests prove.
package serverproc

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/testenv/pgtest"
)

// What the parent tells a child; the child's configure function reads its own variables (Env).
const (
	envServe    = "GW_SERVERPROC_SERVE"
	envAddrFile = "GW_SERVERPROC_ADDR_FILE"
	envDataDir  = "GW_SERVERPROC_DATA_DIR"
	envDatabase = "GW_SERVERPROC_DATABASE"
	envToken    = "GW_SERVERPROC_TOKEN"
)

// startTimeout bounds how long Start waits for a child to listen: a cold SQLite or PostgreSQL
// migration on a loaded 2-core CI machine takes seconds, not tens of them.
const startTimeout = 30 * time.Second

// stopTimeout bounds a graceful Stop before it falls back to SIGKILL.
const stopTimeout = 30 * time.Second

// Main is the TestMain of a package whose tests start child servers. In a child it runs the
// server and exits when it stops; configure completes the options (workers, families, logger)
// from what Start was given, and may read the variables of Options.Env. In the parent it runs
// the tests, then stops the PostgreSQL that pgtest may have started for them.
func Main(m *testing.M, configure func(*app.Options) error) {
	if os.Getenv(envServe) == "1" {
		os.Exit(serve(configure))
	}
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// serve is the child. Its stdout and stderr are the log the parent keeps.
func serve(configure func(*app.Options) error) int {
	o := app.Options{
		DataDir: os.Getenv(envDataDir), Database: os.Getenv(envDatabase), BootstrapToken: os.Getenv(envToken),
		// The tests wait on jobs; a fast poll keeps them short.
		PollInterval: 50 * time.Millisecond,
		Logger:       slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if configure != nil {
		if err := configure(&o); err != nil {
			fmt.Fprintln(os.Stderr, "serve:", err)
			return 2
		}
	}
	// A random port, told to the parent through a file it polls; the rename makes the address
	// appear whole or not at all.
	o.Addr = "127.0.0.1:0"
	addrFile := os.Getenv(envAddrFile)
	o.Listening = func(addr string) {
		if err := os.WriteFile(addrFile+".tmp", []byte(addr), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "serve: write address:", err)
			return
		}
		if err := os.Rename(addrFile+".tmp", addrFile); err != nil {
			fmt.Fprintln(os.Stderr, "serve: write address:", err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := app.Run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	return 0
}

// Options say how to start a child server.
type Options struct {
	// DataDir is the server's data dir; "" makes a fresh one. Servers started one after the
	// other on the same DataDir (and Database) are one installation that restarts.
	DataDir string
	// Database is the job store's URL; "" is SQLite in DataDir.
	Database string
	// Token is the bootstrap admin token; "" makes a random one.
	Token string
	// Env is added to the child's environment ("KEY=value"), for Main's configure to read.
	Env []string
	// LogFile receives the child's stdout and stderr, appended to, so a restart on the same
	// Options continues it; "" is a fresh file per process.
	LogFile string
	// Killed, if set, is called with the pid once Kill has seen the process gone.
	Killed func(pid int)
	// Binary is the test binary to run as the server; "" is this one. Upgrade tests run a
	// test binary built from an earlier commit, whose Main speaks the same variables.
	Binary string
}

// Proc is a running child server.
type Proc struct {
	// URL is the base URL, e.g. http://127.0.0.1:41234.
	URL string
	// Token is the bootstrap admin token.
	Token string

	t    testing.TB
	opts Options
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// Start runs a child server and returns once it listens. It fails the test when the child
// exits first or does not listen within 30s, showing the child's log. The child is killed
// when the test ends, if it has not been before.
func Start(t testing.TB, o Options) *Proc {
	t.Helper()
	if o.DataDir == "" {
		o.DataDir = t.TempDir()
	}
	if o.Token == "" {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		o.Token = "gw_test_" + hex.EncodeToString(b)
	}
	dir := t.TempDir()
	addrFile := filepath.Join(dir, "addr")
	p := &Proc{Token: o.Token, t: t, opts: o, done: make(chan struct{}), log: o.LogFile}
	if p.log == "" {
		p.log = filepath.Join(dir, "server.log")
	}
	logf, err := os.OpenFile(p.log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatalf("server log: %v", err)
	}
	bin := o.Binary
	if bin == "" {
		bin = os.Args[0]
	}
	p.cmd = exec.Command(bin, "-test.run=^$")
	p.cmd.Env = append(os.Environ(), o.Env...)
	p.cmd.Env = append(p.cmd.Env, envServe+"=1", envAddrFile+"="+addrFile, envDataDir+"="+o.DataDir,
		envDatabase+"="+o.Database, envToken+"="+o.Token)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start server: %v", err)
	}
	go func() { _ = p.cmd.Wait(); logf.Close(); close(p.done) }()
	t.Cleanup(p.Kill)

	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(addrFile); err == nil && len(b) > 0 {
			p.URL = "http://" + string(b)
			return p
		}
		select {
		case <-p.done:
			t.Fatalf("server exited at start: %s", p.Log())
		case <-deadline.C:
			t.Fatalf("server did not listen within %s:\n%s", startTimeout, p.Log())
		case <-tick.C:
		}
	}
}

// Pid is the child's process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the child (SIGSTOP and SIGCONT freeze and resume it).
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Done is closed once the child has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Kill sends SIGKILL and returns once the process is gone, then tells Options.Killed. A
// process already gone is left as it is.
func (p *Proc) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	// A test may have frozen it with SIGSTOP.
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Kill()
	<-p.done
	if p.opts.Killed != nil {
		p.opts.Killed(p.Pid())
	}
}

// Stop shuts the server down with SIGTERM, and kills it if it has not exited within 30s.
func (p *Proc) Stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		p.Kill()
	}
}

// Restart kills the server and starts another on the same options: the same data dir,
// database and token, a new port.
func (p *Proc) Restart() *Proc {
	p.t.Helper()
	p.Kill()
	return Start(p.t, p.opts)
}

// LogPath is the file holding the child's stdout and stderr.
func (p *Proc) LogPath() string { return p.log }

// Log is what the child has written so far, for failure messages.
func (p *Proc) Log() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return string(b)
}

// Call sends body (JSON, when not nil) to the server as the bootstrap admin and returns the
// answer's status and body. A request that gets no answer fails the test.
func (p *Proc) Call(t testing.TB, method, path string, body any) (int, []byte) {
	t.Helper()
	return p.CallAs(t, p.Token, method, path, body)
}

// CallAs is Call with token.
func (p *Proc) CallAs(t testing.TB, token, method, path string, body any) (int, []byte) {
	t.Helper()
	return CallURL(t, p.URL, token, method, path, body)
}

// CallURL is CallAs for any Groundwork server at baseURL, a child or one in-process (apptest),
// so that tests driving both kinds talk to them the same way.
func CallURL(t testing.TB, baseURL, token, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, baseURL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read answer: %v", method, path, err)
	}
	return resp.StatusCode, raw
}
