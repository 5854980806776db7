package aws

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/groundworkhq/groundwork/internal/fault"
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
// and reports whether it is there. The update's token is derived from the job and the target
// version, so a repeated call (a poll, a re-run after a crash) finds the update it started
// rather than starting another; done=false means "call again later".
func EnsureClusterVersion(ctx context.Context, u ClusterVersionUpdater, t Tags, cluster, current, want string) (done bool, err error) {
	if want == "" || current == want {
		return true, nil
	}
	id, err := u.UpdateClusterVersion(ctx, cluster, want, clientToken(stepCluster, t.WithRole("version-"+want)))
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
