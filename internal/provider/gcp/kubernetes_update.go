package gcp

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	container "google.golang.org/api/container/v1"

	"github.com/groundworkhq/groundwork/internal/job"
)

// Keys of a cluster step's operations in flight that a config update starts.
const (
	opUpgradeMaster = "upgrade master"
	opDeletePool    = "delete pool "
)

// upgradeMaster moves the cluster's control plane to the config's version when it runs an
// older minor version (clusters.update with desiredMasterVersion; the pipeline admits one
// minor version at a time). A control plane newer than the config (GKE's release channel
// upgrades it by itself) is left alone: it is never downgraded. It reports whether the
// control plane is at the version with no upgrade under way; otherwise the operation started
// is in ops and the step asks again. An upgrade whose answer was lost (a crash before the
// step recorded it) is not sent again: the cluster is RECONCILING until it is done, then
// reads at the new version.
func (d KubernetesDriver) upgradeMaster(ctx context.Context, s *container.Service, ops Ops, full string, cl *container.Cluster, want string) (bool, error) {
	if done, err := d.C.pollRecorded(ctx, ops, opUpgradeMaster, Resource{Poll: d.poll(s)}); err != nil || !done {
		return false, err
	}
	if want == "" || !olderMinor(cl.CurrentMasterVersion, want) {
		return true, nil
	}
	if cl.Status == "RECONCILING" {
		// GKE is changing the cluster (this upgrade, sent by a call whose answer was lost,
		// or a pool's resize); it takes one change at a time.
		return false, nil
	}
	op, err := s.Projects.Locations.Clusters.Update(full, &container.UpdateClusterRequest{
		Update: &container.ClusterUpdate{DesiredMasterVersion: want}}).Context(ctx).Do()
	if busy(err) {
		return false, nil
	}
	name, err := d.started(op, err)
	if err != nil {
		return false, d.C.Classify(fmt.Errorf("upgrade the control plane of %s to %s: %w", cl.Name, want, err))
	}
	if name != "" {
		ops[opUpgradeMaster] = name
	}
	return false, nil
}

// olderMinor reports whether version have (GKE's "1.29.5-gke.1000000") is of an older minor
// version than want ("1.30"). A version either cannot read is not compared.
func olderMinor(have, want string) bool {
	h, hok := majorMinor(have)
	w, wok := majorMinor(want)
	return hok && wok && (h[0] < w[0] || h[0] == w[0] && h[1] < w[1])
}

func majorMinor(v string) ([2]int, bool) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return [2]int{}, false
	}
	a, err1 := strconv.Atoi(parts[0])
	b, err2 := strconv.Atoi(strings.SplitN(parts[1], "-", 2)[0])
	return [2]int{a, b}, err1 == nil && err2 == nil
}

// removePools deletes the node pools of the cluster that the job made (their nodes carry the
// job's labels) and the config no longer names, one at a time; a pool made by someone else
// in the same cluster is left alone. It reports whether none is left to delete.
func (d KubernetesDriver) removePools(ctx context.Context, s *container.Service, j *job.Job, ops Ops, full string, keep []string) (bool, error) {
	list, err := s.Projects.Locations.Clusters.NodePools.List(full).Context(ctx).Do()
	if err != nil {
		return false, d.C.Classify(err)
	}
	kept := map[string]bool{}
	for _, n := range keep {
		kept[n] = true
	}
	for _, np := range list.NodePools {
		if kept[np.Name] || np.Config == nil || !owns(j, np.Config.ResourceLabels) {
			continue
		}
		key := opDeletePool + np.Name
		if done, err := d.C.pollRecorded(ctx, ops, key, Resource{Poll: d.poll(s)}); err != nil || !done {
			return false, err
		}
		if np.Status == "STOPPING" {
			// Its delete is under way (sent by a call whose answer was lost).
			return false, nil
		}
		op, err := s.Projects.Locations.Clusters.NodePools.Delete(full + "/nodePools/" + np.Name).Context(ctx).Do()
		switch {
		case notFound(err):
			continue
		case busy(err):
			return false, nil
		}
		name, err := d.started(op, err)
		if err != nil {
			return false, d.C.Classify(fmt.Errorf("delete node pool %s: %w", np.Name, err))
		}
		if name != "" {
			ops[key] = name
		}
		return false, nil
	}
	return true, nil
}
