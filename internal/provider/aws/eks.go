package aws

import (
	"context"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/groundworkhq/groundwork/internal/fault"
)

// ClusterSpec is the reference's cluster request plus the roles the IAM step made.
type ClusterSpec struct {
	Tags             Tags
	Name             string
	Version          string
	RoleARN          string
	SubnetIDs        []string
	SecurityGroupIDs []string
	// Private turns the public endpoint off: the API server answers only inside the VPC
	// (and networks peered with it).
	Private bool
}

// NodeGroupSpec is one managed node group.
type NodeGroupSpec struct {
	Name         string
	InstanceType string
	Min, Max     int32
	NodeRoleARN  string
	SubnetIDs    []string
	// Version is the Kubernetes version a new group gets: the control plane's ("" is EKS's
	// default, the control plane's too). A live group follows an upgrade through
	// EnsureNodeGroupVersion.
	Version string
}

// nonEmpty is s as an optional API field: nil when empty.
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Cluster is what the register-space step needs: where the API server is and which CA signs
// it. No kubeconfig with a static credential is ever stored; tokens are minted per use.
type Cluster struct {
	Name     string `json:"name"`
	ARN      string `json:"arn"`
	Status   string `json:"status"`
	Ready    bool   `json:"ready"`
	Endpoint string `json:"endpoint,omitempty"`
	CAData   string `json:"caData,omitempty"` // base64 PEM, as EKS returns it
	Version  string `json:"version,omitempty"`
}

// stepCluster names the kubernetes family's cluster step, for idempotency keys.
const stepCluster = "create_cluster"

// EnsureCluster creates the EKS control plane (private and public endpoint, or the private
// one alone when s.Private; secrets encryption left to the account's default key) or finds
// this job's.
func (p *Provider) EnsureCluster(ctx context.Context, s ClusterSpec) (Cluster, error) {
	got, err := p.eks.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: &s.Name})
	if err == nil {
		if !s.Tags.Owns(got.Cluster.Tags) {
			return Cluster{}, alreadyExists("EKS cluster", s.Name)
		}
		return clusterState(got.Cluster), nil
	}
	if !isCode(err, "ResourceNotFoundException") {
		return Cluster{}, p.classify(err, false)
	}
	in := &eks.CreateClusterInput{
		Name: &s.Name, RoleArn: &s.RoleARN, Tags: s.Tags.WithRole("eks-cluster").Map(),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: s.SubnetIDs, SecurityGroupIds: s.SecurityGroupIDs,
			EndpointPrivateAccess: ptr(true), EndpointPublicAccess: ptr(!s.Private)},
		// EKS's idempotency key: a retried create after a lost response is not a second cluster.
		ClientRequestToken: ptr(clientToken(stepCluster, s.Tags.WithRole("eks-cluster"))),
		AccessConfig:       &ekstypes.CreateAccessConfigRequest{AuthenticationMode: ekstypes.AuthenticationModeApiAndConfigMap, BootstrapClusterCreatorAdminPermissions: ptr(true)},
	}
	if s.Version != "" {
		in.Version = &s.Version
	}
	out, err := p.eks.CreateCluster(ctx, in)
	if isCode(err, "ResourceInUseException") {
		return p.EnsureCluster(ctx, s)
	}
	if err != nil {
		return Cluster{}, p.classify(err, false)
	}
	return clusterState(out.Cluster), nil
}

func clusterState(c *ekstypes.Cluster) Cluster {
	r := Cluster{Name: deref(c.Name), ARN: deref(c.Arn), Status: string(c.Status), Endpoint: deref(c.Endpoint), Version: deref(c.Version)}
	if c.CertificateAuthority != nil {
		r.CAData = deref(c.CertificateAuthority.Data)
	}
	r.Ready = c.Status == ekstypes.ClusterStatusActive && r.Endpoint != ""
	return r
}

// EnsureNodeGroup creates a managed node group, or patches the sizes of this job's in place
// (desired kept where the group runs, inside the new bounds).
// It reports whether the group is active.
func (p *Provider) EnsureNodeGroup(ctx context.Context, t Tags, cluster string, s NodeGroupSpec) (bool, error) {
	desired := s.Min
	got, err := p.eks.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: &cluster, NodegroupName: &s.Name})
	if err == nil {
		ng := got.Nodegroup
		if !t.Owns(ng.Tags) {
			return false, alreadyExists("node group", s.Name)
		}
		if sc := ng.ScalingConfig; sc != nil && (deref(sc.MinSize) != s.Min || deref(sc.MaxSize) != s.Max) {
			desired = resizeDesired(sc, s.Min, s.Max)
			if _, err := p.eks.UpdateNodegroupConfig(ctx, &eks.UpdateNodegroupConfigInput{ClusterName: &cluster, NodegroupName: &s.Name,
				ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: &s.Min, MaxSize: &s.Max, DesiredSize: &desired}}); err != nil {
				return false, p.classify(err, true)
			}
			// The group is UPDATING now; the next call sees it (and its new sizes) settle.
			return false, nil
		}
		return ng.Status == ekstypes.NodegroupStatusActive, nil
	}
	if !isCode(err, "ResourceNotFoundException") {
		return false, p.classify(err, false)
	}
	out, err := p.eks.CreateNodegroup(ctx, &eks.CreateNodegroupInput{
		ClusterName: &cluster, NodegroupName: &s.Name, NodeRole: &s.NodeRoleARN, Subnets: s.SubnetIDs,
		InstanceTypes: []string{s.InstanceType}, Tags: t.WithRole("node-group-" + s.Name).Map(),
		ScalingConfig:      &ekstypes.NodegroupScalingConfig{MinSize: &s.Min, MaxSize: &s.Max, DesiredSize: &desired},
		ClientRequestToken: ptr(clientToken(stepCluster, t.WithRole("ng-"+s.Name))),
		Version:            nonEmpty(s.Version),
	})
	if isCode(err, "ResourceInUseException") {
		// A repeat after a lost answer meets the group it made: adopt it when it is this job's.
		got, derr := p.eks.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: &cluster, NodegroupName: &s.Name})
		if derr != nil {
			return false, p.classify(err, true) // not visible yet: the re-run looks again
		}
		if !t.Owns(got.Nodegroup.Tags) {
			return false, alreadyExists("node group", s.Name)
		}
		return got.Nodegroup.Status == ekstypes.NodegroupStatusActive, nil
	}
	if err != nil {
		return false, p.classify(err, true)
	}
	return out.Nodegroup.Status == ekstypes.NodegroupStatusActive, nil
}

