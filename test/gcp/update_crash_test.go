package gcp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/client"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/provider/gcp/gcpfake"
	"github.com/groundworkhq/groundwork/internal/testenv/childserver"
)

// TestDatastoreUpdateCrashAfterPatch SIGKILLs the server right after a config update's
// create_server sent Cloud SQL's instances.patch, before the step recorded its operation.
// Restarted, the server finds the patch under way (or done) and finishes the update without
// a second patch; DELETE then leaves nothing.
func TestDatastoreUpdateCrashAfterPatch(t *testing.T) {
	t.Parallel()
	cloud := gcpfake.New(t)
	markers := t.TempDir()
	addr := childserver.FreeAddr(t)
	// create_server's first call makes the instance; the second is the update's patch.
	c := childserver.Start(t, append(os.Environ(), envServe+"=1", envDataDir+"="+t.TempDir(), envAddr+"="+addr,
		envCrashAt+"=create_server#2", envMarkers+"="+markers))
	cl := client.New("http://"+addr, childToken)
	c.WaitUp(cl)
	if err := os.WriteFile(filepath.Join(markers, childserver.Armed), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	space := newSpace(t, cl, cloud, nil)
	var j job.Job
	if err := cl.Do(testCtx(t), http.MethodPost, "/api/provisioning-jobs", map[string]any{"spaceID": space.ID, "kind": "datastore",
		"config": json.RawMessage(`{"engine":"postgres","version":"16","allocatedStorageGB":20,"backupRetentionDays":7}`)}, &j); err != nil {
		t.Fatalf("create: %v", err)
	}
	ids := map[string]string{"datastore": j.ID}
	deadline := time.Now().Add(3 * time.Minute)
	c.WaitJobs(t, cl, ids, job.StatusCompleted, deadline)
	if err := cl.Do(testCtx(t), http.MethodGet, "/api/provisioning-jobs/"+j.ID, nil, &j); err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(j.Config, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["allocatedStorageGB"], cfg["backupRetentionDays"] = 50, 14
	if err := cl.Do(testCtx(t), http.MethodPatch, "/api/provisioning-jobs/"+j.ID, map[string]any{"version": j.Version, "config": cfg}, &j); err != nil {
		t.Fatalf("PATCH config: %v", err)
	}
	// The job reads completed again only after the update: wait for the crash first, so
	// that a read before the update started cannot pass for its end.
	crash := filepath.Join(markers, j.ID+".create_server.2.crash")
	for {
		if _, err := os.Stat(crash); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server did not crash after the patch")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if restarts := c.WaitJobs(t, cl, ids, job.StatusCompleted, deadline); restarts == 0 {
		t.Fatal("the server was not restarted after the crash")
	}
	var instance, disk, retained string
	for _, r := range cloud.Resources() {
		if r.Kind == "sql#instance" {
			instance = r.Name[strings.LastIndex(r.Name, "/")+1:]
			s, _ := r.Body["settings"].(map[string]any)
			b, _ := s["backupConfiguration"].(map[string]any)
			rs, _ := b["backupRetentionSettings"].(map[string]any)
			disk, retained = fmt.Sprint(s["dataDiskSizeGb"]), fmt.Sprint(rs["retainedBackups"])
		}
	}
	if disk != "50" || retained != "14" {
		t.Fatalf("Cloud SQL after the update: %s GB, %s backups; want 50 and 14", disk, retained)
	}
	if n := cloud.SQLPatches(instance); n != 1 {
		t.Fatalf("%d instances.patch calls across the crash; want 1", n)
	}
	if err := cl.Do(testCtx(t), http.MethodDelete, "/api/provisioning-jobs/"+j.ID, nil, nil); err != nil {
		t.Fatalf("delete: %v", err)
	}
	c.WaitJobs(t, cl, ids, job.StatusDeleted, deadline)
	if left := labelled(cloud, j.ID); len(left) > 0 {
		t.Fatalf("after teardown the project still holds %v of the job", left)
	}
}
