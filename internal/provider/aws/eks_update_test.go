package aws

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
)

// A config update re-runs the cluster step with the new config; the EKS driver converges the
// cluster's node groups to it: a group added, one resized in place (desired kept inside the
// new bounds), one removed, and a group someone else made in the cluster left alone.
func TestEKSDriverConvergesNodeGroups(t *testing.T) {
	t.Parallel()
	p, _ := testProvider(t, "eu-central-1")
	ctx, tags := testCtx(t), testTags(t)
	j := &job.Job{ID: tags.JobID, OrgID: tags.OrgID, Family: job.FamilyKubernetes, Provider: Name}
	d := KubernetesDriver{P: p}
	net, err := p.EnsureNetwork(ctx, NetworkSpec{Tags: tags, NoNAT: true})
	if err != nil {
		t.Fatal(err)
	}
	roles, err := d.EnsureRoles(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	n := kubernetes.Network{VPCID: net.VPCID, SubnetIDs: net.PrivateSubnetIDs}
	converge := func(c kubernetes.Config) {
		t.Helper()
		for round := 0; ; round++ {
			cl, err := d.EnsureCluster(ctx, j, c, n, roles)
			if err != nil {
				t.Fatal(err)
			}
			if cl.Ready {
				return
			}
			if round == 20 {
				t.Fatalf("cluster not ready after %d rounds for %+v", round, c.NodeGroups)
			}
		}
	}
	sizes := func(cluster string) map[string][3]int32 {
		t.Helper()
		out := map[string][3]int32{}
		list, err := p.eks.ListNodegroups(ctx, &eks.ListNodegroupsInput{ClusterName: &cluster})
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range list.Nodegroups {
			got, err := p.eks.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: &cluster, NodegroupName: &name})
			if err != nil {
				t.Fatal(err)
			}
			sc := got.Nodegroup.ScalingConfig
			out[name] = [3]int32{*sc.MinSize, *sc.MaxSize, *sc.DesiredSize}
		}
		return out
	}
	want := func(cluster string, w map[string][3]int32) {
		t.Helper()
		if got := sizes(cluster); !maps.Equal(got, w) {
			t.Fatalf("node groups (min, max, desired) = %v, want %v", got, w)
		}
	}

	cfg := kubernetes.Config{Name: "converge", NodeGroups: []kubernetes.NodeGroup{{Name: "default", InstanceType: "m5.large", Min: 2, Max: 4}}}
	converge(cfg)
	// A group another party added to the cluster is not the job's to remove.
	foreign := "theirs"
	if _, err := p.eks.CreateNodegroup(ctx, &eks.CreateNodegroupInput{ClusterName: &cfg.Name, NodegroupName: &foreign,
		NodeRole: &roles.NodeRole, Subnets: n.SubnetIDs, InstanceTypes: []string{"t3.small"},
		ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: ptr(int32(1)), MaxSize: ptr(int32(1)), DesiredSize: ptr(int32(1))}}); err != nil {
		t.Fatal(err)
	}
	want(cfg.Name, map[string][3]int32{"default": {2, 4, 2}, foreign: {1, 1, 1}})

	// Add a group and resize the first: max up keeps the nodes running as they are.
	cfg.NodeGroups = []kubernetes.NodeGroup{{Name: "default", InstanceType: "m5.large", Min: 1, Max: 6},
		{Name: "batch", InstanceType: "c5.xlarge", Min: 0, Max: 3}}
	converge(cfg)
	want(cfg.Name, map[string][3]int32{"default": {1, 6, 2}, "batch": {0, 3, 0}, foreign: {1, 1, 1}})

	// Shrink below the running size: desired follows max down.
	cfg.NodeGroups[0].Min, cfg.NodeGroups[0].Max = 1, 1
	converge(cfg)
	want(cfg.Name, map[string][3]int32{"default": {1, 1, 1}, "batch": {0, 3, 0}, foreign: {1, 1, 1}})

	// Remove the first group.
	cfg.NodeGroups = cfg.NodeGroups[1:]
	converge(cfg)
	want(cfg.Name, map[string][3]int32{"batch": {0, 3, 0}, foreign: {1, 1, 1}})

	if _, err := p.eks.DeleteNodegroup(ctx, &eks.DeleteNodegroupInput{ClusterName: &cfg.Name, NodegroupName: &foreign}); err != nil {
		t.Fatal(err)
	}
	deleteUntilDone(t, func() (bool, error) { return d.DeleteCluster(ctx, j, cfg.Name) })
	if err := d.DeleteRoles(ctx, j); err != nil {
		t.Fatal(err)
	}
	deleteUntilDone(t, func() (bool, error) { return p.DeleteNetwork(ctx, tags) })
}

// fakeClusterVersions stands in for EKS's UpdateClusterVersion and DescribeUpdate, which moto
// lacks, in the real API's shape: an update has an id, one client token answers one update,
// and DescribeUpdate shows it InProgress for a few calls, then Successful (or failed).
type fakeClusterVersions struct {
	mu      sync.Mutex
	byToken map[string]string
	updates map[string]*fakeUpdate
	polls   int    // InProgress answers before the update settles
	settle  string // Successful or Failed
}

