package aws

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
)

// ClusterVersionUpdater starts a control-plane version update and reads how it goes. moto has
// no UpdateClusterVersion or DescribeUpdate, so tests give KubernetesDriver a stand-in;
// production uses SDKClusterVersions.
type ClusterVersionUpdater interface {
	// UpdateClusterVersion starts the update; the same token answers the same update.
	UpdateClusterVersion(ctx context.Context, cluster, version, token string) (updateID string, err error)
	// DescribeUpdate answers the update's status (InProgress, Successful, Failed, Cancelled)
	// and, for a failed one, the cloud's reasons.
	DescribeUpdate(ctx context.Context, cluster, updateID string) (status string, reasons []string, err error)
}

// SDKClusterVersions is the EKS API's ClusterVersionUpdater.
type SDKClusterVersions struct{ P *Provider }

// UpdateClusterVersion implements ClusterVersionUpdater.
func (s SDKClusterVersions) UpdateClusterVersion(ctx context.Context, cluster, version, token string) (string, error) {
	out, err := s.P.eks.UpdateClusterVersion(ctx, &eks.UpdateClusterVersionInput{Name: &cluster, Version: &version, ClientRequestToken: &token})
	if err != nil {
		return "", s.P.classify(err, true)
	}
	return deref(out.Update.Id), nil
}

// DescribeUpdate implements ClusterVersionUpdater.
func (s SDKClusterVersions) DescribeUpdate(ctx context.Context, cluster, updateID string) (string, []string, error) {
	out, err := s.P.eks.DescribeUpdate(ctx, &eks.DescribeUpdateInput{Name: &cluster, UpdateId: &updateID})
	if err != nil {
		return "", nil, s.P.classify(err, false)
	}
	var reasons []string
	for _, e := range out.Update.Errors {
		reasons = append(reasons, string(e.ErrorCode)+": "+deref(e.ErrorMessage))
	}
	return string(out.Update.Status), reasons, nil
}

// EnsureClusterVersion brings the job's control plane from version current to want through u
// and reports whether it is there. The update's token is derived from the job, the target
// version and run (which run of the cluster step this is: see StepRun), so a repeated call (a
// poll, a re-run after a crash, a retry of the failed step) finds the update it started
// rather than starting another, while the same update sent again after it failed is a new run
// and starts a new one; done=false means "call again later".
func EnsureClusterVersion(ctx context.Context, u ClusterVersionUpdater, t Tags, run, cluster, current, want string) (done bool, err error) {
	if want == "" || current == want {
		return true, nil
	}
	id, err := u.UpdateClusterVersion(ctx, cluster, want, clientToken(stepCluster, t.WithRole("version-"+want+run)))
	if err != nil {
		return false, err
	}
	status, reasons, err := u.DescribeUpdate(ctx, cluster, id)
	if err != nil {
		return false, err
	}
	switch ekstypes.UpdateStatus(status) {
	case ekstypes.UpdateStatusSuccessful:
		return true, nil
	case ekstypes.UpdateStatusFailed, ekstypes.UpdateStatusCancelled:
		err := fmt.Errorf("EKS update %s of cluster %s to %s: %s %s", id, cluster, want, status, strings.Join(reasons, "; "))
		return false, fault.UserAction(err, "ClusterUpgradeFailed",
			"the control plane stays on "+current+"; roll the job back (this job's update to "+want+" is the one that failed)", "")
	}
	return false, nil
}

// NodeGroupVersionUpdater starts a managed node group's version update and reads how it goes.
// moto has neither UpdateNodegroupVersion nor DescribeUpdate, so tests give KubernetesDriver a
// stand-in; production uses SDKClusterVersions.
type NodeGroupVersionUpdater interface {
	// UpdateNodegroupVersion starts the update; the same token answers the same update.
	UpdateNodegroupVersion(ctx context.Context, cluster, group, version, token string) (updateID string, err error)
	// DescribeNodegroupUpdate answers the update's status and, for a failed one, the reasons.
	DescribeNodegroupUpdate(ctx context.Context, cluster, group, updateID string) (status string, reasons []string, err error)
}

