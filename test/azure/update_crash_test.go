package azure

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/client"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/provider/azure/azurefake"
	"github.com/groundworkhq/groundwork/internal/testenv/childserver"
)

// TestDatastoreUpdateSurvivesCrash SIGKILLs the server right after the update's first call of
// create_server: the PATCH has reached Azure, its resume token is not recorded. The restarted
// server finds the server mid-update, waits on it, sees the new values and finishes, having
// sent one PATCH; DELETE then leaves nothing of the job.
func TestDatastoreUpdateSurvivesCrash(t *testing.T) {
	t.Parallel()
	cloud := azurefake.New(t)
	markers := t.TempDir()
	addr := childserver.FreeAddr(t)
	// create_server runs once when the job is made (it awaits the server), so its second call
	// is the update's first.
	c := childserver.Start(t, append(os.Environ(), envServe+"=1", envDataDir+"="+t.TempDir(), envAddr+"="+addr, envCloud+"="+cloud.URL,
		envCrashAt+"=create_server#2", envMarkers+"="+markers))
	cl := client.New("http://"+addr, childToken)
	c.WaitUp(cl)
	if err := os.WriteFile(filepath.Join(markers, childserver.Armed), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e := &env{cloud: cloud, space: newSpace(t, cl, cloud.URL, nil)}
	var j job.Job
	if err := cl.Do(testCtx(t), http.MethodPost, "/api/provisioning-jobs", map[string]any{"spaceID": e.space.ID, "kind": "datastore",
		"config": json.RawMessage(`{"engine":"postgres","version":"16","instanceClass":"Standard_D2ds_v5","allocatedStorageGB":32,"backupRetentionDays":7}`)}, &j); err != nil {
		t.Fatalf("create: %v", err)
	}
	ids := map[string]string{"datastore": j.ID}
	deadline := time.Now().Add(3 * time.Minute)
	c.WaitJobs(t, cl, ids, job.StatusCompleted, deadline)
	if err := cl.Do(testCtx(t), http.MethodGet, "/api/provisioning-jobs/"+j.ID, nil, &j); err != nil {
		t.Fatal(err)
	}
	var in struct {
		Server struct {
			ID string `json:"id"`
		} `json:"server"`
	}
	if err := json.Unmarshal(j.Infra, &in); err != nil || in.Server.ID == "" {
		t.Fatalf("server on record: %v", err)
	}
	var patched job.Job
	if err := cl.Do(testCtx(t), http.MethodPatch, "/api/provisioning-jobs/"+j.ID, map[string]any{"version": j.Version,
		"config": withConfig(t, &j, map[string]any{"allocatedStorageGB": 128, "backupRetentionDays": 21})}, &patched); err != nil {
		t.Fatalf("PATCH config: %v", err)
	}
	restarts := c.WaitJobs(t, cl, ids, job.StatusCompleted, deadline)
	if n, _ := filepath.Glob(filepath.Join(markers, j.ID+".create_server.2.crash")); len(n) == 0 || restarts == 0 {
		t.Fatalf("the update never crashed (%d restarts)", restarts)
	}
	raw, _ := cloud.Raw(in.Server.ID)
	var srv struct {
		Properties struct {
			State   string
			Storage struct{ StorageSizeGB int }
			Backup  struct{ BackupRetentionDays int }
		}
	}
	_ = json.Unmarshal(raw, &srv)
	if p := srv.Properties; p.Storage.StorageSizeGB != 128 || p.Backup.BackupRetentionDays != 21 || p.State != "Ready" {
		t.Fatalf("server after the crashed update: %+v", p)
	}
	if n := mutations(e, "PATCH", "/flexibleServers/"); n != 1 {
		t.Errorf("%d PATCH across the crash; want one", n)
	}
	if err := cl.Do(testCtx(t), http.MethodDelete, "/api/provisioning-jobs/"+j.ID, nil, nil); err != nil {
		t.Fatalf("delete: %v", err)
	}
	c.WaitJobs(t, cl, ids, job.StatusDeleted, deadline)
	if left := tagged(cloud, j.ID); len(left) > 0 {
		t.Errorf("after teardown the subscription still holds %v of the job", left)
	}
}
