package protocoltest

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// BuildExample builds examples/provisioner (its own module) into a temporary directory and
// returns the binary's path. Without a Go toolchain the test is skipped, or fails when CI=true.
func BuildExample(t testing.TB) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("go toolchain not found: %v", err)
		}
		t.Skipf("go toolchain not found: %v", err)
	}
	_, file, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(file), "..", "..", "..", "examples", "provisioner")
	bin := filepath.Join(t.TempDir(), "provisioner")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", bin, ".")
	cmd.Dir = src
	// The example is its own module; GOWORK=off keeps a developer's go.work out of it.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build example provisioner: %v\n%s", err, out)
	}
	return bin
}

// ExampleProcess is a running example provisioner. Its state survives Kill and Start.
type ExampleProcess struct {
	bin, dir string
	delay    time.Duration
	t        testing.TB

	mu   sync.Mutex
	cmd  *exec.Cmd
	addr string // host:port, kept across restarts so that registrations stay valid
}

// StartExample starts the example provisioner with its buckets and state under a fresh
// temporary directory; the work of an apply takes delay.
func StartExample(t testing.TB, bin string, delay time.Duration) *ExampleProcess {
	t.Helper()
	p := &ExampleProcess{bin: bin, dir: t.TempDir(), delay: delay, t: t, addr: "127.0.0.1:0"}
	p.Start()
	t.Cleanup(p.Kill)
	return p
}

// URL is the provisioner's base URL.
func (p *ExampleProcess) URL() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return "http://" + p.addr
}

// BucketDir is where the bucket of application lives.
func (p *ExampleProcess) BucketDir(application string) string {
	return filepath.Join(p.dir, "buckets", application)
}

// Start starts the process (again) on the same address and state, and waits until it listens.
func (p *ExampleProcess) Start() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd := exec.Command(p.bin, "-addr", p.addr, "-root", filepath.Join(p.dir, "buckets"),
		"-state", filepath.Join(p.dir, "state.json"), "-work-delay", p.delay.String())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("start example provisioner: %v", err)
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if after, ok := strings.CutPrefix(sc.Text(), "listening on http://"); ok {
				lines <- after
			}
		}
	}()
	select {
	case addr := <-lines:
		p.addr, p.cmd = addr, cmd
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		p.t.Fatal("example provisioner did not report its address within 30s")
	}
}

// Kill stops the process at once (SIGKILL), as a crash would.
func (p *ExampleProcess) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	p.cmd = nil
}
