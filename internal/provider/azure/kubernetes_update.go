package azure

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"

	"github.com/groundworkhq/groundwork/internal/job"
)

// opDeletePool is the key of an agent pool's delete in flight, followed by the pool's name.
const opDeletePool = "delete pool "

// removePools deletes the job's agent pools (by their tags) of the cluster that ps no longer
// names, one call at a time; it reports whether none is left. AKS runs one operation on a
// cluster at a time, so a pool being deleted is waited on before the next goes.
func (d KubernetesDriver) removePools(ctx context.Context, j *job.Job, aps *armcontainerservice.AgentPoolsClient, ops Ops, ps []pool) (bool, error) {
	rg, clName := d.C.ResourceGroup, name(j, "aks")
	keep := map[string]bool{}
	for _, p := range ps {
		keep[p.name] = true
	}
	listed := map[string]bool{}
	pager := aps.NewListPager(rg, clName, nil)
	var doomed []string
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return false, d.C.Classify(fmt.Errorf("list agent pools of %s: %w", clName, err))
		}
		for _, ap := range page.Value {
			if ap == nil || ap.Properties == nil {
				continue
			}
			n := deref(ap.Name)
			listed[n] = true
			if !keep[n] && owns(j, ap.Properties.Tags) {
				doomed = append(doomed, n)
			}
		}
	}
	// A delete recorded for a pool that is no longer listed is done.
	for k := range ops {
		if n, ok := strings.CutPrefix(k, opDeletePool); ok && !listed[n] {
			delete(ops, k)
		}
	}
	for _, n := range doomed {
		gone, err := remove(ctx, d.C, ops, opDeletePool+n, func(ctx context.Context) (State, error) {
			v, err := aps.Get(ctx, rg, clName, n, nil)
			var t map[string]*string
			if v.Properties != nil {
				t = v.Properties.Tags
			}
			return stateOf(err, t, v.Properties, j)
		}, func(ctx context.Context, tok string) (*runtime.Poller[armcontainerservice.AgentPoolsClientDeleteResponse], error) {
			return aps.BeginDelete(ctx, rg, clName, n, &armcontainerservice.AgentPoolsClientBeginDeleteOptions{ResumeToken: tok})
		})
		if !gone || err != nil {
			return false, err
		}
	}
	return true, nil
}

// resized is a pool's request when the pool exists: it keeps the Kubernetes version it runs
// (a resize is not an upgrade), and an autoscaled pool keeps the nodes it runs, moved inside
// the new bounds, as the node group does on EKS.
func resized(req, have *armcontainerservice.ManagedClusterAgentPoolProfileProperties) *armcontainerservice.ManagedClusterAgentPoolProfileProperties {
	if have == nil {
		return req
	}
	if have.OrchestratorVersion != nil {
		req.OrchestratorVersion = have.OrchestratorVersion
	}
	if isTrue(req.EnableAutoScaling) && have.Count != nil && req.MinCount != nil && req.MaxCount != nil {
		req.Count = to.Ptr(min(max(*have.Count, *req.MinCount), *req.MaxCount))
	}
	return req
}

// atLeast reports whether the cluster runs version's minor version or a newer one (a
// control plane is never downgraded to match a config).
func atLeast(mc armcontainerservice.ManagedCluster, version string) bool {
	want, ok := minorVersion(version)
	if !ok || mc.Properties == nil {
		return true
	}
	have, ok := minorVersion(firstOf(deref(mc.Properties.CurrentKubernetesVersion), deref(mc.Properties.KubernetesVersion)))
	if !ok {
		return true
	}
	return have[0] > want[0] || (have[0] == want[0] && have[1] >= want[1])
}

// upgraded is the cluster's PUT that upgrades its control plane to version: the cluster as
// AKS holds it (its agent pools at the versions they run) with the new kubernetesVersion.
func upgraded(mc armcontainerservice.ManagedCluster, version string) armcontainerservice.ManagedCluster {
	if mc.Properties == nil {
		mc.Properties = &armcontainerservice.ManagedClusterProperties{}
	}
	props := *mc.Properties
	props.KubernetesVersion = to.Ptr(version)
	props.ProvisioningState = nil
	props.PowerState = nil
	mc.Properties = &props
	return mc
}

func minorVersion(v string) ([2]int, bool) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return [2]int{}, false
	}
	a, err1 := strconv.Atoi(parts[0])
	b, err2 := strconv.Atoi(parts[1])
	return [2]int{a, b}, err1 == nil && err2 == nil
}
