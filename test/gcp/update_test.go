package gcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/groundworkhq/groundwork/internal/client"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/provider/gcp/gcpfake"
)

// patchConfig sends job j's config with set's fields changed as a config update and waits
// for the job to complete it.
func patchConfig(t *testing.T, e *env, j *job.Job, set map[string]any) *job.Job {
	t.Helper()
	var patched job.Job
	if err := e.s.Client.Do(testCtx(t), http.MethodPatch, "/api/provisioning-jobs/"+j.ID,
		map[string]any{"version": j.Version, "config": withConfig(t, j, set)}, &patched); err != nil {
		t.Fatalf("PATCH config: %v", err)
	}
	return e.jobs.WaitFor(t, j.ID, "completed after the update", func(got *job.Job) bool {
		if got.Status == job.StatusFailed {
			b, _ := json.MarshalIndent(got, "", " ")
			t.Fatalf("the update failed:\n%s", b)
		}
		return got.Status == job.StatusCompleted && got.Version > patched.Version
	})
}

// withConfig is j's config with set's fields changed: PATCH takes the whole config.
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

// refused checks that a PATCH of j's config with set is a 400 naming field with rule.
func refused(t *testing.T, e *env, j *job.Job, set map[string]any, field, rule string) {
	t.Helper()
	err := e.s.Client.Do(testCtx(t), http.MethodPatch, "/api/provisioning-jobs/"+j.ID, map[string]any{"config": withConfig(t, j, set)}, nil)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusBadRequest {
		t.Fatalf("PATCH %v: %v; want 400", set, err)
	}
	for _, fe := range ce.Errors {
		if fe.Field == field && fe.Rule == rule {
			return
		}
	}
	t.Fatalf("PATCH %v: %+v; want %s refused (%s)", set, ce.Errors, field, rule)
}

// TestDatastoreConfigUpdateOnCloudSQL: a live Cloud SQL datastore's disk grows and it keeps
// more backups through PATCH config, on the same instance (instances.patch, its operation
// polled); an engine change and a shrink are refused by field; DELETE leaves nothing.
func TestDatastoreConfigUpdateOnCloudSQL(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.jobs.Create(t, e.space.ID, "datastore", `{"engine":"postgres","version":"16","allocatedStorageGB":20,"backupRetentionDays":7}`)
	j = e.jobs.WaitStatus(t, j.ID, job.StatusCompleted)
	instance := func() (string, map[string]any) {
		t.Helper()
		for _, r := range e.cloud.Resources() {
			if r.Kind == "sql#instance" {
				s, _ := r.Body["settings"].(map[string]any)
				return fmt.Sprint(r.Body["createTime"]), s
			}
		}
		t.Fatal("no Cloud SQL instance in the project")
		return "", nil
	}
	born, _ := instance()

	refused(t, e, j, map[string]any{"engine": "mysql"}, "config.engine", "immutable")
	refused(t, e, j, map[string]any{"allocatedStorageGB": 10}, "config.allocatedStorageGB", "shrink")
	refused(t, e, j, map[string]any{"backupRetentionDays": 3}, "config.backupRetentionDays", "dataLoss")

	j = patchConfig(t, e, j, map[string]any{"allocatedStorageGB": 50, "backupRetentionDays": 14})
	created, s := instance()
	backup, _ := s["backupConfiguration"].(map[string]any)
	retention, _ := backup["backupRetentionSettings"].(map[string]any)
	if created != born || fmt.Sprint(s["dataDiskSizeGb"]) != "50" || fmt.Sprint(retention["retainedBackups"]) != "14" {
		t.Fatalf("Cloud SQL after the update: created %s (was %s), disk %v GB, %v backups; want the same instance with 50 GB and 14",
			created, born, s["dataDiskSizeGb"], retention["retainedBackups"])
	}
	if n := e.cloud.SQLPatches(strings.TrimPrefix(instanceName(t, j), "projects/"+gcpfake.Project+"/instances/")); n != 1 {
		t.Errorf("%d instances.patch calls; want 1", n)
	}
	var in map[string]any
	_ = json.Unmarshal(j.Infra, &in)
	if _, ok := in["serverUpdate"]; ok {
		t.Errorf("the update's operations are still on record: %v", in["serverUpdate"])
	}
	e.jobs.Teardown(t, j.ID)
	if left := labelled(e.cloud, j.ID); len(left) > 0 {
		t.Fatalf("after teardown the project still holds %v of the job", left)
	}
}

