package apptest_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
	"github.com/groundworkhq/groundwork/internal/testenv/logbuf"
)

// A step that panics fails its job as system, with the stack in the server's log and not in
// the API's answer; the server keeps answering /healthz and completes the other jobs of the
// same run.
func TestPanickingStepFailsOnlyItsJob(t *testing.T) {
	t.Parallel()
	const secret = "value-the-step-had-in-hand"
	pipe := &testfamily.Pipeline{N: 3, Hook: func(ctx context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error) {
		if r.Job.Name == "boom" && c.Step == "step2" && !c.Undo {
			panic("unexpected state: " + secret)
		}
		return pipeline.Done(nil), nil
	}}
	logs := &logbuf.Buffer{}
	gw := apptest.Start(t, app.Options{Pipelines: []pipeline.Pipeline{pipe}, Workers: 2,
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	ctx := context.Background()
	space := gw.Space(t, "panics")
	create := func(name string) string {
		var j job.Job
		if err := gw.Client.Do(ctx, http.MethodPost, "/api/provisioning-jobs", map[string]any{"spaceID": space.ID, "kind": "test", "name": name}, &j); err != nil {
			t.Fatalf("create job %s: %v", name, err)
		}
		return j.ID
	}
	boom := create("boom")
	var others []string
	for _, n := range []string{"a", "b", "c", "d"} {
		others = append(others, create(n))
	}

	failed := waitJob(t, gw.Client, boom, 30*time.Second, "failed", func(j *job.Job) bool { return j.Status.Terminal() || j.Status == job.StatusFailed })
	if f := failed.Failure; failed.Status != job.StatusFailed || f == nil || f.Class != job.ClassSystem || f.Step != "step2" || f.Retryable {
		t.Fatalf("panicking job ended %s with %+v, want failed as system at step2", failed.Status, failed.Failure)
	}
	var raw json.RawMessage
	if err := gw.Client.Do(ctx, http.MethodGet, "/api/provisioning-jobs/"+boom, nil, &raw); err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{secret, "goroutine", "panic_test.go"} {
		if strings.Contains(string(raw), leak) {
			t.Fatalf("the API's answer carries the panic (%q): %s", leak, raw)
		}
	}
	for _, id := range others {
		waitJob(t, gw.Client, id, 30*time.Second, "completed", func(j *job.Job) bool { return j.Status == job.StatusCompleted })
	}
	resp, err := http.Get(gw.URL + "/healthz")
	if err != nil {
		t.Fatalf("healthz after the panic: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz after the panic: %d", resp.StatusCode)
	}
	var logged bool
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, boom) && strings.Contains(line, `"step":"step2"`) &&
			strings.Contains(line, secret) && strings.Contains(line, "panic_test.go") {
			logged = true
		}
	}
	if !logged {
		t.Fatalf("no log line with the job's id, its step, the panic and a stack leading to it:\n%s", logs.String())
	}
}
