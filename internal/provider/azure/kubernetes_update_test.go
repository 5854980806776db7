package azure

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/provider/azure/azurefake"
	"github.com/groundworkhq/groundwork/internal/provider/drivertest"
)

// calls counts the mutating requests of method whose path ends with suffix.
func calls(cloud *azurefake.Cloud, method, suffix string) int {
	n := 0
	for _, c := range cloud.Calls() {
		if strings.HasPrefix(c, method+" ") && strings.HasSuffix(strings.ToLower(c), strings.ToLower(suffix)) {
			n++
		}
	}
	return n
}

// ensureRecorded runs EnsureCluster until the cluster is ready as the engine runs the cluster
// step: each call on a client opened again (a restarted server) and the operations of the
// previous call recorded in the job's infra. It returns the operations it saw recorded.
func ensureRecorded(ctx context.Context, t *testing.T, cloud *azurefake.Cloud, group string, j *job.Job, cfg kubernetes.Config) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	drivertest.Until(ctx, t, "ensure cluster", func() (bool, error) {
		d := KubernetesDriver{C: clientOn(t, cloud, group)}
		n, err := d.EnsureNetwork(ctx, j, cfg)
		if err != nil || !n.Ready {
			return false, err
		}
		r, err := d.EnsureRoles(ctx, j)
		if err != nil {
			return false, err
		}
		cl, err := d.EnsureCluster(ctx, j, cfg, n, r)
		if ops, ok := cl.Data["ops"].(Ops); ok {
			for k := range ops {
				seen[k] = true
			}
		}
		infra, merr := pipeline.MergeInfra(j.Infra, map[string]any{kubernetes.InfraCluster: cl})
		if merr != nil {
			t.Fatal(merr)
		}
		j.Infra = infra
		return err == nil && cl.Ready, err
	})
	return seen
}

