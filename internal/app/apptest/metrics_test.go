package apptest_test

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
)

// groundwork_queue_lag_seconds grows while a due job waits for a busy worker and is 0 once the
// queue is drained.
func TestQueueLagMetric(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	pipe := &testfamily.Pipeline{N: 1, Hook: func(ctx context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error) {
		if r.Job.Name == "hog" && !c.Undo {
			select {
			case <-release:
			case <-ctx.Done():
				return pipeline.Result{}, ctx.Err()
			}
		}
		return pipeline.Done(nil), nil
	}}
	gw := apptest.Start(t, app.Options{Pipelines: []pipeline.Pipeline{pipe}, Workers: 1})
	ctx := context.Background()
	space := gw.Space(t, "lag")
	create := func(name string) string {
		var j job.Job
		if err := gw.Client.Do(ctx, http.MethodPost, "/api/provisioning-jobs", map[string]any{"spaceID": space.ID, "kind": "test", "name": name}, &j); err != nil {
			t.Fatalf("create job %s: %v", name, err)
		}
		return j.ID
	}
	re := regexp.MustCompile(`(?m)^groundwork_queue_lag_seconds ([0-9.e+-]+)$`)
	lag := func() float64 {
		t.Helper()
		resp, err := http.Get(gw.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		m := re.FindSubmatch(body)
		if m == nil {
			t.Fatalf("/metrics has no groundwork_queue_lag_seconds:\n%s", body)
		}
		v, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := lag(); v != 0 {
		t.Fatalf("lag with nothing queued = %v, want 0", v)
	}
	hog := create("hog")
	waitJob(t, gw.Client, hog, 30*time.Second, "running", func(j *job.Job) bool { return j.Status == job.StatusRunning })
	waiting := create("waiting") // the only worker is held by the hog
	deadline := time.Now().Add(30 * time.Second)
	for lag() < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("lag stayed below 1s while a due job waited: %v", lag())
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(release)
	waitJob(t, gw.Client, waiting, 30*time.Second, "completed", func(j *job.Job) bool { return j.Status == job.StatusCompleted })
	if v := lag(); v != 0 {
		t.Fatalf("lag once the queue drained = %v, want 0", v)
	}
}

// With a job retention set, a job that is over is pruned once older than it, and a completed
// one stays.
func TestJobRetentionPrunesJobsThatAreOver(t *testing.T) {
	t.Parallel()
	gw := apptest.Start(t, app.Options{Pipelines: []pipeline.Pipeline{&testfamily.Pipeline{N: 1}},
		JobRetention: time.Millisecond, JobPruneEvery: 50 * time.Millisecond})
	ctx := context.Background()
	space := gw.Space(t, "retention")
	var draft, done job.Job
	if err := gw.Client.Do(ctx, http.MethodPost, "/api/provisioning-jobs", map[string]any{"spaceID": space.ID, "kind": "test", "draft": true}, &draft); err != nil {
		t.Fatal(err)
	}
	if err := gw.Client.Do(ctx, http.MethodPost, "/api/provisioning-jobs", map[string]any{"spaceID": space.ID, "kind": "test"}, &done); err != nil {
		t.Fatal(err)
	}
	waitJob(t, gw.Client, done.ID, 30*time.Second, "completed", func(j *job.Job) bool { return j.Status == job.StatusCompleted })
	if err := gw.Client.Do(ctx, http.MethodDelete, "/api/provisioning-jobs/"+draft.ID, nil, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := gw.Client.Do(ctx, http.MethodGet, "/api/provisioning-jobs/"+draft.ID, nil, nil)
		if err != nil {
			apiError(t, err, http.StatusNotFound)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cancelled job was not pruned within 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var got job.Job
	if err := gw.Client.Do(ctx, http.MethodGet, "/api/provisioning-jobs/"+done.ID, nil, &got); err != nil || got.Status != job.StatusCompleted {
		t.Fatalf("the completed job: %v %s", err, got.Status)
	}
}
