package components

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/testenv/deployctl"
	"github.com/groundworkhq/groundwork/internal/testenv/kubeenv"
	"github.com/groundworkhq/groundwork/internal/testenv/serverproc"
)

// gw is a Groundwork server as the tests talk to it: a base URL and the admin token.
type gw struct {
	url, token string
}

// startServer runs Groundwork in-process with the test catalog and charts.
func startServer(t *testing.T) *gw {
	t.Helper()
	s := apptest.Start(t, app.Options{Components: componentOptions()})
	return &gw{url: s.URL, token: s.Token}
}

type reply = apptest.Reply

func (g *gw) call(t *testing.T, method, path string, body any) reply {
	t.Helper()
	status, raw := serverproc.CallURL(t, g.url, g.token, method, path, body)
	return reply{Status: status, Raw: raw}
}

// must calls and fails the test unless the answer has status want.
func (g *gw) must(t *testing.T, want int, method, path string, body, out any) {
	t.Helper()
	r := g.call(t, method, path, body)
	if r.Status != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, r.Status, want, r.Raw)
	}
	if out != nil {
		r.Decode(t, out)
	}
}

// register registers env's API server as a space from endpoint, CA and token.
func (g *gw) register(t *testing.T, env *kubeenv.Env, name string) *store.Space {
	t.Helper()
	var sp store.Space
	g.must(t, http.StatusCreated, "POST", "/api/spaces/register-cluster", map[string]any{
		"name": name, "cluster": map[string]string{"endpoint": env.Host, "caData": string(env.CA), "token": env.Token},
	}, &sp)
	return &sp
}

// install submits an install-component job of the demo component and returns its ID.
func (g *gw) install(t *testing.T, spaceID string, values map[string]any) string {
	t.Helper()
	var j job.Job
	g.must(t, http.StatusCreated, "POST", "/api/provisioning-jobs/install-component",
		map[string]any{"spaceID": spaceID, "componentID": "demo", "values": values}, &j)
	if j.Family != job.FamilyComponent || j.ID == "" {
		t.Fatalf("install-component made %+v", j)
	}
	return j.ID
}

func (g *gw) job(t *testing.T, id string) *job.Job {
	t.Helper()
	var j job.Job
	g.must(t, http.StatusOK, "GET", "/api/provisioning-jobs/"+id, nil, &j)
	return &j
}

// waitJob polls the job until it has status want and fails on any other settled status. The
// test API server has no controller manager, so while it waits it plays the deployment
// controller for the demo release (deployctl).
func (g *gw) waitJob(t *testing.T, cs kubernetes.Interface, id string, want job.Status) *job.Job {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		j := g.job(t, id)
		if j.Status == want {
			return j
		}
		switch j.Status {
		case job.StatusCompleted, job.StatusFailed, job.StatusCancelled, job.StatusDeleted:
			t.Fatalf("job %s is %s, want %s: %+v", id, j.Status, want, j.Failure)
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %s (%s), want %s", id, j.Status, j.Phase, want)
		}
		if cs != nil {
			deployctl.MarkAvailable(t, cs, "demo-system", "demo")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitSpace polls the space until its status is want.
func (g *gw) waitSpace(t *testing.T, id, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var sp store.Space
		g.must(t, http.StatusOK, "GET", "/api/spaces/"+id, nil, &sp)
		if sp.Status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("space %s still %s, want %s", id, sp.Status, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func clientset(t *testing.T, env *kubeenv.Env) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// child is a Groundwork server running as a child process (the test binary in serve mode).
type child struct {
	*gw
	proc *serverproc.Proc
	done <-chan struct{}
	log  string
}

// startChild runs a child server on dataDir; its log is server-<n>.log in dir.
func startChild(t *testing.T, dir, dataDir string, n int) *child {
	t.Helper()
	p := serverproc.Start(t, serverproc.Options{DataDir: dataDir, LogFile: filepath.Join(dir, fmt.Sprintf("server-%d.log", n))})
	return &child{gw: &gw{url: p.URL, token: p.Token}, proc: p, done: p.Done(), log: p.LogPath()}
}

// kill sends SIGKILL and waits for the process to be gone.
func (c *child) kill() { c.proc.Kill() }
