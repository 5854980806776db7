package apptest

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/api"
	"github.com/groundworkhq/groundwork/internal/client"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/provider/kube"
	"github.com/groundworkhq/groundwork/internal/store"
)

// Jobs drives provisioning jobs through a server's API, for the cloud suites' end-to-end
// tests: create, read, wait for a state, tear down.
type Jobs struct {
	Client *client.Client
	// Wait bounds each wait (default 2 minutes).
	Wait time.Duration
}

func (js Jobs) ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Create makes a job of kind with config in space.
func (js Jobs) Create(t testing.TB, spaceID, kind, config string) *job.Job {
	t.Helper()
	var j job.Job
	if err := js.Client.Do(js.ctx(t), http.MethodPost, "/api/provisioning-jobs",
		map[string]any{"spaceID": spaceID, "kind": kind, "config": json.RawMessage(config)}, &j); err != nil {
		t.Fatalf("create %s job: %v", kind, err)
	}
	return &j
}

// Get reads a job.
func (js Jobs) Get(t testing.TB, id string) *job.Job {
	t.Helper()
	var j job.Job
	if err := js.Client.Do(js.ctx(t), http.MethodGet, "/api/provisioning-jobs/"+id, nil, &j); err != nil {
		t.Fatalf("get job %s: %v", id, err)
	}
	return &j
}

// WaitFor polls the job until cond holds, and fails the test at the deadline.
func (js Jobs) WaitFor(t testing.TB, id, what string, cond func(*job.Job) bool) *job.Job {
	t.Helper()
	wait := js.Wait
	if wait <= 0 {
		wait = 2 * time.Minute
	}
	deadline := time.Now().Add(wait)
	for {
		j := js.Get(t, id)
		if cond(j) {
			return j
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(j, "", " ")
			t.Fatalf("job %s is not %s:\n%s", id, what, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitStatus waits for the job to reach want; a job that fails instead ends the test.
func (js Jobs) WaitStatus(t testing.TB, id string, want job.Status) *job.Job {
	t.Helper()
	return js.WaitFor(t, id, string(want), func(j *job.Job) bool {
		if j.Status == job.StatusFailed && want != job.StatusFailed {
			b, _ := json.MarshalIndent(j, "", " ")
			t.Fatalf("job %s failed:\n%s", id, b)
		}
		return j.Status == want
	})
}

// Teardown deletes the job and waits until it is deleted.
func (js Jobs) Teardown(t testing.TB, id string) {
	t.Helper()
	if err := js.Client.Do(js.ctx(t), http.MethodDelete, "/api/provisioning-jobs/"+id, nil, nil); err != nil {
		t.Fatalf("delete %s: %v", id, err)
	}
	js.WaitStatus(t, id, job.StatusDeleted)
}

// ClusterSpace checks the space a cluster job on provider registered, and returns its id: a
// kubernetes space reached with a token minted from the cloud account (nothing stored) at
// the cluster's https endpoint with its CA.
func ClusterSpace(t testing.TB, c *client.Client, j *job.Job, provider string) string {
	t.Helper()
	var infra struct {
		Space struct {
			ID string `json:"id"`
		} `json:"space"`
	}
	if err := json.Unmarshal(j.Infra, &infra); err != nil || infra.Space.ID == "" {
		t.Fatalf("the cluster job recorded no space: %s (%v)", j.Infra, err)
	}
	var sp store.Space
	if err := c.Do(context.Background(), http.MethodGet, "/api/spaces/"+infra.Space.ID, nil, &sp); err != nil {
		t.Fatalf("the cluster's space: %v", err)
	}
	cl, ok, err := api.SpaceClusterOf(&sp)
	if err != nil || !ok || cl.Auth != kube.AuthCloudToken || cl.CredentialRef != "" || !strings.HasPrefix(cl.Endpoint, "https://") ||
		len(cl.CAData) == 0 || sp.SpaceType != "kubernetes" || sp.Provider != provider {
		t.Fatalf("the cluster's space: %+v, cluster %+v (%v %v)", sp, cl, ok, err)
	}
	return sp.ID
}
