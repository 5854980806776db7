package datastores

import (
	"context"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/provider/local"
	"github.com/groundworkhq/groundwork/internal/provider/local/localtest"
)

type driftView struct {
	DriftCount int `json:"driftCount"`
	Drift      []struct {
		Resource struct{ Type, ID string } `json:"resource"`
		Field    string                    `json:"field"`
		Step     string                    `json:"step"`
	} `json:"drift"`
}

// TestDriftOfALocalServer: a local PostgreSQL server stopped behind Groundwork's back is
// drift (running: applied true, actual false) on inspect; reconcile runs the wait_ready step
// again, which starts it on its data, and the next inspection is clean.
func TestDriftOfALocalServer(t *testing.T) {
	t.Parallel()
	localtest.RequireEngine(t, datastore.EnginePostgres)
	e := newEnv(t, "")
	s := e.start("")
	defer s.stop()
	id := s.createJob(t, s.space(t), datastore.EnginePostgres)
	s.waitJob(t, id, "completed")
	var d driftView
	s.must(t, http.StatusOK, "POST", "/api/provisioning-jobs/"+id+"/inspect", nil, &d)
	if d.DriftCount != 0 {
		t.Fatalf("drift right after create: %+v", d)
	}

	p, err := local.New(local.Options{DataDir: e.dataDir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	srv, alive, err := p.Find(ctx, id)
	if err != nil || !alive {
		t.Fatalf("the job's server: %+v alive=%v %v", srv, alive, err)
	}
	// A fast shutdown, as an operator's pg_ctl stop -m fast would do it.
	if err := syscall.Kill(srv.PID, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if _, alive, err := p.Find(ctx, id); err != nil || !alive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server did not stop")
		}
		time.Sleep(50 * time.Millisecond)
	}

	s.must(t, http.StatusOK, "POST", "/api/provisioning-jobs/"+id+"/inspect", nil, &d)
	if d.DriftCount != 1 || d.Drift[0].Field != "running" || d.Drift[0].Step != "wait_ready" || d.Drift[0].Resource.ID != "local/postgres/"+id {
		t.Fatalf("drift after the server stopped: %+v", d)
	}
	var queued jobView
	s.must(t, http.StatusAccepted, "POST", "/api/provisioning-jobs/"+id+"/reconcile", nil, &queued)
	deadline = time.Now().Add(2 * time.Minute)
	for {
		var j jobView
		s.must(t, http.StatusOK, "GET", "/api/provisioning-jobs/"+id, nil, &j)
		if j.Status == "completed" && j.Version > queued.Version {
			break
		}
		if j.Status == "failed" || time.Now().After(deadline) {
			t.Fatalf("reconcile: job %s at version %d (%s)", j.Status, j.Version, j.Failure)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, alive, err := p.Find(ctx, id); err != nil || !alive {
		t.Fatalf("after reconcile the server is not running: %v", err)
	}
	s.must(t, http.StatusOK, "POST", "/api/provisioning-jobs/"+id+"/inspect", nil, &d)
	if d.DriftCount != 0 {
		t.Fatalf("drift after reconcile: %+v", d)
	}
	s.must(t, http.StatusAccepted, "DELETE", "/api/provisioning-jobs/"+id, nil, nil)
	s.waitJob(t, id, "deleted")
}
