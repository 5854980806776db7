package azure

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/client"
	"github.com/groundworkhq/groundwork/internal/job"
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
		time.Sleep(50 * time.Millisecond)
	}
}

// refusedField reports whether err is a 400 naming field with rule.
func refusedField(err error, field, rule string) bool {
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusBadRequest {
		return false
	}
	for _, f := range ce.Errors {
		if f.Field == field && f.Rule == rule {
			return true
		}
	}
	return false
}

// withConfig is the job's config with some fields set: PATCH takes the whole config.
func withConfig(t *testing.T, j *job.Job, set map[string]any) map[string]any {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal(j.Config, &cfg); err != nil {
		t.Fatal(err)
	}
	for k, v := range set {
		cfg[k] = v
	}
	return cfg
}

// mutations counts the requests of method to paths containing part.
func mutations(e *env, method, part string) int {
	n := 0
	for _, c := range e.cloud.Calls() {
		if strings.HasPrefix(c, method+" ") && strings.Contains(strings.ToLower(c), strings.ToLower(part)) {
			n++
		}
	}
	return n
}

// A live PostgreSQL flexible server takes a config update through the server: storage grows
// and backup retention lengthens on the same server in one PATCH, polled as a wait; a shrink,
// a size change held for the maintenance window (which Azure cannot do) and high availability
// on a burstable size are refused by field. DELETE then leaves nothing of the job.
func TestDatastoreConfigUpdateOnAzure(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	e := newEnv(t, nil)
	j := e.create(t, "datastore", `{"engine":"postgres","version":"16","instanceClass":"Standard_D2ds_v5","allocatedStorageGB":32,"backupRetentionDays":7}`)
	j = waitStatus(t, e.s.Client, j.ID, job.StatusCompleted)
	var in struct {
		Server struct {
			ID string `json:"id"`
		} `json:"server"`
	}
	if err := json.Unmarshal(j.Infra, &in); err != nil || in.Server.ID == "" {
		t.Fatalf("server on record: %s, %v", j.Infra, err)
	}
	base := "/api/provisioning-jobs/" + j.ID

	if err := e.s.Client.Do(ctx, http.MethodPatch, base, map[string]any{"config": withConfig(t, j, map[string]any{"allocatedStorageGB": 16})}, nil); !refusedField(err, "config.allocatedStorageGB", "shrink") {
		t.Errorf("shrink: %v; want 400 naming config.allocatedStorageGB (shrink)", err)
	}
	if err := e.s.Client.Do(ctx, http.MethodPatch, base, map[string]any{"config": withConfig(t, j, map[string]any{"instanceClass": "Standard_D4ds_v5"}),
		"applyImmediately": false}, nil); !refusedField(err, "config.instanceClass", "provider") {
		t.Errorf("size for the maintenance window: %v; want 400 naming config.instanceClass (provider)", err)
	}
	if err := e.s.Client.Do(ctx, http.MethodPatch, base, map[string]any{"config": withConfig(t, j, map[string]any{"instanceClass": "Standard_B2s", "multiAZ": true})}, nil); !refusedField(err, "config", "provider") {
		t.Errorf("high availability on a burstable size: %v; want 400 naming config (provider)", err)
	}
	if n := mutations(e, "PATCH", "/flexibleServers/"); n != 0 {
		t.Fatalf("refused updates sent %d PATCH", n)
	}

	var patched job.Job
	if err := e.s.Client.Do(ctx, http.MethodPatch, base, map[string]any{"version": j.Version,
		"config": withConfig(t, j, map[string]any{"allocatedStorageGB": 64, "backupRetentionDays": 14})}, &patched); err != nil {
		t.Fatalf("PATCH config: %v", err)
	}
	j = waitUpdated(t, e, j.ID, patched.Version)
	raw, ok := e.cloud.Raw(in.Server.ID)
	if !ok {
		t.Fatalf("server %s is gone", in.Server.ID)
	}
	var srv struct {
		Properties struct {
			State   string
			Storage struct{ StorageSizeGB int }
			Backup  struct{ BackupRetentionDays int }
		}
	}
	if err := json.Unmarshal(raw, &srv); err != nil {
		t.Fatal(err)
	}
	if p := srv.Properties; p.Storage.StorageSizeGB != 64 || p.Backup.BackupRetentionDays != 14 || p.State != "Ready" {
		t.Fatalf("server after the update: %+v; want 64 GB, 14 days, Ready", p)
	}
	if n := mutations(e, "PATCH", "/flexibleServers/"); n != 1 {
		t.Errorf("the update sent %d PATCH; want one", n)
	}
	if n := mutations(e, "PUT", "/flexibleServers/"); n != 1 {
		t.Errorf("the server was PUT %d times; want once (its creation)", n)
	}
	if strings.Contains(string(j.Infra), `"serverUpdate"`) {
		t.Errorf("the update's record is left in infra: %s", j.Infra)
	}

	e.teardown(t, j.ID)
	if left := tagged(e.cloud, j.ID); len(left) > 0 {
		t.Fatalf("after teardown the subscription still holds %v of the job", left)
	}
}

