package aws

import (
	"context"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
)

// PruneNodeGroups deletes the node groups of cluster that this job made and keep does not
// name: a config update that removes a group. A group another party made in the same cluster
// is left alone. done is true once none of the job's groups outside keep is left (one being
// deleted counts until it is gone, so the step waits for it).
func (p *Provider) PruneNodeGroups(ctx context.Context, t Tags, cluster string, keep []string) (done bool, err error) {
	done = true
	var next *string
	for {
		page, err := p.eks.ListNodegroups(ctx, &eks.ListNodegroupsInput{ClusterName: &cluster, NextToken: next})
		if err != nil {
			return false, p.classify(err, false)
		}
		for _, name := range page.Nodegroups {
			if slices.Contains(keep, name) {
				continue
			}
			got, err := p.eks.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: &cluster, NodegroupName: ptr(name)})
			if gone(err) {
				continue
			}
			if err != nil {
				return false, p.classify(err, false)
			}
			if !t.Owns(got.Nodegroup.Tags) {
				continue
			}
			done = false
			if got.Nodegroup.Status == ekstypes.NodegroupStatusDeleting {
				continue
			}
			if _, err := p.eks.DeleteNodegroup(ctx, &eks.DeleteNodegroupInput{ClusterName: &cluster, NodegroupName: ptr(name)}); err != nil &&
				!gone(err) && !isCode(err, "ResourceInUseException") {
				return false, p.classify(err, true)
			}
		}
		if page.NextToken == nil {
			return done, nil
		}
		next = page.NextToken
	}
}

// resizeDesired is the desired size a resized group gets: the size it runs at, moved inside
// the new bounds, so that raising max alone does not change how many nodes run.
func resizeDesired(sc *ekstypes.NodegroupScalingConfig, lo, hi int32) int32 {
	d := lo
	if sc != nil && sc.DesiredSize != nil {
		d = *sc.DesiredSize
	}
	return max(lo, min(d, hi))
}
