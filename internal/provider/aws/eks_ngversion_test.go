package aws

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
)

// fakeNodeGroupVersions stands in for EKS's UpdateNodegroupVersion and DescribeUpdate of a
// node group, which moto lacks, in the real API's shape (fakeClusterVersions, one per group).
// after, when set, is called as each update starts.
type fakeNodeGroupVersions struct {
	f     fakeClusterVersions
	mu    sync.Mutex
	after func(group string)
}

func (n *fakeNodeGroupVersions) UpdateNodegroupVersion(ctx context.Context, cluster, group, version, token string) (string, error) {
	n.f.mu.Lock()
	_, again := n.f.byToken[token]
	n.f.mu.Unlock()
	if !again && n.after != nil {
		n.after(group)
	}
	return n.f.UpdateClusterVersion(ctx, cluster+"/"+group, version, token)
}

func (n *fakeNodeGroupVersions) DescribeNodegroupUpdate(ctx context.Context, cluster, group, id string) (string, []string, error) {
	return n.f.DescribeUpdate(ctx, cluster+"/"+group, id)
}

// A config update from 1.29 to 1.30 upgrades the control plane, then each of the job's node
// groups to it (one UpdateNodegroupVersion per group, polled until Successful); a group's
// failed update is the user's to act on, with the cloud's reasons. A cluster at its version
// starts no group update: new groups are made at the control plane's version.
func TestEKSDriverUpgradesNodeGroups(t *testing.T) {
	t.Parallel()
	for _, settle := range []string{string(ekstypes.UpdateStatusSuccessful), string(ekstypes.UpdateStatusFailed)} {
		t.Run(settle, func(t *testing.T) {
			t.Parallel()
			p, _ := testProvider(t, "ap-northeast-2")
			ctx, tags := testCtx(t), testTags(t)
			j := &job.Job{ID: tags.JobID, OrgID: tags.OrgID, Family: job.FamilyKubernetes, Provider: Name}
			cluster := &fakeClusterVersions{polls: 1, settle: string(ekstypes.UpdateStatusSuccessful)}
			groups := &fakeNodeGroupVersions{f: fakeClusterVersions{polls: 2, settle: settle}}
			groups.after = func(group string) {
				cluster.mu.Lock()
				defer cluster.mu.Unlock()
				if u := cluster.updates["upd-1"]; u == nil || u.seen <= cluster.polls {
					t.Errorf("node group %s's update started before the control plane's succeeded", group)
				}
			}
			d := KubernetesDriver{P: p, Versions: cluster, NodeGroupVersions: groups}
			net, err := p.EnsureNetwork(ctx, NetworkSpec{Tags: tags, NoNAT: true})
			if err != nil {
				t.Fatal(err)
			}
			roles, err := d.EnsureRoles(ctx, j)
			if err != nil {
				t.Fatal(err)
			}
			n := kubernetes.Network{VPCID: net.VPCID, SubnetIDs: net.PrivateSubnetIDs}
			cfg := kubernetes.Config{Name: "ngup", Version: "1.29", NodeGroups: []kubernetes.NodeGroup{
				{Name: "a", InstanceType: "m5.large", Min: 1, Max: 2}, {Name: "b", InstanceType: "m5.large", Min: 1, Max: 1}}}
			converge := func() (int, error) {
				for round := 0; round < 30; round++ {
					cl, err := d.EnsureCluster(ctx, j, cfg, n, roles)
					if err != nil || cl.Ready {
						return round, err
					}
				}
				t.Fatal("cluster not ready after 30 rounds")
				return 0, nil
			}
			if _, err := converge(); err != nil {
				t.Fatal(err)
			}
			for _, g := range cfg.NodeGroups {
				got, err := p.eks.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: &cfg.Name, NodegroupName: &g.Name})
				if err != nil || *got.Nodegroup.Version != "1.29" {
					t.Fatalf("node group %s: %v (%v); want it made at the control plane's 1.29", g.Name, got, err)
				}
			}
			if len(groups.f.updates) != 0 {
				t.Fatalf("node group updates %v on a cluster at its version", groups.f.updates)
			}

			cfg.Version = "1.30"
			rounds, err := converge()
			if settle == string(ekstypes.UpdateStatusFailed) {
				if err == nil || fault.ClassOf(err) != job.ClassUserAction || !strings.Contains(err.Error(), "subnet has no free addresses") ||
					!strings.Contains(err.Error(), "node group a") {
					t.Fatalf("failed node group update: %v; want a user-action error naming group a with the cloud's reason", err)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				// One wait for the control plane, then two per group's InProgress answers, the
				// groups polled side by side.
				if rounds != cluster.polls+groups.f.polls {
					t.Errorf("ready after %d waits, want %d", rounds, cluster.polls+groups.f.polls)
				}
			}
			// The groups are upgraded side by side, so b's update was under way when a's failed.
			want := map[string]bool{"ngup/a": true, "ngup/b": true}
			if len(groups.f.updates) != len(want) {
				t.Fatalf("node group updates %+v; want one per group in %v", groups.f.updates, want)
			}
			for _, u := range groups.f.updates {
				if !want[u.cluster] || u.version != "1.30" {
					t.Fatalf("node group update %+v; want one per group in %v, to 1.30", u, want)
				}
			}
			deleteUntilDone(t, func() (bool, error) { return d.DeleteCluster(ctx, j, cfg.Name) })
			if err := d.DeleteRoles(ctx, j); err != nil {
				t.Fatal(err)
			}
			deleteUntilDone(t, func() (bool, error) { return p.DeleteNetwork(ctx, tags) })
		})
	}
}