// A config update of a live AKS cluster: the control plane is upgraded one minor version (its
// pools keep theirs), a pool is resized (its running nodes kept inside the new bounds), one is
// added and the job's pool the config no longer names is deleted, while a pool someone else
// added stays. Every operation is resumed from its recorded token by a client opened again,
// and a second run sends nothing.
func TestEnsureClusterCarriesOutAnUpdate(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c, cloud := testClient(t)
	cfg := kubernetes.Config{Name: "upd", Version: "1.30", NodeGroups: []kubernetes.NodeGroup{
		{Name: "system", InstanceType: "Standard_D2s_v5", Min: 1, Max: 3},
		{Name: "batch", InstanceType: "Standard_D4s_v5", Min: 1, Max: 2},
		{Name: "old", InstanceType: "Standard_D4s_v5", Min: 1, Max: 1}}}
	j := k8sJob("job_update01", cfg)
	j.Infra = json.RawMessage(`{}`)
	ensureRecorded(ctx, t, cloud, c.ResourceGroup, j, cfg)

	f, _ := armcontainerservice.NewClientFactory(c.SubscriptionID, c.cred, c.opts)
	aps, mcs, clName := f.NewAgentPoolsClient(), f.NewManagedClustersClient(), name(j, "aks")
	// Another party's pool in the same cluster, without the job's tags.
	poller, err := aps.BeginCreateOrUpdate(ctx, c.ResourceGroup, clName, "theirs", armcontainerservice.AgentPool{Properties: &armcontainerservice.ManagedClusterAgentPoolProfileProperties{
		VMSize: to.Ptr("Standard_D2s_v5"), Count: to.Ptr[int32](1), Mode: to.Ptr(armcontainerservice.AgentPoolModeUser)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	clusterPuts, batchPuts := calls(cloud, "PUT", "/managedClusters/"+clName), calls(cloud, "PUT", "/agentPools/batch")

	next := cfg
	next.Version = "1.31"
	next.NodeGroups = []kubernetes.NodeGroup{
		{Name: "system", InstanceType: "Standard_D2s_v5", Min: 1, Max: 3},
		{Name: "batch", InstanceType: "Standard_D4s_v5", Min: 2, Max: 5},
		{Name: "gpu", InstanceType: "Standard_NC6s_v3", Min: 0, Max: 2}}
	raw, _ := json.Marshal(next)
	j.Config = raw
	polls := cloud.OperationPolls()
	seen := ensureRecorded(ctx, t, cloud, c.ResourceGroup, j, next)
	for _, op := range []string{"upgrade cluster", "create pool batch", "create pool gpu", "delete pool old"} {
		if !seen[op] {
			t.Errorf("no token recorded for %q; saw %v", op, seen)
		}
	}
	if cloud.OperationPolls() == polls {
		t.Error("no operation was polled from its token")
	}
	if got := calls(cloud, "PUT", "/managedClusters/"+clName) - clusterPuts; got != 1 {
		t.Errorf("the cluster was PUT %d times for the upgrade; want once", got)
	}
	if got := calls(cloud, "PUT", "/agentPools/batch") - batchPuts; got != 1 {
		t.Errorf("pool batch was PUT %d times; want once", got)
	}
	if got := calls(cloud, "DELETE", "/agentPools/old"); got != 1 {
		t.Errorf("pool old was deleted %d times; want once", got)
	}

	mc, err := mcs.Get(ctx, c.ResourceGroup, clName, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := deref(mc.Properties.CurrentKubernetesVersion); v != "1.31" {
		t.Errorf("control plane at %q, want 1.31", v)
	}
	var names []string
	for _, p := range mc.Properties.AgentPoolProfiles {
		names = append(names, deref(p.Name))
		if deref(p.Name) == "system" && deref(p.OrchestratorVersion) != "1.30" {
			t.Errorf("the system pool runs %q; a control plane upgrade leaves it at 1.30", deref(p.OrchestratorVersion))
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"batch", "gpu", "system", "theirs"}) {
		t.Errorf("pools %v; want batch, gpu, system, theirs", names)
	}
	batch, err := aps.Get(ctx, c.ResourceGroup, clName, "batch", nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := batch.Properties; !isTrue(p.EnableAutoScaling) || *p.MinCount != 2 || *p.MaxCount != 5 || *p.Count != 2 || deref(p.OrchestratorVersion) != "1.30" {
		t.Errorf("batch: autoscale %v %d..%d count %d version %s; want 2..5, 2 nodes (its 1 moved inside), 1.30",
			p.EnableAutoScaling, *p.MinCount, *p.MaxCount, *p.Count, deref(p.OrchestratorVersion))
	}

	// Run again: everything is as the config asks, nothing is changed (the credentials'
	// POST is a read).
	writes := func() []string {
		var out []string
		for _, c := range cloud.Calls() {
			if !strings.HasPrefix(c, "POST ") {
				out = append(out, c)
			}
		}
		return out
	}
	before := len(writes())
	ensureRecorded(ctx, t, cloud, c.ResourceGroup, j, next)
	if after := writes(); len(after) != before {
		t.Errorf("a second run sent %v", after[before:])
	}
}

// The first node group removed: the next becomes the System pool before the old one is
// deleted, as AKS keeps a cluster's last System pool.
func TestEnsureClusterMovesTheSystemPool(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c, cloud := testClient(t)
	cfg := kubernetes.Config{Name: "sys", NodeGroups: []kubernetes.NodeGroup{
		{Name: "first", InstanceType: "Standard_D2s_v5", Min: 1, Max: 1},
		{Name: "second", InstanceType: "Standard_D2s_v5", Min: 1, Max: 2}}}
	j := k8sJob("job_syspool1", cfg)
	j.Infra = json.RawMessage(`{}`)
	ensureRecorded(ctx, t, cloud, c.ResourceGroup, j, cfg)
	cfg.NodeGroups = cfg.NodeGroups[1:]
	ensureRecorded(ctx, t, cloud, c.ResourceGroup, j, cfg)
	f, _ := armcontainerservice.NewClientFactory(c.SubscriptionID, c.cred, c.opts)
	aps := f.NewAgentPoolsClient()
	if _, err := aps.Get(ctx, c.ResourceGroup, name(j, "aks"), "first", nil); !notFound(err) {
		t.Errorf("pool first: %v; want it deleted", err)
	}
	second, err := aps.Get(ctx, c.ResourceGroup, name(j, "aks"), "second", nil)
	if err != nil || second.Properties.Mode == nil || *second.Properties.Mode != armcontainerservice.AgentPoolModeSystem {
		t.Errorf("pool second: %+v, %v; want the System pool", second.Properties, err)
	}
}
