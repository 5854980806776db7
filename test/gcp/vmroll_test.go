package gcp

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/client"
	"github.com/groundworkhq/groundwork/internal/job"
	gp "github.com/groundworkhq/groundwork/internal/provider/gcp"
	"github.com/groundworkhq/groundwork/internal/provider/gcp/gcpfake"
	"github.com/groundworkhq/groundwork/internal/testenv/childserver"
)

// poolOnCloud is what the fake project holds of a pool job: its instance templates, and its
// instances with the template each was made from, by short name.
func poolOnCloud(cloud *gcpfake.Cloud, jobID string) (templates []string, instances map[string]string) {
	instances = map[string]string{}
	for _, r := range cloud.Resources() {
		d, _ := r.Body["description"].(string)
		if gp.JobOfDescription(d) != jobID {
			continue
		}
		n, _ := r.Body["name"].(string)
		switch r.Kind {
		case "compute#instanceTemplate":
			templates = append(templates, n)
		case "compute#instance":
			src, _ := r.Body["sourceInstanceTemplate"].(string)
			instances[n] = src[strings.LastIndex(src, "/")+1:]
		}
	}
	return templates, instances
}

// madeSince counts the instances and templates the fake made after the first mark entries
// of Made, by short name.
func madeSince(cloud *gcpfake.Cloud, mark int) (templates, instances map[string]int) {
	templates, instances = map[string]int{}, map[string]int{}
	made := cloud.Made()
	for _, full := range made[min(mark, len(made)):] {
		short := full[strings.LastIndex(full, "/")+1:]
		switch {
		case strings.Contains(full, "/instanceTemplates/"):
			templates[short]++
		case strings.Contains(full, "/instances/"):
			instances[short]++
		}
	}
	return templates, instances
}

