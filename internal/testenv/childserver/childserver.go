// Package childserver runs a Groundwork server as a child process of a test (the test binary
// itself, in a server mode its TestMain picks from the environment), so that the test can
// SIGKILL it and start it again on the same data: what a crash does to a real server.
package childserver

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/client"
)

// Child is the server process, restarted on demand until the test ends.
type Child struct {
	t   testing.TB
	env []string
	cmd *exec.Cmd
	// Exited is closed when the current process has exited.
	Exited chan struct{}
}

// Start runs the test binary with env (its server mode) and stops it when the test ends.
func Start(t testing.TB, env []string) *Child {
	t.Helper()
	c := &Child{t: t, env: env}
	c.start()
	t.Cleanup(c.stop)
	return c
}

func (c *Child) start() {
	c.t.Helper()
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = c.env
	c.cmd.Stderr = c.t.Output()
	if err := c.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.Exited = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(c.cmd, c.Exited)
}

// RestartIfDead starts the server again if it died, reporting whether it had.
func (c *Child) RestartIfDead() bool {
	select {
	case <-c.Exited:
		c.start()
		return true
	default:
		return false
	}
}

// Kill SIGKILLs the server and waits for it to be gone.
func (c *Child) Kill() {
	c.t.Helper()
	if err := c.cmd.Process.Kill(); err != nil {
		c.t.Fatal(err)
	}
	<-c.Exited
}

// WaitUp waits until the server answers, restarting it as often as it dies meanwhile (the
// jobs it resumes may crash it again before it answers).
func (c *Child) WaitUp(cl *client.Client) {
	c.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		c.RestartIfDead()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := cl.Do(ctx, http.MethodGet, "/api/spaces", nil, nil)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("server did not come up: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *Child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.Exited:
	case <-time.After(20 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.Exited
	}
}

// FreeAddr is a loopback address nothing listens on now, for the child to listen on.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
