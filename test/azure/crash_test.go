package azure

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/client"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/provider/azure/azurefake"
)

// Environment of a child server.
const (
	envServe   = "GW_AZURE_SERVE"
	envDataDir = "GW_AZURE_DATA_DIR"
	envAddr    = "GW_AZURE_ADDR"
	envCloud   = "GW_AZURE_CLOUD"    // the parent's azurefake URL
	envCrashAt = "GW_AZURE_CRASH_AT" // step#n,...: SIGKILL after the n-th Do of the step
	envMarkers = "GW_AZURE_MARKER_DIR"
)

const childToken = "gw_test_azure_crash_0123456789abcdef"

// serve is the child: a real server on the parent's fake subscription, SIGKILLed after the
// listed calls of its steps, after the cloud calls and before the engine records them.
func serve() int {
	crashAt := map[string]bool{}
	for _, s := range strings.Split(os.Getenv(envCrashAt), ",") {
		crashAt[s] = true
	}
	markers := os.Getenv(envMarkers)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	afterDo := func(_ context.Context, j *job.Job, step string) {
		// Count this step's calls on disk, so that the count survives the crashes.
		counter := filepath.Join(markers, j.ID+"."+step+".calls")
		b, _ := os.ReadFile(counter)
		n, _ := strconv.Atoi(string(b))
		n++
		_ = os.WriteFile(counter, []byte(strconv.Itoa(n)), 0o644)
		if !crashAt[fmt.Sprintf("%s#%d", step, n)] {
			return
		}
		f, err := os.Create(filepath.Join(markers, fmt.Sprintf("%s.%s.%d.crash", j.ID, step, n)))
		if err == nil {
			_ = f.Sync()
			_ = f.Close()
		}
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way; never return to the checkpoint
	}
	err := app.Run(ctx, app.Options{
		Addr: os.Getenv(envAddr), DataDir: os.Getenv(envDataDir), BootstrapToken: childToken,
		PollInterval: 50 * time.Millisecond, ShutdownGrace: time.Second,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		AWS:    app.AWSOptions{Poll: 50 * time.Millisecond, LeaseTTL: time.Second, AfterDo: afterDo},
		Azure:  app.AzureOptions{Transport: azurefake.Transport(os.Getenv(envCloud))},
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// child is the server process, restarted whenever it dies, until the test ends.
type child struct {
	t      *testing.T
	env    []string
	cmd    *exec.Cmd
	exited chan struct{}
}

func (c *child) start() {
	c.t.Helper()
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = c.env
	c.cmd.Stderr = c.t.Output()
	if err := c.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.exited = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(c.cmd, c.exited)
}

func (c *child) restartIfDead() bool {
	select {
	case <-c.exited:
		c.start()
		return true
	default:
		return false
	}
}

func (c *child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(20 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitUp(t *testing.T, cl *client.Client) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := cl.Do(ctx, http.MethodGet, "/api/spaces", nil, nil)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not come up: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCrashMidPipelineResumes SIGKILLs the server during a network job: right after the
// first call of the network step (an operation started, its token not yet recorded), after a
// later one (tokens recorded, operations in flight), and after the step that finishes the job.
// Restarted each time, the server completes the job with exactly one PUT of each resource,
// polls the operations it had recorded, and then tears it all down.
func TestCrashMidPipelineResumes(t *testing.T) {
	t.Parallel()
	cloud := azurefake.New(t)
	crashes := []string{"create_network#1", "create_network#3", "create_network#7", "finalize#1"}
	markers := t.TempDir()
	addr := freeAddr(t)
	c := &child{t: t}
	c.env = append(os.Environ(), envServe+"=1", envDataDir+"="+t.TempDir(), envAddr+"="+addr, envCloud+"="+cloud.URL,
		envCrashAt+"="+strings.Join(crashes, ","), envMarkers+"="+markers)
	c.start()
	t.Cleanup(c.stop)
	cl := client.New("http://"+addr, childToken)
	waitUp(t, cl)
	e := &env{cloud: cloud, space: newSpace(t, cl, cloud.URL, nil)}

	var j job.Job
	if err := cl.Do(testCtx(t), http.MethodPost, "/api/provisioning-jobs",
		map[string]any{"spaceID": e.space.ID, "kind": "network", "config": map[string]any{"cidr": "10.50.0.0/16"}}, &j); err != nil {
		t.Fatal(err)
	}
	restarts := 0
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if c.restartIfDead() {
			restarts++
			waitUp(t, cl)
		}
		var got job.Job
		err := cl.Do(testCtx(t), http.MethodGet, "/api/provisioning-jobs/"+j.ID, nil, &got)
		if err == nil && got.Status == job.StatusCompleted {
			break
		}
		if err == nil && got.Status == job.StatusFailed {
			t.Fatalf("job failed: %+v", got.Failure)
		}
		if time.Now().After(deadline) {
			t.Fatalf("job not completed after %d restarts: %v %v", restarts, got.Status, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	done, _ := filepath.Glob(filepath.Join(markers, "*.crash"))
	if len(done) != len(crashes) {
		t.Fatalf("crashed %d times (%v), want %d (%v)", len(done), done, len(crashes), crashes)
	}
	puts := map[string]int{}
	for _, call := range cloud.Calls() {
		if strings.HasPrefix(call, "PUT ") && strings.Contains(call, "/providers/") {
			puts[call]++
		}
	}
	if len(puts) != 4 {
		t.Errorf("PUTs %v; want one each of the NSG, NAT IP, NAT gateway and VNet", puts)
	}
	for call, n := range puts {
		if n != 1 {
			t.Errorf("%s sent %d times across the crashes", call, n)
		}
	}
	if cloud.OperationPolls() == 0 {
		t.Error("no operation was polled: the restarted server did not resume from the recorded tokens")
	}
	t.Logf("%d restarts, %d operation polls", restarts, cloud.OperationPolls())

	if err := cl.Do(testCtx(t), http.MethodDelete, "/api/provisioning-jobs/"+j.ID, nil, nil); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, cl, j.ID, job.StatusDeleted)
	if left := tagged(cloud, j.ID); len(left) > 0 {
		t.Fatalf("after teardown the subscription still holds %v of the job", left)
	}
}