// A live AKS cluster takes a config update through the server: the control plane goes up one
// minor version, a pool is added and one resized; an instance type change and a version
// jump are refused by field. DELETE then leaves nothing of the job.
func TestKubernetesConfigUpdateOnAzure(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	e := newEnv(t, nil)
	j := e.create(t, "kubernetes", `{"name":"plat","version":"1.30","nodeGroups":[{"name":"system","instanceType":"Standard_D4s_v5","min":1,"max":3},{"name":"batch","instanceType":"Standard_D8s_v5","min":0,"max":4}]}`)
	j = waitStatus(t, e.s.Client, j.ID, job.StatusCompleted)
	var in struct {
		Cluster struct {
			ID string `json:"id"`
		} `json:"cluster"`
	}
	if err := json.Unmarshal(j.Infra, &in); err != nil || in.Cluster.ID == "" {
		t.Fatalf("cluster on record: %v", err)
	}
	base := "/api/provisioning-jobs/" + j.ID
	groups := func(gs ...map[string]any) map[string]any { return withConfig(t, j, map[string]any{"nodeGroups": gs}) }
	system := map[string]any{"name": "system", "instanceType": "Standard_D4s_v5", "min": 1, "max": 3}

	if err := e.s.Client.Do(ctx, http.MethodPatch, base, map[string]any{"config": groups(system,
		map[string]any{"name": "batch", "instanceType": "Standard_D16s_v5", "min": 0, "max": 4})}, nil); !refusedField(err, "config.nodeGroups[1].instanceType", "immutable") {
		t.Errorf("instance type: %v; want 400 naming config.nodeGroups[1].instanceType (immutable)", err)
	}
	if err := e.s.Client.Do(ctx, http.MethodPatch, base, map[string]any{"config": withConfig(t, j, map[string]any{"version": "1.32"})}, nil); !refusedField(err, "config.version", "immutable") {
		t.Errorf("version jump: %v; want 400 naming config.version (immutable)", err)
	}

	next := groups(system,
		map[string]any{"name": "batch", "instanceType": "Standard_D8s_v5", "min": 2, "max": 6},
		map[string]any{"name": "gpu", "instanceType": "Standard_NC6s_v3", "min": 0, "max": 2})
	next["version"] = "1.31"
	var patched job.Job
	if err := e.s.Client.Do(ctx, http.MethodPatch, base, map[string]any{"version": j.Version, "config": next}, &patched); err != nil {
		t.Fatalf("PATCH config: %v", err)
	}
	j = waitUpdated(t, e, j.ID, patched.Version)

	pool := func(name string) (props struct {
		Mode                string
		MinCount, MaxCount  int
		OrchestratorVersion string
		EnableAutoScaling   bool
	}, ok bool) {
		raw, ok := e.cloud.Raw(in.Cluster.ID + "/agentPools/" + name)
		if !ok {
			return props, false
		}
		var v struct{ Properties json.RawMessage }
		_ = json.Unmarshal(raw, &v)
		_ = json.Unmarshal(v.Properties, &props)
		return props, true
	}
	if p, ok := pool("batch"); !ok || !p.EnableAutoScaling || p.MinCount != 2 || p.MaxCount != 6 {
		t.Errorf("pool batch: %+v (found %v); want autoscaled 2..6", p, ok)
	}
	if p, ok := pool("gpu"); !ok || p.MaxCount != 2 {
		t.Errorf("pool gpu: %+v (found %v); want made, 0..2", p, ok)
	}
	raw, _ := e.cloud.Raw(in.Cluster.ID)
	var mc struct {
		Properties struct{ CurrentKubernetesVersion string }
	}
	_ = json.Unmarshal(raw, &mc)
	if mc.Properties.CurrentKubernetesVersion != "1.31" {
		t.Errorf("control plane at %q; want 1.31", mc.Properties.CurrentKubernetesVersion)
	}

	// The gpu pool removed in a later update is deleted; the others stay.
	var again job.Job
	if err := e.s.Client.Do(ctx, http.MethodPatch, base, map[string]any{"version": j.Version, "config": withConfig(t, j, map[string]any{
		"nodeGroups": []map[string]any{system, {"name": "batch", "instanceType": "Standard_D8s_v5", "min": 2, "max": 6}}})}, &again); err != nil {
		t.Fatalf("PATCH config: %v", err)
	}
	j = waitUpdated(t, e, j.ID, again.Version)
	var left []string
	for _, name := range []string{"system", "batch", "gpu"} {
		if _, ok := pool(name); ok {
			left = append(left, name)
		}
	}
	if !slices.Equal(left, []string{"system", "batch"}) {
		t.Errorf("pools after removing gpu: %v", left)
	}

	e.teardown(t, j.ID)
	if left := tagged(e.cloud, j.ID); len(left) > 0 {
		t.Fatalf("after teardown the subscription still holds %v of the job", left)
	}
	for _, r := range e.cloud.Resources() {
		if strings.Contains(strings.ToLower(r.ID), "/managedclusters/") {
			t.Errorf("left after teardown: %s", r.ID)
		}
	}
}

// A live Azure network refuses a larger azCount through the server, naming it: its subnets
// span every zone of the region, so there is nothing to add. (The catalog's network settings
// carry no peering, so a peering update is proved through the pipeline in
// internal/provider/azure.)
func TestNetworkAZCountRefusedOnAzure(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	e := newEnv(t, nil)
	j := waitStatus(t, e.s.Client, e.create(t, "network", `{"cidr":"10.60.0.0/16"}`).ID, job.StatusCompleted)
	before := len(e.cloud.Calls())
	err := e.s.Client.Do(ctx, http.MethodPatch, "/api/provisioning-jobs/"+j.ID, map[string]any{"config": withConfig(t, j, map[string]any{"azCount": 3})}, nil)
	if !refusedField(err, "config.azCount", "provider") {
		t.Errorf("azCount: %v; want 400 naming config.azCount (provider)", err)
	}
	if after := e.cloud.Calls(); len(after) != before {
		t.Errorf("a refused update reached Azure: %v", after[before:])
	}
	e.teardown(t, j.ID)
	if left := tagged(e.cloud, j.ID); len(left) > 0 {
		t.Fatalf("after teardown the subscription still holds %v of the job", left)
	}
}
