package gcp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/provider/gcp/gcpfake"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/secrets/secretstest"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// sqlSettings reads the fake's instance settings.
func sqlSettings(t *testing.T, cloud *gcpfake.Cloud, inst string) map[string]any {
	t.Helper()
	in, ok := cloud.Lookup(gcpfake.HostSQLAdmin, "projects/"+gcpfake.Project+"/instances/"+inst)
	if !ok {
		t.Fatalf("instance %s is not in the fake", inst)
	}
	s, _ := in.Body["settings"].(map[string]any)
	return s
}

// modifyUntilDone calls Modify as the pipeline does, carrying the recorded operations from
// call to call, until it is no longer waiting; it returns every call's result.
func modifyUntilDone(t *testing.T, ctx context.Context, m dspipe.Modifier, p dspipe.ModifyParams) []dspipe.ModifyResult {
	t.Helper()
	var out []dspipe.ModifyResult
	until(t, ctx, "modify", func() (bool, error) {
		res, err := m.Modify(ctx, p)
		if err != nil {
			return false, err
		}
		out = append(out, res)
		// The step keeps Data in the job's infra: the next call gets it back decoded.
		raw, err := json.Marshal(res.Data)
		if err != nil {
			return false, err
		}
		p.Data = nil
		if err := json.Unmarshal(raw, &p.Data); err != nil {
			return false, err
		}
		return !res.Wait, nil
	})
	return out
}

// A live Cloud SQL instance takes a larger disk, more retained backups, another machine type
// and high availability through one instances.patch, whose operation is polled until it is
// done; a second run sends nothing; a patch whose operation was lost (a crash before the
// step recorded it) is not sent again: the next call waits on Cloud SQL's busy instance, then
// finds the new values.
func TestCloudSQLModify(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, cloud := testClient(t)
	d := datastoreOn(c)
	m, ok := d.Servers.(dspipe.Modifier)
	if !ok {
		t.Fatal("the GCP datastore driver is no dspipe.Modifier")
	}
	if got := m.Modifiable(ds.EngineRedis); !slices.Equal(got, []string{"allocatedStorageGB"}) {
		t.Errorf("Modifiable(redis) = %v; want its memory alone", got)
	}
	jobID := "job_sqlmod"
	inst := name(&job.Job{ID: jobID}, sqlEngines[ds.EnginePostgres].role)
	settings := map[string]any{"instanceClass": "db-custom-2-7680", "allocatedStorageGB": float64(20), "backupRetentionDays": float64(7)}
	ensureDatastore(t, ctx, d, dspipe.CreateParams{JobID: jobID, Engine: ds.EnginePostgres, AdminPassword: ds.GeneratePassword(), Settings: settings})

	cloud.SetTicks(3)
	next := map[string]any{"instanceClass": "db-custom-4-15360", "allocatedStorageGB": float64(50), "backupRetentionDays": float64(14), "multiAZ": true}
	p := dspipe.ModifyParams{JobID: jobID, Engine: ds.EnginePostgres, Settings: next, ApplyImmediately: true}
	res := modifyUntilDone(t, ctx, m, p)
	if len(res) < 2 || !res[0].Wait || modifyOps(res[0].Data)[opPatch] == "" {
		t.Fatalf("first call = %+v; want a patch operation recorded and waited on", res)
	}
	if want := []string{"instanceClass", "allocatedStorageGB", "backupRetentionDays", "multiAZ"}; !slices.Equal(res[0].Changed, want) {
		t.Errorf("changed = %v; want %v", res[0].Changed, want)
	}
	s := sqlSettings(t, cloud, inst)
	backup, _ := s["backupConfiguration"].(map[string]any)
	retention, _ := backup["backupRetentionSettings"].(map[string]any)
	if s["tier"] != "db-custom-4-15360" || fmt.Sprint(s["dataDiskSizeGb"]) != "50" || fmt.Sprint(retention["retainedBackups"]) != "14" ||
		s["availabilityType"] != "REGIONAL" || backup["pointInTimeRecoveryEnabled"] != true {
		t.Errorf("settings after the patch = tier %v, disk %v, backups %v, availability %v, PITR %v", s["tier"], s["dataDiskSizeGb"],
			retention["retainedBackups"], s["availabilityType"], backup["pointInTimeRecoveryEnabled"])
	}
	if n := cloud.SQLPatches(inst); n != 1 {
		t.Errorf("%d patches sent; want 1", n)
	}
	// Run again (a step re-run after its checkpoint was lost): nothing differs, nothing sent.
	if again := modifyUntilDone(t, ctx, m, dspipe.ModifyParams{JobID: jobID, Engine: ds.EnginePostgres, Settings: next}); len(again) != 1 || len(again[0].Changed) != 0 {
		t.Errorf("a re-run = %+v; want nothing changed", again)
	}
	if n := cloud.SQLPatches(inst); n != 1 {
		t.Errorf("%d patches after a re-run; want 1", n)
	}

	// A crash after the patch, before its operation was recorded: the next call has no
	// operation on record and must not send a second patch.
	cloud.SetTicks(4)
	grow := map[string]any{"instanceClass": "db-custom-4-15360", "allocatedStorageGB": float64(80), "backupRetentionDays": float64(14), "multiAZ": true}
	first, err := m.Modify(ctx, dspipe.ModifyParams{JobID: jobID, Engine: ds.EnginePostgres, Settings: grow})
	if err != nil || !first.Wait || !slices.Equal(first.Changed, []string{"allocatedStorageGB"}) {
		t.Fatalf("patch = %+v, %v", first, err)
	}
	res = modifyUntilDone(t, ctx, m, dspipe.ModifyParams{JobID: jobID, Engine: ds.EnginePostgres, Settings: grow}) // first.Data lost
	if n := cloud.SQLPatches(inst); n != 2 {
		t.Errorf("%d patches after the crash; want 2 (one per update)", n)
	}
	if last := res[len(res)-1]; len(last.Changed) != 0 {
		t.Errorf("the re-run's last call changed %v; want the values found in place", last.Changed)
	}
	if got := fmt.Sprint(sqlSettings(t, cloud, inst)["dataDiskSizeGb"]); got != "80" {
		t.Errorf("disk = %s GB; want 80", got)
	}

	// A disk grown past the config by Cloud SQL's auto-resize is not shrunk.
	if res := modifyUntilDone(t, ctx, m, dspipe.ModifyParams{JobID: jobID, Engine: ds.EnginePostgres, Settings: next}); slices.Contains(res[0].Changed, "allocatedStorageGB") {
		t.Errorf("a smaller disk in the settings was sent: %+v", res[0])
	}
	deleteDatastore(t, ctx, d, jobID, ds.EnginePostgres)
}