type fakeUpdate struct {
	cluster, version string
	seen             int
}

func (f *fakeClusterVersions) UpdateClusterVersion(_ context.Context, cluster, version, token string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id, ok := f.byToken[token]; ok {
		return id, nil
	}
	for _, u := range f.updates {
		if u.cluster == cluster && u.seen <= f.polls {
			return "", fmt.Errorf("ResourceInUseException: cluster %s has an update in progress", cluster)
		}
	}
	if f.byToken == nil {
		f.byToken, f.updates = map[string]string{}, map[string]*fakeUpdate{}
	}
	id := fmt.Sprintf("upd-%d", len(f.updates)+1)
	f.byToken[token], f.updates[id] = id, &fakeUpdate{cluster: cluster, version: version}
	return id, nil
}

func (f *fakeClusterVersions) DescribeUpdate(_ context.Context, cluster, id string) (string, []string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	u, ok := f.updates[id]
	if !ok || u.cluster != cluster {
		return "", nil, fmt.Errorf("ResourceNotFoundException: no update %s", id)
	}
	u.seen++
	if u.seen <= f.polls {
		return string(ekstypes.UpdateStatusInProgress), nil, nil
	}
	if f.settle == string(ekstypes.UpdateStatusFailed) {
		return f.settle, []string{"Ec2SubnetInvalidConfiguration: subnet has no free addresses"}, nil
	}
	return f.settle, nil, nil
}

// A config update from 1.29 to 1.30 starts one EKS version update and waits (the cluster is
// not ready) until DescribeUpdate says it succeeded; a failed update is the user's to act on.
func TestEKSDriverUpgradesControlPlane(t *testing.T) {
	t.Parallel()
	for _, settle := range []string{string(ekstypes.UpdateStatusSuccessful), string(ekstypes.UpdateStatusFailed)} {
		t.Run(settle, func(t *testing.T) {
			t.Parallel()
			p, _ := testProvider(t, "ap-southeast-2")
			ctx, tags := testCtx(t), testTags(t)
			j := &job.Job{ID: tags.JobID, OrgID: tags.OrgID, Family: job.FamilyKubernetes, Provider: Name}
			versions := &fakeClusterVersions{polls: 2, settle: settle}
			// The node groups follow at once (polls 0): this test counts the control plane's waits.
			d := KubernetesDriver{P: p, Versions: versions, NodeGroupVersions: &fakeNodeGroupVersions{f: fakeClusterVersions{settle: string(ekstypes.UpdateStatusSuccessful)}}}
			net, err := p.EnsureNetwork(ctx, NetworkSpec{Tags: tags, NoNAT: true})
			if err != nil {
				t.Fatal(err)
			}
			roles, err := d.EnsureRoles(ctx, j)
			if err != nil {
				t.Fatal(err)
			}
			n := kubernetes.Network{VPCID: net.VPCID, SubnetIDs: net.PrivateSubnetIDs}
			cfg := kubernetes.Config{Name: "upgrade", Version: "1.29", NodeGroups: []kubernetes.NodeGroup{{Name: "default", InstanceType: "m5.large", Min: 1, Max: 2}}}
			for round := 0; ; round++ {
				cl, err := d.EnsureCluster(ctx, j, cfg, n, roles)
				if err != nil {
					t.Fatal(err)
				}
				if cl.Ready {
					break
				}
				if round == 20 {
					t.Fatal("cluster not ready")
				}
			}
			if len(versions.updates) != 0 {
				t.Fatalf("updates %v on a cluster at its version", versions.updates)
			}
			cfg.Version = "1.30"
			var rounds int
			for ; ; rounds++ {
				cl, err := d.EnsureCluster(ctx, j, cfg, n, roles)
				if settle == string(ekstypes.UpdateStatusFailed) && err != nil {
					if fault.ClassOf(err) != job.ClassUserAction || !strings.Contains(err.Error(), "subnet has no free addresses") {
						t.Fatalf("failed update: %v; want a user-action error with the cloud's reason", err)
					}
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if cl.Ready {
					if settle != string(ekstypes.UpdateStatusSuccessful) {
						t.Fatal("ready after a failed update")
					}
					break
				}
				if rounds == 20 {
					t.Fatal("upgrade not done after 20 rounds")
				}
			}
			if rounds != versions.polls {
				t.Errorf("settled after %d waits, want %d (one per InProgress answer)", rounds, versions.polls)
			}
			if len(versions.updates) != 1 || versions.updates["upd-1"].version != "1.30" || versions.updates["upd-1"].cluster != "upgrade" {
				t.Fatalf("updates %+v; want one, of cluster upgrade to 1.30", versions.updates)
			}
			deleteUntilDone(t, func() (bool, error) { return d.DeleteCluster(ctx, j, cfg.Name) })
			if err := d.DeleteRoles(ctx, j); err != nil {
				t.Fatal(err)
			}
			deleteUntilDone(t, func() (bool, error) { return p.DeleteNetwork(ctx, tags) })
		})
	}
}