// patchConfigOn sends the job's new config and waits until the engine has carried it out (the
// job completed at a version past the PATCH).
func patchConfigOn(t *testing.T, cl *client.Client, j *job.Job, config string) *job.Job {
	t.Helper()
	var patched job.Job
	if err := cl.Do(testCtx(t), http.MethodPatch, "/api/provisioning-jobs/"+j.ID,
		map[string]any{"version": j.Version, "config": json.RawMessage(config)}, &patched); err != nil {
		t.Fatalf("PATCH config: %v", err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var cur job.Job
		err := cl.Do(testCtx(t), http.MethodGet, "/api/provisioning-jobs/"+j.ID, nil, &cur)
		if err == nil && cur.Status == job.StatusCompleted && cur.Version > patched.Version {
			return &cur
		}
		if err == nil && cur.Status == job.StatusFailed {
			t.Fatalf("the update failed: %+v", cur.Failure)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the update is not done: %v %+v", err, cur)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkRolled checks the pool after a roll of size instances: one template of the job, made by the
// update, every instance on it, each made once.
func checkRolled(t *testing.T, cloud *gcpfake.Cloud, j *job.Job, mark, size int) {
	t.Helper()
	templates, instances := poolOnCloud(cloud, j.ID)
	if len(templates) != 1 {
		t.Fatalf("the job holds templates %v after the roll, want one", templates)
	}
	if len(instances) != size {
		t.Fatalf("the job holds instances %v after the roll, want %d", instances, size)
	}
	for n, tmpl := range instances {
		if tmpl != templates[0] {
			t.Errorf("instance %s is on template %s, want %s", n, tmpl, templates[0])
		}
	}
	madeT, madeI := madeSince(cloud, mark)
	if len(madeT) != 1 || madeT[templates[0]] != 1 {
		t.Errorf("the update made templates %v, want %s once", madeT, templates[0])
	}
	if len(madeI) != size {
		t.Errorf("the update made instances %v, want %d", madeI, size)
	}
	for n, k := range madeI {
		if k != 1 || instances[n] == "" {
			t.Errorf("instance %s was made %d times by the update (or is not the pool's now: %v)", n, k, instances)
		}
	}
	var infra struct {
		VMs []struct{ ID, State string } `json:"vms"`
	}
	if err := json.Unmarshal(j.Infra, &infra); err != nil || len(infra.VMs) != size {
		t.Fatalf("the job records VMs %s (%v)", j.Infra, err)
	}
	for _, v := range infra.VMs {
		if instances[v.ID[strings.LastIndex(v.ID, "/")+1:]] == "" || v.State != "ready" {
			t.Errorf("recorded VM %+v is not a ready instance of the pool %v", v, instances)
		}
	}
}

// A live fixed pool behind the load balancer changes its machine type through PATCH config:
// the job completes with every instance on one new template, and DELETE leaves nothing of
// the job.
func TestVMPoolConfigUpdateRollsThePool(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const before = `{"name":"web","instanceType":"e2-small","min":2,"max":2,"createLoadBalancer":true,"listenerPorts":[80]}`
	j := e.jobs.Create(t, e.space.ID, "vm_pool", before)
	j = e.jobs.WaitStatus(t, j.ID, job.StatusCompleted)
	_, oldInstances := poolOnCloud(e.cloud, j.ID)
	mark := len(e.cloud.Made())
	j = patchConfigOn(t, e.s.Client, j, strings.Replace(before, "e2-small", "e2-medium", 1))
	checkRolled(t, e.cloud, j, mark, 2)
	_, instances := poolOnCloud(e.cloud, j.ID)
	for n := range oldInstances {
		if _, ok := instances[n]; ok {
			t.Errorf("old instance %s outlived the roll", n)
		}
	}
	var cfg struct{ InstanceType string }
	if err := json.Unmarshal(j.Config, &cfg); err != nil || cfg.InstanceType != "e2-medium" {
		t.Fatalf("the job's config after the update: %s", j.Config)
	}
	e.jobs.Teardown(t, j.ID)
	if left := labelled(e.cloud, j.ID); len(left) > 0 {
		t.Fatalf("after teardown the project still holds %v of the job", left)
	}
}

// The same update on a server SIGKILLed while it carries it out: after the template's insert
// and three times in the roll (after a new instance's insert, a group change, an old
// instance's delete, whichever the call made). Restarted each time, the server finishes the
// roll: one template made, each new instance made once, every instance on the template.
func TestVMPoolRollResumesAfterSIGKILL(t *testing.T) {
	t.Parallel()
	cloud := gcpfake.New(t)
	markers := t.TempDir()
	addr := childserver.FreeAddr(t)
	c := childserver.Start(t, append(os.Environ(), envServe+"=1", envDataDir+"="+t.TempDir(), envAddr+"="+addr,
		envCrashAt+"=create_launch_template#2,finalize#3,finalize#5,finalize#8", envMarkers+"="+markers))
	cl := client.New("http://"+addr, childToken)
	c.WaitUp(cl)
	space := newSpace(t, cl, cloud, nil)
	if err := os.WriteFile(filepath.Join(markers, childserver.Armed), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	const before = `{"name":"crash","instanceType":"e2-small","min":3,"max":3,"createLoadBalancer":true,"listenerPorts":[80]}`
	var j job.Job
	if err := cl.Do(testCtx(t), http.MethodPost, "/api/provisioning-jobs",
		map[string]any{"spaceID": space.ID, "kind": "vm_pool", "config": json.RawMessage(before)}, &j); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	ids := map[string]string{"pool": j.ID}
	c.WaitJobs(t, cl, ids, job.StatusCompleted, deadline)
	if err := cl.Do(testCtx(t), http.MethodGet, "/api/provisioning-jobs/"+j.ID, nil, &j); err != nil {
		t.Fatal(err)
	}
	mark := len(cloud.Made())
	var patched job.Job
	if err := cl.Do(testCtx(t), http.MethodPatch, "/api/provisioning-jobs/"+j.ID,
		map[string]any{"version": j.Version, "config": json.RawMessage(strings.Replace(before, "e2-small", "e2-standard-2", 1))}, &patched); err != nil {
		t.Fatalf("PATCH config: %v", err)
	}
	restarts := c.WaitJobs(t, cl, ids, job.StatusCompleted, deadline)
	for {
		if err := cl.Do(testCtx(t), http.MethodGet, "/api/provisioning-jobs/"+j.ID, nil, &j); err != nil {
			t.Fatal(err)
		}
		if j.Version > patched.Version && j.Status == job.StatusCompleted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the update is not done: %s", j.Status)
		}
		restarts += c.WaitJobs(t, cl, ids, job.StatusCompleted, deadline)
		time.Sleep(50 * time.Millisecond)
	}
	for _, want := range []string{"create_launch_template.2", "finalize.3", "finalize.5", "finalize.8"} {
		if _, err := os.Stat(filepath.Join(markers, j.ID+"."+want+".crash")); err != nil {
			t.Errorf("the server was not killed at %s: %v", want, err)
		}
	}
	t.Logf("%d restarts", restarts)
	checkRolled(t, cloud, &j, mark, 3)
	if err := cl.Do(testCtx(t), http.MethodDelete, "/api/provisioning-jobs/"+j.ID, nil, nil); err != nil {
		t.Fatal(err)
	}
	c.WaitJobs(t, cl, ids, job.StatusDeleted, deadline)
	if left := labelled(cloud, j.ID); len(left) > 0 {
		t.Fatalf("after teardown the project still holds %v of the job", left)
	}
}