// UpdateNodegroupVersion implements NodeGroupVersionUpdater.
func (s SDKClusterVersions) UpdateNodegroupVersion(ctx context.Context, cluster, group, version, token string) (string, error) {
	out, err := s.P.eks.UpdateNodegroupVersion(ctx, &eks.UpdateNodegroupVersionInput{ClusterName: &cluster, NodegroupName: &group,
		Version: &version, ClientRequestToken: &token})
	if err != nil {
		return "", s.P.classify(err, true)
	}
	return deref(out.Update.Id), nil
}

// DescribeNodegroupUpdate implements NodeGroupVersionUpdater.
func (s SDKClusterVersions) DescribeNodegroupUpdate(ctx context.Context, cluster, group, updateID string) (string, []string, error) {
	out, err := s.P.eks.DescribeUpdate(ctx, &eks.DescribeUpdateInput{Name: &cluster, NodegroupName: &group, UpdateId: &updateID})
	if err != nil {
		return "", nil, s.P.classify(err, false)
	}
	var reasons []string
	for _, e := range out.Update.Errors {
		reasons = append(reasons, string(e.ErrorCode)+": "+deref(e.ErrorMessage))
	}
	return string(out.Update.Status), reasons, nil
}

// EnsureNodeGroupVersion brings one of the job's node groups from version current to want (the
// control plane's, once it is upgraded) through u and reports whether it is there. As for the
// control plane, the token is derived from the job, the group, the target version and run, so a
// poll or a re-run after a crash finds the update it started. EKS replaces the group's nodes
// with the new version's, draining them one at a time.
func EnsureNodeGroupVersion(ctx context.Context, u NodeGroupVersionUpdater, t Tags, run, cluster, group, current, want string) (done bool, err error) {
	if want == "" || current == "" || current == want {
		return true, nil
	}
	id, err := u.UpdateNodegroupVersion(ctx, cluster, group, want, clientToken(stepCluster, t.WithRole("ng-"+group+"-version-"+want+run)))
	if err != nil {
		return false, err
	}
	status, reasons, err := u.DescribeNodegroupUpdate(ctx, cluster, group, id)
	if err != nil {
		return false, err
	}
	switch ekstypes.UpdateStatus(status) {
	case ekstypes.UpdateStatusSuccessful:
		return true, nil
	case ekstypes.UpdateStatusFailed, ekstypes.UpdateStatusCancelled:
		err := fmt.Errorf("EKS update %s of node group %s of cluster %s to %s: %s %s", id, group, cluster, want, status, strings.Join(reasons, "; "))
		return false, fault.UserAction(err, "NodeGroupUpgradeFailed",
			"node group "+group+" stays on "+current+"; roll the job back (this job's update to "+want+" is the one that failed)", "")
	}
	return false, nil
}

// nodeGroupVersion is the Kubernetes version the job's node group runs, "" while it is not
// active (being created, updated or deleted: the next call looks again).
func (p *Provider) nodeGroupVersion(ctx context.Context, cluster, group string) (string, error) {
	got, err := p.eks.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: &cluster, NodegroupName: &group})
	if err != nil {
		return "", p.classify(err, false)
	}
	if got.Nodegroup.Status != ekstypes.NodegroupStatusActive {
		return "", nil
	}
	return deref(got.Nodegroup.Version), nil
}

// StepRun names one run of step of j: the time its record started, which the engine commits
// before the step first acts and keeps over its waits, a resume after a crash and a retry,
// while a config update re-opens the step with a fresh record. "" when the step has not
// started (a driver called outside the engine). Whole seconds: the stores keep the time at
// their own precision.
func StepRun(j *job.Job, step string) string {
	i := j.StepIndex(step)
	if i < 0 || j.Steps[i].StartedAt == nil {
		return ""
	}
	return "@" + strconv.FormatInt(j.Steps[i].StartedAt.Unix(), 10)
}