// DeleteCluster deletes the node groups, then (once they are gone) the control plane.
// done=false means "call again".
func (p *Provider) DeleteCluster(ctx context.Context, t Tags, name string) (done bool, err error) {
	got, err := p.eks.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: &name})
	if isCode(err, "ResourceNotFoundException") {
		return true, nil
	}
	if err != nil {
		return false, p.classify(err, false)
	}
	if !t.Owns(got.Cluster.Tags) {
		return true, nil
	}
	ngs, err := p.eks.ListNodegroups(ctx, &eks.ListNodegroupsInput{ClusterName: &name})
	if err != nil {
		return false, p.classify(err, false)
	}
	for _, ng := range ngs.Nodegroups {
		if _, err := p.eks.DeleteNodegroup(ctx, &eks.DeleteNodegroupInput{ClusterName: &name, NodegroupName: ptr(ng)}); err != nil && !gone(err) && !isCode(err, "ResourceInUseException") {
			return false, p.classify(err, false)
		}
	}
	if len(ngs.Nodegroups) > 0 {
		return false, nil
	}
	if got.Cluster.Status != ekstypes.ClusterStatusDeleting {
		if _, err := p.eks.DeleteCluster(ctx, &eks.DeleteClusterInput{Name: &name}); err != nil && !gone(err) {
			return false, p.classify(err, false)
		}
	}
	return false, nil
}

// TokenTTL is how long an EKS token is accepted (the aws-iam-authenticator's limit is 15 min;
// the presigned URL says 60 s and the authenticator allows a skew).
const TokenTTL = 14 * time.Minute

// ClusterToken mints a bearer token for the cluster from the account's credentials, in the
// aws-iam-authenticator format: "k8s-aws-v1." + base64url(presigned STS GetCallerIdentity URL
// that signs the x-k8s-aws-id header naming the cluster).
func (p *Provider) ClusterToken(ctx context.Context, cluster string) (token string, expires time.Time, err error) {
	presigner := sts.NewPresignClient(p.sts, func(o *sts.PresignOptions) {
		o.ClientOptions = append(o.ClientOptions, func(so *sts.Options) {
			so.APIOptions = append(so.APIOptions,
				smithyhttp.AddHeaderValue("x-k8s-aws-id", cluster),
				smithyhttp.AddHeaderValue("X-Amz-Expires", "60"))
		})
	})
	req, err := presigner.PresignGetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return "", time.Time{}, fault.Transient(fmt.Errorf("presign sts GetCallerIdentity: %w", err))
	}
	return "k8s-aws-v1." + base64.RawURLEncoding.EncodeToString([]byte(req.URL)), time.Now().Add(TokenTTL), nil
}

// AddonInstaller installs EKS add-ons (vpc-cni, coredns, kube-proxy). Moto has no EKS add-on
// API, so tests use FakeAddons; production uses EKSAddons.
type AddonInstaller interface {
	EnsureAddon(ctx context.Context, cluster, name string) error
}

// EKSAddons is the SDK implementation.
type EKSAddons struct{ P *Provider }

// EnsureAddon creates the add-on; one that exists is success.
func (a EKSAddons) EnsureAddon(ctx context.Context, cluster, name string) error {
	_, err := a.P.eks.CreateAddon(ctx, &eks.CreateAddonInput{ClusterName: &cluster, AddonName: &name, ResolveConflicts: ekstypes.ResolveConflictsOverwrite})
	if isCode(err, "ResourceInUseException") {
		return nil
	}
	return a.P.classify(err, true)
}

// FakeAddons records installed add-ons (stands in for the EKS add-on API, which moto lacks).
type FakeAddons struct{ Installed map[string][]string }

// EnsureAddon implements AddonInstaller.
func (f *FakeAddons) EnsureAddon(_ context.Context, cluster, name string) error {
	if f.Installed == nil {
		f.Installed = map[string][]string{}
	}
	for _, n := range f.Installed[cluster] {
		if n == name {
			return nil
		}
	}
	f.Installed[cluster] = append(f.Installed[cluster], name)
	return nil
}