// A datastore job's create_server run again by a config update patches the instance on
// record: its plan, made with the server in its infra, lists the update permission, and a
// plan without the server does not.
func TestPlanListsServerUpdate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, from, to, perm string }{
		{"postgres", `{"engine":"postgres","name":"orders","allocatedStorageGB":20,"backupRetentionDays":7}`,
			`{"engine":"postgres","name":"orders","allocatedStorageGB":50,"backupRetentionDays":14,"applyImmediately":true}`, "cloudsql.instances.update"},
		{"redis", `{"engine":"redis","name":"sessions","allocatedStorageGB":1}`,
			`{"engine":"redis","name":"sessions","allocatedStorageGB":2,"applyImmediately":true}`, "redis.instances.update"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			c, cloud := testClient(t)
			j := &job.Job{ID: "job_planmod" + tc.name, OrgID: "org_test", SpaceID: "spc_test", Family: job.FamilyDatastore, Provider: Name,
				Config: json.RawMessage(tc.from), Infra: json.RawMessage(`{}`)}
			local, err := secrets.OpenLocal(t.TempDir(), "")
			if err != nil {
				t.Fatal(err)
			}
			// The driver reads the job's config (its network) from the job the pipeline runs.
			d := DatastoreDriver{Resolve: func(context.Context, string) (Placement, error) { return Placement{C: c, J: j}, nil }}.Driver()
			pl := dspipe.New(dspipe.Options{Drivers: map[string]dspipe.Driver{Name: d}, Secrets: secretstest.Vault(local), Poll: time.Millisecond})
			steps := pl.Steps(j)
			server := slices.IndexFunc(steps, func(s pipeline.Step) bool { return s.Name == dspipe.StepCreateServer })
			if fresh := StepPlan(j, dspipe.StepCreateServer, PlanAccount{}); slices.Contains(fresh.Operations, tc.perm) {
				t.Fatal("a server not made yet is planned to be updated")
			}
			runSteps(ctx, t, j, steps[:server+1], false, nil)

			j.Config = json.RawMessage(tc.to)
			again := StepPlan(j, dspipe.StepCreateServer, PlanAccount{})
			seen := runMarked(ctx, t, cloud, j, steps[server:server+1])
			if !slices.Contains(seen[dspipe.StepCreateServer], tc.perm) {
				t.Fatalf("the instance was changed without %s: %v", tc.perm, seen)
			}
			for _, pm := range seen[dspipe.StepCreateServer] {
				if !slices.Contains(again.Operations, pm) {
					t.Errorf("%s needed but not in the plan %v", pm, again.Operations)
				}
			}
		})
	}
}

