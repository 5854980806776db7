package aws

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/client"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/remediation"
	"github.com/groundworkhq/groundwork/internal/testenv/childserver"
)

// countingProxy forwards to moto and counts the EC2 StopInstances calls that pass.
func countingProxy(t *testing.T, endpoint string) (string, *atomic.Int64) {
	t.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	var stops atomic.Int64
	rp := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "Action=StopInstances") {
			stops.Add(1)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &stops
}

// The server is SIGKILLed while a stop workflow parks at its gate (before the park is
// recorded, and again while it is parked) and while execute runs (after the StopInstances
// call, before its record): restarted each time, the job is still awaiting approval, then,
// approved, completes; the instance was asked to stop once and the timeline holds each event
// once.
func TestRemediationSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	endpoint := motoEnv.Endpoint(t)
	proxy, stops := countingProxy(t, endpoint)
	markers := t.TempDir()
	addr := childserver.FreeAddr(t)
	c := childserver.Start(t, append(os.Environ(), envServe+"=1", envDataDir+"="+t.TempDir(), envAddr+"="+addr,
		envCrashAt+"=approval,execute", envMarkers+"="+markers, "AWS_ENDPOINT_URL="+proxy))
	cl := client.New("http://"+addr, childToken)
	c.WaitUp(cl)
	e := newEnvOn(t, &apptest.Server{URL: "http://" + addr, Token: childToken, Client: cl}, endpoint, false)
	id := e.runInstance(t)
	j := e.remediate(t, remediation.ActionStop, remediation.TypeEC2Instance, id)

	// The first run of the gate dies before it is recorded; the restarted server parks it.
	j = untilStatus(t, c, cl, j.ID, job.StatusAwaitingUser)
	if _, err := os.Stat(markers + "/" + j.ID + ".approval"); err != nil {
		t.Fatalf("the server did not crash at the gate: %v", err)
	}
	// Killed while parked, the job is still parked after the restart, holding no lease.
	c.Kill()
	c.WaitUp(cl)
	if got := getRemediation(t, cl, j.ID); got.Status != job.StatusAwaitingUser {
		t.Fatalf("after a restart the parked job is %s", got.Status)
	}
	if s := e.instanceState(t, id); s != "running" {
		t.Fatalf("instance is %s before approval", s)
	}
	gate := approvalStep(t, j)
	if err := cl.Do(testCtx(t), http.MethodPost, "/api/remediation-jobs/"+j.ID+"/steps-by-id/"+gate.ID+"/approve",
		map[string]string{"reason": "crash drill"}, nil); err != nil {
		t.Fatalf("approve: %v", err)
	}
	// execute dies after its StopInstances call; the restarted server looks before it acts.
	untilStatus(t, c, cl, j.ID, job.StatusCompleted)
	if _, err := os.Stat(markers + "/" + j.ID + ".execute"); err != nil {
		t.Fatalf("the server did not crash in execute: %v", err)
	}
	if s := e.instanceState(t, id); s != "stopped" {
		t.Fatalf("instance is %s", s)
	}
	if n := stops.Load(); n != 1 {
		t.Errorf("StopInstances reached the cloud %d times, want once", n)
	}
	want := []event{
		{"precondition", "completed", "system", ""},
		{"approval", "created", "system", ""},
		{"approval", "approved", "admin", "crash drill"},
		{"execute", "completed", "system", ""},
		{"validate", "completed", "system", ""},
	}
	got := events(timeline(t, cl, j.ID))
	if len(got) == len(want) {
		want[2].actor = got[2].actor // the bootstrap admin's name is the server's to choose
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("timeline:\n got %v\nwant %v", got, want)
	}
	if a := e.auditActions(t, j.ID); a["remediation-job.approve"] != 1 || a["remediation-job.completed"] != 1 {
		t.Errorf("audit log on the job: %v", a)
	}
}

// untilStatus polls the job, restarting the server whenever it died, until it reaches want.
func untilStatus(t *testing.T, c *childserver.Child, cl *client.Client, id string, want job.Status) *remJob {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if c.RestartIfDead() {
			c.WaitUp(cl)
		}
		var j remJob
		err := cl.Do(testCtx(t), http.MethodGet, "/api/remediation-jobs/"+id, nil, &j)
		if err == nil && j.Status == want {
			return &j
		}
		if err == nil && (j.Status == job.StatusFailed || j.Status == job.StatusCancelled || j.Status == job.StatusCompleted) {
			t.Fatalf("remediation %s ended %s (%+v), want %s", id, j.Status, j.Failure, want)
		}
		if time.Now().After(deadline) {
			t.Fatalf("remediation %s is %s (%v), want %s", id, j.Status, err, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
