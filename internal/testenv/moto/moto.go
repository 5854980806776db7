// Package moto starts a real moto server (an emulator of the AWS APIs, PyPI moto[server]) on
// 127.0.0.1 for tests of the AWS provider. scripts/setup.d/40-moto.sh installs it into
// .cache/moto-venv; GROUNDWORK_MOTO_SERVER names another moto_server binary.
package moto

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// ErrUnavailable says that no moto_server binary was found.
var ErrUnavailable = errors.New("moto_server not found (run scripts/setup.d/40-moto.sh or set GROUNDWORK_MOTO_SERVER)")

// Server is one running moto_server process.
type Server struct {
	Endpoint string // http://127.0.0.1:PORT

	cmd    *exec.Cmd
	done   chan struct{}
	output *lockedBuffer
}

// Binary finds moto_server: GROUNDWORK_MOTO_SERVER, else .cache/moto-venv/bin/moto_server in the
// module root (found by walking up from the working directory to go.mod), else $PATH.
func Binary() (string, error) {
	if p := os.Getenv("GROUNDWORK_MOTO_SERVER"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("GROUNDWORK_MOTO_SERVER: %w", err)
		}
		return p, nil
	}
	if dir, err := os.Getwd(); err == nil {
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				p := filepath.Join(dir, ".cache", "moto-venv", "bin", "moto_server")
				if _, err := os.Stat(p); err == nil {
					return p, nil
				}
				break
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	if p, err := exec.LookPath("moto_server"); err == nil {
		return p, nil
	}
	return "", ErrUnavailable
}

// Start runs moto_server on a free loopback port and waits until it answers.
func Start(ctx context.Context) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	out := &lockedBuffer{}
	// Not CommandContext: the server must outlive the start-up context.
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = out, out
	// Real accounts have AWS managed policies (AmazonSSMManagedInstanceCore, ...); moto loads them
	// only when asked.
	cmd.Env = append(os.Environ(), "MOTO_IAM_LOAD_MANAGED_POLICIES=true")
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start moto_server: %w", err)
	}
	s := &Server{Endpoint: "http://127.0.0.1:" + strconv.Itoa(port), cmd: cmd, done: make(chan struct{}), output: out}
	go func() { _ = cmd.Wait(); close(s.done) }()
	if err := s.waitReady(ctx, 60*time.Second); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) waitReady(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint+"/moto-api/data.json", nil)
		if resp, err := client.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.done:
			return fmt.Errorf("moto_server exited during start: %s", s.output.String())
		case <-ctx.Done():
			return fmt.Errorf("moto_server not ready at %s: %w; output: %s", s.Endpoint, ctx.Err(), s.output.String())
		case <-tick.C:
		}
	}
}

// Stop ends the server process and waits for it.
func (s *Server) Stop() {
	if s == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
}

// Kill ends the process abruptly, as a crash would; tests of crash recovery use it with Restart.
func (s *Server) Kill() { s.Stop() }

// Output is what the server printed so far (useful in a failure message).
func (s *Server) Output() string { return s.output.String() }

// Harness holds the moto servers of a test package. Build it in TestMain with NewHarness and
// Close it after m.Run; tests call Endpoint(t), which skips (or fails under CI=true) when moto
// could not be started. A moto process serves one request at a time, so a package with many
// parallel tests gets a few servers (GROUNDWORK_MOTO_SERVERS, default 2) and each test is
// pinned to one of them by its name.
type Harness struct {
	servers []*Server
	err     error
}

// NewHarness starts the servers; a failure is kept and reported by Endpoint to each test.
func NewHarness() *Harness {
	n := 2
	if v, err := strconv.Atoi(os.Getenv("GROUNDWORK_MOTO_SERVERS")); err == nil && v > 0 {
		n = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	h := &Harness{servers: make([]*Server, n)}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { h.servers[i], errs[i] = Start(ctx) })
	}
	wg.Wait()
	if h.err = errors.Join(errs...); h.err != nil {
		h.Close()
	}
	return h
}

// Endpoint returns the server's URL or ends the test: t.Skip normally, t.Fatal under CI=true,
// because in CI a missing dependency is a broken build, not an optional test.
func (h *Harness) Endpoint(t testing.TB) string {
	t.Helper()
	if h == nil || h.err != nil {
		err := ErrUnavailable
		if h != nil {
			err = h.err
		}
		if os.Getenv("CI") == "true" {
			t.Fatalf("moto: %v", err)
		}
		t.Skipf("moto: %v", err)
	}
	return h.pick(t.Name()).Endpoint
}

// pick pins a test to one server, so that all its accounts live in one moto state.
func (h *Harness) pick(name string) *Server {
	f := fnv.New32a()
	_, _ = f.Write([]byte(name))
	return h.servers[int(f.Sum32()%uint32(len(h.servers)))]
}

// Close stops the servers.
func (h *Harness) Close() {
	if h == nil {
		return
	}
	for _, s := range h.servers {
		s.Stop()
	}
}

// Reset wipes every account's state in the server (moto's reset API). Tests that share a server
// prefer distinct account IDs instead; Reset is for a package that needs a clean slate.
func Reset(ctx context.Context, endpoint string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint+"/moto-api/reset", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("moto reset: %w", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("moto reset: status %d", resp.StatusCode)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	// Keep the tail only: moto logs every request.
	if b.buf.Len() > 64<<10 {
		tail := append([]byte(nil), b.buf.Bytes()[b.buf.Len()-16<<10:]...)
		b.buf.Reset()
		b.buf.Write(tail)
	}
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
