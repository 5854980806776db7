package gcp

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/provider/drivertest"
	"github.com/groundworkhq/groundwork/internal/provider/gcp/gcpfake"
)

// ensureCarrying calls EnsureCluster as the cluster step does, the operations each call
// records kept in the job's infra for the next, until the cluster is ready.
func ensureCarrying(ctx context.Context, t *testing.T, d KubernetesDriver, j *job.Job, cfg kubernetes.Config) {
	t.Helper()
	n, err := d.EnsureNetwork(ctx, j, cfg)
	if err != nil || !n.Ready {
		t.Fatalf("network: %+v, %v", n, err)
	}
	r, err := d.EnsureRoles(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	until(t, ctx, "cluster", func() (bool, error) {
		cl, err := d.EnsureCluster(ctx, j, cfg, n, r)
		if err != nil {
			return false, err
		}
		raw, _ := json.Marshal(map[string]any{kubernetes.InfraCluster: map[string]any{"data": cl.Data}})
		j.Infra = raw
		return cl.Ready, nil
	})
}

// operationReads counts the GKE operations.get calls the fake answered.
func operationReads(cloud *gcpfake.Cloud) int {
	n := 0
	for _, c := range cloud.Calls() {
		if c.Service == gcpfake.HostContainer && c.Method == http.MethodGet && strings.Contains(c.Path, "/operations/") {
			n++
		}
	}
	return n
}

// A config update of a live GKE cluster: the control plane goes up one minor version
// (clusters.update), a node group the config drops has its pool deleted, and a pool another
// party added to the cluster stays; each operation is polled, and a run that lost its
// operations (a crash) sends no second upgrade or delete.
func TestEnsureClusterUpgradesAndRemovesPools(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c, cloud := testClient(t)
	d := KubernetesDriver{C: c}
	j := k8sJob("job_upgrade01", k8sConfig)
	if err := drivertest.EnsureCluster(ctx, d, j, k8sConfig); err != nil {
		t.Fatal(err)
	}
	full := d.clusterID(j)
	// Another party's pool in the job's cluster: no labels of the job.
	cloud.Update(gcpfake.HostContainer, full, func(r *gcpfake.Resource) {
		pools, _ := r.Body["nodePools"].([]any)
		r.Body["nodePools"] = append(pools, map[string]any{"name": "theirs", "status": "RUNNING",
			"config": map[string]any{"machineType": "e2-small"}, "autoscaling": map[string]any{"enabled": true, "totalMaxNodeCount": 2.0}})
	})
	if got := readCluster(ctx, t, c, j).CurrentMasterVersion; !strings.HasPrefix(got, "1.33.") {
		t.Fatalf("the cluster runs %s; want 1.33", got)
	}

	cloud.SetTicks(3)
	cfg := k8sConfig
	cfg.Version = "1.34"
	cfg.NodeGroups = []kubernetes.NodeGroup{k8sConfig.NodeGroups[0]}
	polled := operationReads(cloud)
	j.Infra = nil
	ensureCarrying(ctx, t, d, j, cfg)
	if operationReads(cloud) == polled {
		t.Error("no operation was polled")
	}
	got := readCluster(ctx, t, c, j)
	if !strings.HasPrefix(got.CurrentMasterVersion, "1.34.") {
		t.Errorf("the control plane runs %s; want 1.34", got.CurrentMasterVersion)
	}
	names := map[string]bool{}
	for _, np := range got.NodePools {
		names[np.Name] = true
	}
	if !names["system"] || names["gpu-workers"] || !names["theirs"] || len(names) != 2 {
		t.Errorf("pools %v; want system and theirs", names)
	}
	if up, del := cloud.GKEOps("UPGRADE_MASTER", full), cloud.GKEOps("DELETE_NODE_POOL", full); up != 1 || del != 1 {
		t.Errorf("%d upgrades, %d pool deletes; want 1, 1", up, del)
	}

	// Run again without the operations on record (a crash lost the step's result): nothing
	// is sent again.
	j.Infra = nil
	if err := drivertest.EnsureCluster(ctx, d, j, cfg); err != nil {
		t.Fatal(err)
	}
	if up, del := cloud.GKEOps("UPGRADE_MASTER", full), cloud.GKEOps("DELETE_NODE_POOL", full); up != 1 || del != 1 {
		t.Errorf("after a re-run: %d upgrades, %d pool deletes; want 1, 1", up, del)
	}

	// An upgrade and a delete whose operations were lost right after they were sent: the
	// next calls wait on the cluster GKE is changing and send neither again.
	cfg2 := cfg
	cfg2.Version = "1.35"
	n, _ := d.EnsureNetwork(ctx, j, cfg2)
	r, _ := d.EnsureRoles(ctx, j)
	if cl, err := d.EnsureCluster(ctx, j, cfg2, n, r); err != nil || cl.Ready {
		t.Fatalf("upgrade: %+v, %v", cl, err)
	}
	if err := drivertest.EnsureCluster(ctx, d, j, cfg2); err != nil {
		t.Fatal(err)
	}
	if up := cloud.GKEOps("UPGRADE_MASTER", full); up != 2 {
		t.Errorf("%d upgrades for two versions; want 2", up)
	}
	if got := readCluster(ctx, t, c, j).CurrentMasterVersion; !strings.HasPrefix(got, "1.35.") {
		t.Errorf("the control plane runs %s; want 1.35", got)
	}
	// GKE's release channel moved the control plane past the config: it is not downgraded.
	if err := drivertest.EnsureCluster(ctx, d, j, cfg); err != nil {
		t.Fatal(err)
	}
	if up := cloud.GKEOps("UPGRADE_MASTER", full); up != 2 {
		t.Errorf("a config older than the control plane sent an upgrade (%d)", up)
	}
}

// The cluster step of an update that upgrades the control plane and removes a pool needs no
// permission its plan (made with the cluster on record) does not list.
func TestPlanListsUpgradeAndPoolRemoval(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c, cloud := testClient(t)
	j := k8sJob("job_planupgr", k8sConfig)
	j.Infra = json.RawMessage(`{}`)
	pl := kubernetes.New(func(context.Context, *job.Job) (kubernetes.Driver, error) { return KubernetesDriver{C: c}, nil }, nil, time.Millisecond)
	steps := pl.Steps(j)
	cluster := slices.IndexFunc(steps, func(s pipeline.Step) bool { return s.Name == kubernetes.StepCluster })
	runSteps(ctx, t, j, steps[:cluster+1], false, nil)

	cfg := k8sConfig
	cfg.Version = "1.34"
	cfg.NodeGroups = cfg.NodeGroups[:1]
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	j.Config = raw
	again := StepPlan(j, kubernetes.StepCluster, PlanAccount{})
	seen := runMarked(ctx, t, cloud, j, steps[cluster:cluster+1])
	full := KubernetesDriver{C: c}.clusterID(j)
	if up, del := cloud.GKEOps("UPGRADE_MASTER", full), cloud.GKEOps("DELETE_NODE_POOL", full); up != 1 || del != 1 {
		t.Fatalf("%d upgrades, %d pool deletes; want the run to make one of each", up, del)
	}
	for _, pm := range seen[kubernetes.StepCluster] {
		if !slices.Contains(again.Operations, pm) {
			t.Errorf("%s needed but not in the plan %v", pm, again.Operations)
		}
	}
}