// instanceName is the Cloud SQL instance the job's infra records.
func instanceName(t *testing.T, j *job.Job) string {
	t.Helper()
	var in struct {
		Server struct {
			ID string `json:"id"`
		} `json:"server"`
	}
	if err := json.Unmarshal(j.Infra, &in); err != nil || in.Server.ID == "" {
		t.Fatalf("no server in %s", j.Infra)
	}
	return in.Server.ID
}

// TestKubernetesConfigUpdateOnGKE: through PATCH config, a live GKE cluster gets a node pool
// added and another resized, then its control plane upgraded one minor version and a pool
// removed; a machine type change and a two-version jump are refused by field; DELETE leaves
// nothing.
func TestKubernetesConfigUpdateOnGKE(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	group := func(name, typ string, lo, hi int) map[string]any {
		return map[string]any{"name": name, "instanceType": typ, "min": lo, "max": hi}
	}
	j := e.jobs.Create(t, e.space.ID, "kubernetes", `{"name":"platform","version":"1.33","nodeGroups":[{"name":"system","instanceType":"e2-standard-4","min":1,"max":3}]}`)
	j = e.jobs.WaitStatus(t, j.ID, job.StatusCompleted)
	cluster := func() map[string]any {
		t.Helper()
		for _, r := range e.cloud.Resources() {
			if r.Kind == "container.cluster" {
				return r.Body
			}
		}
		t.Fatal("no GKE cluster in the project")
		return nil
	}
	pools := func() map[string]map[string]any {
		out := map[string]map[string]any{}
		list, _ := cluster()["nodePools"].([]any)
		for _, p := range list {
			m, _ := p.(map[string]any)
			out[fmt.Sprint(m["name"])] = m
		}
		return out
	}
	bounds := func(p map[string]any) string {
		as, _ := p["autoscaling"].(map[string]any)
		return fmt.Sprintf("%v..%v", as["totalMinNodeCount"], as["totalMaxNodeCount"])
	}

	refused(t, e, j, map[string]any{"nodeGroups": []any{group("system", "e2-standard-8", 1, 3)}}, "config.nodeGroups[0].instanceType", "immutable")
	refused(t, e, j, map[string]any{"version": "1.35"}, "config.version", "immutable")

	j = patchConfig(t, e, j, map[string]any{"nodeGroups": []any{group("system", "e2-standard-4", 2, 5), group("batch", "n2-standard-8", 0, 4)}})
	got := pools()
	if len(got) != 2 || bounds(got["system"]) != "2..5" || got["batch"] == nil || got["batch"]["status"] != "RUNNING" || bounds(got["batch"]) != "0..4" {
		t.Fatalf("pools after the first update: %v", got)
	}

	j = patchConfig(t, e, j, map[string]any{"version": "1.34", "nodeGroups": []any{group("batch", "n2-standard-8", 0, 4)}})
	got = pools()
	if len(got) != 1 || got["batch"] == nil {
		t.Fatalf("pools after the second update: %v; want batch alone", got)
	}
	if v := fmt.Sprint(cluster()["currentMasterVersion"]); !strings.HasPrefix(v, "1.34.") {
		t.Fatalf("the control plane runs %s; want 1.34", v)
	}
	e.jobs.Teardown(t, j.ID)
	if left := labelled(e.cloud, j.ID); len(left) > 0 {
		t.Fatalf("after teardown the project still holds %v of the job", left)
	}
}

// TestNetworkConfigUpdateOnGCP: through the server, a changed azCount of a live GCP network
// is refused by field (GCP subnets are regional: azCount places nothing), by the dry run and by
// PATCH alike, before anything reaches the project.
func TestNetworkConfigUpdateOnGCP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.jobs.Create(t, e.space.ID, "network", `{"cidr":"10.60.0.0/16"}`)
	j = e.jobs.WaitStatus(t, j.ID, job.StatusCompleted)
	before := e.cloud.Mutations(gcpfake.HostCompute, "/")
	err := e.s.Client.Do(testCtx(t), http.MethodPost, "/api/provisioning-jobs/"+j.ID+"/update-plan", map[string]any{"config": withConfig(t, j, map[string]any{"azCount": 3})}, nil)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusBadRequest || len(ce.Errors) != 1 || ce.Errors[0].Field != "config.azCount" || ce.Errors[0].Rule != "provider" {
		t.Fatalf("update plan of azCount: %v; want 400 naming config.azCount (provider)", err)
	}
	refused(t, e, j, map[string]any{"azCount": 3}, "config.azCount", "provider")
	if after := e.cloud.Mutations(gcpfake.HostCompute, "/"); after != before {
		t.Fatalf("%d compute mutations for a refused azCount change; want none", after-before)
	}
	if got := e.jobs.Get(t, j.ID); got.Version != j.Version || got.Status != job.StatusCompleted {
		t.Fatalf("job %s at version %d after the refusals (was %d); want it as it was", got.Status, got.Version, j.Version)
	}
	e.jobs.Teardown(t, j.ID)
	if left := labelled(e.cloud, j.ID); len(left) > 0 {
		t.Fatalf("after teardown the project still holds %v of the job", left)
	}
}

