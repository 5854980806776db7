package childserver

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/client"
	"github.com/groundworkhq/groundwork/internal/job"
)

// Armed is the marker file a test writes in the markers directory once it has made all its
// jobs: until then CrashAfter's hook holds every step, so that no crash cuts a request short
// and every job's first steps are still ahead.
const Armed = "armed"

// CrashAfter is an engine AfterDo hook for a child server: it SIGKILLs the process after the
// cloud calls of the step calls spec lists and before the engine records them. spec is a
// comma-separated list of step#n (the n-th call of the step, counted across restarts) or *#n
// (the n-th call of every step). Each crash leaves a "<job>.<step>.<n>.crash" file in markers.
func CrashAfter(markers, spec string) func(ctx context.Context, j *job.Job, step string) {
	crashAt := map[string]bool{}
	for _, s := range strings.Split(spec, ",") {
		crashAt[s] = true
	}
	return func(ctx context.Context, j *job.Job, step string) {
		for {
			if _, err := os.Stat(filepath.Join(markers, Armed)); err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		// The count is on disk, so that it survives the crashes.
		counter := filepath.Join(markers, j.ID+"."+step+".calls")
		b, _ := os.ReadFile(counter)
		n, _ := strconv.Atoi(string(b))
		n++
		_ = os.WriteFile(counter, []byte(strconv.Itoa(n)), 0o644)
		if !crashAt[fmt.Sprintf("%s#%d", step, n)] && !crashAt[fmt.Sprintf("*#%d", n)] {
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
}

// WaitJobs polls each job (ids: a name for messages → the job's id) until it reaches want,
// restarting the child whenever it has died, and returns how many restarts that took. A job
// that fails, or the deadline, ends the test.
func (c *Child) WaitJobs(t testing.TB, cl *client.Client, ids map[string]string, want job.Status, deadline time.Time) int {
	t.Helper()
	restarts := 0
	for name, id := range ids {
		for {
			if c.RestartIfDead() {
				restarts++
				c.WaitUp(cl)
			}
			var got job.Job
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := cl.Do(ctx, http.MethodGet, "/api/provisioning-jobs/"+id, nil, &got)
			cancel()
			if err == nil && got.Status == want {
				break
			}
			if err == nil && got.Status == job.StatusFailed {
				t.Fatalf("%s job failed: %+v", name, got.Failure)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s job not %s after %d restarts: %v %v", name, want, restarts, got.Status, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return restarts
}