// A live Memorystore instance's memory (allocatedStorageGB) is resized through
// instances.patch, its operation polled; a patch whose operation was lost is waited on
// (the instance is UPDATING), not sent again.
func TestMemorystoreModify(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, cloud := testClient(t)
	d := datastoreOn(c)
	m := d.Servers.(dspipe.Modifier)
	jobID := "job_redismod"
	info, _ := ensureDatastore(t, ctx, d, dspipe.CreateParams{JobID: jobID, Engine: ds.EngineRedis, Settings: map[string]any{"allocatedStorageGB": float64(1)}})
	memory := func() string {
		in, ok := cloud.Lookup(gcpfake.HostRedis, info.ID)
		if !ok {
			t.Fatalf("instance %s is not in the fake", info.ID)
		}
		return fmt.Sprint(in.Body["memorySizeGb"])
	}

	cloud.SetTicks(3)
	res := modifyUntilDone(t, ctx, m, dspipe.ModifyParams{JobID: jobID, Engine: ds.EngineRedis, Settings: map[string]any{"allocatedStorageGB": float64(4)}})
	if len(res) < 2 || !res[0].Wait || modifyOps(res[0].Data)[opPatch] == "" || !slices.Equal(res[0].Changed, []string{"allocatedStorageGB"}) {
		t.Fatalf("calls %+v; want a patch recorded and waited on", res)
	}
	if got := memory(); got != "4" {
		t.Errorf("memory = %s GB; want 4", got)
	}
	// The operation is lost right after the patch: the next calls wait on the instance.
	grow := dspipe.ModifyParams{JobID: jobID, Engine: ds.EngineRedis, Settings: map[string]any{"allocatedStorageGB": float64(8)}}
	if first, err := m.Modify(ctx, grow); err != nil || !first.Wait {
		t.Fatalf("patch = %+v, %v", first, err)
	}
	res = modifyUntilDone(t, ctx, m, grow)
	if got := memory(); got != "8" || len(res[len(res)-1].Changed) != 0 {
		t.Errorf("memory = %s GB, last call %+v; want 8 found in place", got, res[len(res)-1])
	}
	if n := cloud.RedisPatches(info.ID); n != 2 {
		t.Errorf("%d patches for two resizes; want 2", n)
	}
	deleteDatastore(t, ctx, d, jobID, ds.EngineRedis)
}

// The datastore pipeline on the GCP driver plans a Cloud SQL update: sizing changes go in
// place, a machine type left for the maintenance window is refused (Cloud SQL applies it at
// once), and a Memorystore instance's tier stays as it is.
func TestPlanUpdateOnGCP(t *testing.T) {
	t.Parallel()
	c, _ := testClient(t)
	local, err := secrets.OpenLocal(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	pl := dspipe.New(dspipe.Options{Drivers: map[string]dspipe.Driver{Name: datastoreOn(c)}, Secrets: secretstest.Vault(local), Poll: time.Millisecond})
	later := false
	for _, tc := range []struct {
		name, from, to string
		later          bool
		refused        string // "field rule", "" for a plan
	}{
		{"sql sizes", `{"engine":"postgres","allocatedStorageGB":20,"backupRetentionDays":7}`, `{"engine":"postgres","allocatedStorageGB":50,"backupRetentionDays":14,"multiAZ":true}`, false, ""},
		{"sql machine type now", `{"engine":"mysql","instanceClass":"db-custom-2-7680"}`, `{"engine":"mysql","instanceClass":"db-custom-4-15360"}`, false, ""},
		{"sql machine type later", `{"engine":"mysql","instanceClass":"db-custom-2-7680"}`, `{"engine":"mysql","instanceClass":"db-custom-4-15360"}`, true, "config.instanceClass provider"},
		{"redis memory", `{"engine":"redis","allocatedStorageGB":1}`, `{"engine":"redis","allocatedStorageGB":4}`, false, ""},
		{"redis tier", `{"engine":"redis"}`, `{"engine":"redis","multiAZ":true}`, false, "config.multiAZ provider"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			j := &job.Job{ID: "job_gcpplan", Provider: Name, Family: job.FamilyDatastore, Config: json.RawMessage(tc.from),
				Infra: json.RawMessage(`{"server":{"id":"projects/p/instances/i"}}`)}
			for _, s := range pl.Steps(j) {
				j.Steps = append(j.Steps, job.StepRecord{Name: s.Name, Status: job.StepDone})
			}
			req := pipeline.UpdateRequest{Config: json.RawMessage(tc.to)}
			if tc.later {
				req.ApplyImmediately = &later
			}
			plan, err := pl.PlanUpdate(context.Background(), j, req)
			if tc.refused == "" {
				if err != nil || !plan.Changed() || plan.Resources[0].Action != pipeline.ActionInPlace {
					t.Fatalf("plan = %+v, %v; want an in-place change", plan, err)
				}
				return
			}
			fields, ok := validation.Fields(err)
			if !ok || len(fields) != 1 || fields[0].Field+" "+fields[0].Rule != tc.refused {
				t.Fatalf("err = %v; want %s", err, tc.refused)
			}
		})
	}
}