// TestNetworkPeeringThroughTheAPI adds a peering to a live network with PATCH config, moves
// it to another network and takes it away, each through the catalog's schema and the server.
func TestNetworkPeeringThroughTheAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	peerA := e.jobs.Create(t, e.space.ID, "network", `{"cidr":"10.61.0.0/16"}`)
	peerB := e.jobs.Create(t, e.space.ID, "network", `{"cidr":"10.62.0.0/16"}`)
	j := e.jobs.Create(t, e.space.ID, "network", `{"cidr":"10.63.0.0/16"}`)
	vpc := map[string]string{}
	for _, id := range []string{peerA.ID, peerB.ID, j.ID} {
		done := e.jobs.WaitStatus(t, id, job.StatusCompleted)
		var infra struct {
			Network struct {
				VPCID string `json:"vpcID"`
			} `json:"network"`
		}
		if err := json.Unmarshal(done.Infra, &infra); err != nil || infra.Network.VPCID == "" {
			t.Fatalf("job %s infra %s: %v; want its network", id, done.Infra, err)
		}
		vpc[id] = infra.Network.VPCID
	}
	// peers are the networks the job's network peers with, as the project holds them.
	peers := func() []string {
		t.Helper()
		n, ok := e.cloud.Lookup(gcpfake.HostCompute, vpc[j.ID])
		if !ok {
			t.Fatalf("network %s is gone", vpc[j.ID])
		}
		var out []string
		for _, p := range gcpfake.Peerings(n) {
			// The private services access connection is a peering too; it is not the job's.
			if peer := strings.TrimPrefix(p["network"].(string), gcpfake.SelfLinkBase); !strings.HasSuffix(peer, "/servicenetworking") {
				out = append(out, peer)
			}
		}
		return out
	}
	update := func(set map[string]any) {
		t.Helper()
		cur := e.jobs.Get(t, j.ID)
		cfg := withConfig(t, cur, set)
		if set["peering"] == nil {
			delete(cfg, "peering")
		}
		var patched job.Job
		if err := e.s.Client.Do(testCtx(t), http.MethodPatch, "/api/provisioning-jobs/"+j.ID, map[string]any{"version": cur.Version, "config": cfg}, &patched); err != nil {
			t.Fatalf("PATCH config %v: %v", set, err)
		}
		e.jobs.WaitFor(t, j.ID, "completed after the update", func(got *job.Job) bool {
			if got.Status == job.StatusFailed {
				t.Fatalf("the update %v failed: %+v", set, got.Failure)
			}
			return got.Status == job.StatusCompleted && got.Version > patched.Version
		})
	}
	update(map[string]any{"peering": map[string]any{"peerVPCID": vpc[peerA.ID]}})
	if got := peers(); len(got) != 1 || got[0] != vpc[peerA.ID] {
		t.Fatalf("after adding: peerings %v; want one to %s", got, vpc[peerA.ID])
	}
	update(map[string]any{"peering": map[string]any{"peerVPCID": vpc[peerB.ID]}})
	if got := peers(); len(got) != 1 || got[0] != vpc[peerB.ID] {
		t.Fatalf("after moving: peerings %v; want one to %s", got, vpc[peerB.ID])
	}
	update(map[string]any{"peering": nil})
	if got := peers(); len(got) != 0 {
		t.Fatalf("after removing: peerings %v; want none", got)
	}
	refused(t, e, e.jobs.Get(t, j.ID), map[string]any{"peering": map[string]any{"peerRegion": "europe-west1"}}, "config.peering.peerVPCID", "required")
	for _, id := range []string{j.ID, peerA.ID, peerB.ID} {
		e.jobs.Teardown(t, id)
		if left := labelled(e.cloud, id); len(left) > 0 {
			t.Fatalf("after teardown the project still holds %v of job %s", left, id)
		}
	}
}
