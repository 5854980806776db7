package aws

import (
	"encoding/json"
	"net/http"
	"os"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/rds"

	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/client"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/testenv/childserver"
)

// waitUpdated waits for job id to complete the update PATCH answered at version.
func waitUpdated(t *testing.T, e *env, id string, version int64) *job.Job {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		j := getJob(t, e.s.Client, id)
		if j.Status == job.StatusCompleted && j.Version > version {
			return j
		}
		if j.Status == job.StatusFailed || time.Now().After(deadline) {
			t.Fatalf("config update: job %s (version %d): %+v", j.Status, j.Version, j.Failure)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDatastoreConfigUpdate: a live RDS datastore's storage grows and its backup retention
// changes in place through PATCH config (the same instance, ModifyDBInstance), after a dry run
// that changed nothing, then its instance class, for the maintenance window; an engine change and a shrink are refused naming their fields; the
// revisions and the audit log record the update. Fewer backups, which drops data, waits for
// a second admin's approval before it reaches RDS.
func TestDatastoreConfigUpdate(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	e := newEnv(t)
	j := e.create(t, "datastore", `{"engine":"postgres","version":"16.3","instanceClass":"db.t3.micro","allocatedStorageGB":20,"backupRetentionDays":7}`)
	j = waitStatus(t, e.s.Client, j.ID, job.StatusCompleted)
	var in datastoreInfra
	if err := json.Unmarshal(j.Infra, &in); err != nil {
		t.Fatal(err)
	}
	describe := func() (class string, storage, retention int32, created time.Time) {
		t.Helper()
		out, err := rds.NewFromConfig(e.p.Config()).DescribeDBInstances(ctx, &rds.DescribeDBInstancesInput{DBInstanceIdentifier: &in.Server.ID})
		if err != nil || len(out.DBInstances) != 1 {
			t.Fatalf("RDS instance %s: %v", in.Server.ID, err)
		}
		db := out.DBInstances[0]
		return awssdk.ToString(db.DBInstanceClass), awssdk.ToInt32(db.AllocatedStorage), awssdk.ToInt32(db.BackupRetentionPeriod), awssdk.ToTime(db.InstanceCreateTime)
	}
	_, _, _, born := describe()
	// with is the job's config with some fields changed: PATCH takes the whole config.
	with := func(set map[string]any) map[string]any {
		var cfg map[string]any
		if err := json.Unmarshal(j.Config, &cfg); err != nil {
			t.Fatal(err)
		}
		for k, v := range set {
			cfg[k] = v
		}
		return cfg
	}
	base := "/api/provisioning-jobs/" + j.ID

	for name, tc := range map[string]struct {
		set   map[string]any
		field string
	}{
		"engine":          {map[string]any{"engine": "mysql"}, "config.engine"},
		"storage shrinks": {map[string]any{"allocatedStorageGB": 10}, "config.allocatedStorageGB"},
		"fewer backups":   {map[string]any{"backupRetentionDays": 1}, "config.backupRetentionDays"},
	} {
		err := e.s.Client.Do(ctx, http.MethodPatch, base, map[string]any{"config": with(tc.set)}, nil)
		var ae *client.Error
		if !asClientError(err, &ae) || ae.Status != http.StatusBadRequest || !hasField(ae, tc.field) {
			t.Errorf("%s: %v; want 400 naming %s", name, err, tc.field)
		}
	}

	next := with(map[string]any{"allocatedStorageGB": 50, "backupRetentionDays": 14})
	var plan struct {
		Resources []struct {
			Action     string `json:"action"`
			Disruption string `json:"disruption"`
			Changes    []struct {
				Field string `json:"field"`
				From  any    `json:"from"`
				To    any    `json:"to"`
			} `json:"changes"`
		} `json:"resources"`
	}
	if err := e.s.Client.Do(ctx, http.MethodPost, base+"/update-plan", map[string]any{"config": next}, &plan); err != nil {
		t.Fatalf("update plan: %v", err)
	}
	if len(plan.Resources) != 1 || plan.Resources[0].Action != "in-place" || plan.Resources[0].Disruption != "none" || len(plan.Resources[0].Changes) != 2 {
		t.Fatalf("update plan %+v: want storage and retention in place, no disruption", plan)
	}
	if _, storage, retention, _ := describe(); storage != 20 || retention != 7 {
		t.Fatalf("after the dry run RDS has %d GB and %d days; want it untouched", storage, retention)
	}

	var patched job.Job
	if err := e.s.Client.Do(ctx, http.MethodPatch, base, map[string]any{"version": j.Version, "config": next}, &patched); err != nil {
		t.Fatalf("PATCH config: %v", err)
	}
	j = waitUpdated(t, e, j.ID, patched.Version)
	class, storage, retention, created := describe()
	if storage != 50 || retention != 14 || class != "db.t3.micro" || !created.Equal(born) {
		t.Fatalf("RDS after the update: %s, %d GB, %d days, created %v (was %v); want the same instance with 50 GB and 14 days", class, storage, retention, created, born)
	}
	// A second update, from the config as the job now holds it (with the first update's
	// applyImmediately): the instance class, left to the maintenance window. moto applies
	// every modification at once, so DescribeDBInstances shows it already.
	next = with(map[string]any{"instanceClass": "db.t3.small"})
	if err := e.s.Client.Do(ctx, http.MethodPatch, base, map[string]any{"version": j.Version, "config": next, "applyImmediately": false}, &patched); err != nil {
		t.Fatalf("PATCH config: %v", err)
	}
	j = waitUpdated(t, e, j.ID, patched.Version)
	if class, storage, _, _ := describe(); class != "db.t3.small" || storage != 50 {
		t.Fatalf("RDS after the second update: %s, %d GB; want db.t3.small, 50 GB", class, storage)
	}
	var revs struct {
		Data []struct {
			Number int    `json:"number"`
			Status string `json:"status"`
			Actor  string `json:"actor"`
		} `json:"data"`
	}
	if err := e.s.Client.Do(ctx, http.MethodGet, base+"/revisions", nil, &revs); err != nil {
		t.Fatal(err)
	}
	if len(revs.Data) != 3 || revs.Data[0].Status != "superseded" || revs.Data[1].Status != "superseded" || revs.Data[2].Status != "applied" || revs.Data[2].Actor == "" {
		t.Fatalf("revisions %+v: want the created config and the first update superseded, the second applied", revs.Data)
	}
	if n := e.auditActions(t, j.ID)["provisioning-job.update-config"]; n != 2 {
		t.Fatalf("audit: %d provisioning-job.update-config entries, want 2 (refusals and the dry run are not changes)", n)
	}

	// Fewer backups drops data: with allowDataLoss it awaits approval and RDS is untouched;
	// its requester cannot approve it; a second admin does, and RDS keeps 3 days.
	fewer := with(map[string]any{"backupRetentionDays": 3})
	var pending struct {
		job.Job
		PendingRevision int `json:"pendingRevision"`
	}
	if err := e.s.Client.Do(ctx, http.MethodPatch, base, map[string]any{"version": j.Version, "config": fewer, "allowDataLoss": true}, &pending); err != nil ||
		pending.PendingRevision != 4 || pending.Status != job.StatusCompleted {
		t.Fatalf("fewer backups with allowDataLoss: %v, pending revision %d, job %s; want revision 4 awaiting approval", err, pending.PendingRevision, pending.Status)
	}
	if _, _, retention, _ := describe(); retention != 14 {
		t.Fatalf("RDS keeps %d days before the approval, want 14", retention)
	}
	approve := base + "/revisions/4/approve"
	var ae *client.Error
	if err := e.s.Client.Do(ctx, http.MethodPost, approve, nil, nil); !asClientError(err, &ae) || ae.Status != http.StatusForbidden {
		t.Fatalf("approved by its requester: %v, want 403", err)
	}
	email := "approver@example.com"
	if err := e.s.Client.Do(ctx, http.MethodPost, "/api/users", map[string]string{"email": email, "roleID": "role_admin"}, nil); err != nil {
		t.Fatal(err)
	}
	var tok struct {
		Secret string `json:"secret"`
	}
	if err := e.s.Client.Do(ctx, http.MethodPost, "/api/tokens", map[string]string{"name": "approver", "email": email, "expiresIn": "1h"}, &tok); err != nil {
		t.Fatal(err)
	}
	var approved job.Job
	if err := client.New(e.s.URL, tok.Secret).Do(ctx, http.MethodPost, approve, map[string]string{"reason": "retention policy"}, &approved); err != nil || approved.Status != job.StatusQueued {
		t.Fatalf("approve: %v, job %s", err, approved.Status)
	}
	j = waitUpdated(t, e, j.ID, approved.Version)
	if _, _, retention, created := describe(); retention != 3 || !created.Equal(born) {
		t.Fatalf("RDS after the approved update keeps %d days (created %v); want 3 on the same instance", retention, created)
	}
	if n := e.auditActions(t, j.ID)["provisioning-job.approve-config"]; n != 1 {
		t.Fatalf("audit: %d provisioning-job.approve-config entries, want 1", n)
	}
	e.teardown(t, j.ID)
	if left := e.leftovers(t, j); len(left) > 0 {
		t.Fatalf("after teardown, moto still holds %v", left)
	}
}

// TestDatastoreUpdateSurvivesCrash kills the server (SIGKILL) right after the update's
// create_server sent ModifyDBInstance and before the engine recorded it; restarted, the server
// runs the step again (which finds the instance already modified and sends nothing) and
// completes the update: the same instance with the new storage, the revision applied.
func TestDatastoreUpdateSurvivesCrash(t *testing.T) {
	t.Parallel()
	endpoint := motoEnv.Endpoint(t)
	markers := t.TempDir()
	addr := childserver.FreeAddr(t)
	c := childserver.Start(t, append(os.Environ(), envServe+"=1", envDataDir+"="+t.TempDir(), envAddr+"="+addr,
		envCrashAt+"=update:create_server", envMarkers+"="+markers, "AWS_ENDPOINT_URL="+endpoint))
	cl := client.New("http://"+addr, childToken)
	c.WaitUp(cl)
	e := newEnvOn(t, &apptest.Server{URL: "http://" + addr, Token: childToken, Client: cl}, endpoint, false)
	ctx := testCtx(t)

	j := e.create(t, "datastore", `{"engine":"postgres","version":"16.3","allocatedStorageGB":20}`)
	j = waitStatus(t, cl, j.ID, job.StatusCompleted)
	var cfg map[string]any
	if err := json.Unmarshal(j.Config, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["allocatedStorageGB"] = 60
	var patched job.Job
	if err := cl.Do(ctx, http.MethodPatch, "/api/provisioning-jobs/"+j.ID, map[string]any{"version": j.Version, "config": cfg}, &patched); err != nil {
		t.Fatalf("PATCH config: %v", err)
	}
	restarts := 0
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if c.RestartIfDead() {
			restarts++
			c.WaitUp(cl)
		}
		var got job.Job
		err := cl.Do(ctx, http.MethodGet, "/api/provisioning-jobs/"+j.ID, nil, &got)
		if err == nil && got.Status == job.StatusCompleted && got.Version > patched.Version {
			break
		}
		if err == nil && got.Status == job.StatusFailed {
			t.Fatalf("update failed: %+v", got.Failure)
		}
		if time.Now().After(deadline) {
			t.Fatalf("update not completed after %d restarts: %v %v", restarts, got.Status, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if entries, _ := os.ReadDir(markers); len(entries) != 1 || restarts == 0 {
		t.Fatalf("crashed %d times, %d restarts; want one crash after the update's create_server", len(entries), restarts)
	}
	out, err := rds.NewFromConfig(e.p.Config()).DescribeDBInstances(ctx, &rds.DescribeDBInstancesInput{})
	if err != nil || len(out.DBInstances) != 1 || awssdk.ToInt32(out.DBInstances[0].AllocatedStorage) != 60 {
		t.Fatalf("RDS after the crash: %+v (%v); want the one instance with 60 GB", out, err)
	}
	var revs struct {
		Data []struct {
			Status string `json:"status"`
		} `json:"data"`
	}
	if err := cl.Do(ctx, http.MethodGet, "/api/provisioning-jobs/"+j.ID+"/revisions", nil, &revs); err != nil || len(revs.Data) != 2 || revs.Data[1].Status != "applied" {
		t.Fatalf("revisions %+v (%v): want the update applied", revs.Data, err)
	}
	e.teardown(t, j.ID)
}