// A failed control-plane or node group upgrade is answered again, not repeated, by a poll or
// a retry of the same run of the cluster step; the same update sent again (a new run: the
// config update re-opens the step with a fresh record) starts a new one.
func TestEKSUpgradeSentAgainIsANewUpdate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tags := Tags{OrgID: "org_1", JobID: "job_again"}
	first := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	j := &job.Job{ID: tags.JobID, OrgID: tags.OrgID, Steps: []job.StepRecord{{Name: kubernetes.StepCluster, StartedAt: &first}}}
	cluster := &fakeClusterVersions{settle: string(ekstypes.UpdateStatusFailed)}
	groups := &fakeNodeGroupVersions{f: fakeClusterVersions{settle: string(ekstypes.UpdateStatusFailed)}}
	attempt := func() {
		t.Helper()
		run := StepRun(j, kubernetes.StepCluster)
		if _, err := EnsureClusterVersion(ctx, cluster, tags, run, "c", "1.29", "1.30"); fault.ClassOf(err) != job.ClassUserAction {
			t.Fatalf("control plane: %v; want the failed update's user-action error", err)
		}
		if _, err := EnsureNodeGroupVersion(ctx, groups, tags, run, "c", "a", "1.29", "1.30"); fault.ClassOf(err) != job.ClassUserAction {
			t.Fatalf("node group: %v; want the failed update's user-action error", err)
		}
	}
	attempt()
	attempt() // a retry of the failed step: the same run
	if len(cluster.updates) != 1 || len(groups.f.updates) != 1 {
		t.Fatalf("updates after a retry of the same run: %d and %d, want 1 and 1", len(cluster.updates), len(groups.f.updates))
	}
	// Stored and read back, the start keeps its second: the same run.
	reread := first.Add(123456 * time.Microsecond)
	j.Steps[0].StartedAt = &reread
	attempt()
	if len(cluster.updates) != 1 {
		t.Fatalf("the same run at the store's precision started update %d", len(cluster.updates))
	}
	second := first.Add(time.Hour)
	j.Steps[0].StartedAt = &second
	attempt()
	if len(cluster.updates) != 2 || len(groups.f.updates) != 2 {
		t.Fatalf("updates after the update was sent again: %d and %d, want 2 and 2", len(cluster.updates), len(groups.f.updates))
	}
}
