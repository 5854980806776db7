package aws

import (
	"context"
	"encoding/json"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/dnszone"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
	"github.com/groundworkhq/groundwork/internal/pipeline/registry"
)

// NetworkDriver is the AWS implementation of the network pipeline's Driver.
type NetworkDriver struct{ P *Provider }

var _ network.Driver = NetworkDriver{}

func (d NetworkDriver) EnsureNetwork(ctx context.Context, j *job.Job, c network.Config) (network.Result, error) {
	n, err := d.P.EnsureNetwork(ctx, NetworkSpec{Tags: JobTags(j), CIDR: c.CIDR, AZCount: c.AZCount, NoNAT: c.NoNAT,
		ExistingVPCID: c.VPCID, ExistingSubnetIDs: c.SubnetIDs})
	if err != nil {
		return network.Result{}, err
	}
	var data map[string]any
	b, _ := json.Marshal(n)
	_ = json.Unmarshal(b, &data)
	return network.Result{VPCID: n.VPCID, Ready: n.Ready, Data: data}, nil
}

func (d NetworkDriver) DeleteNetwork(ctx context.Context, j *job.Job) (bool, error) {
	return d.P.DeleteNetwork(ctx, JobTags(j))
}

func (d NetworkDriver) EnsurePeering(ctx context.Context, j *job.Job, vpcID string, p network.Peering) (string, error) {
	return d.P.EnsurePeering(ctx, PeeringSpec{Tags: JobTags(j).WithRole("peering"), VPCID: vpcID, PeerVPCID: p.PeerVPCID,
		PeerOwnerID: p.PeerOwnerID, PeerRegion: p.PeerRegion})
}

func (d NetworkDriver) DeletePeering(ctx context.Context, j *job.Job) error {
	return d.P.DeletePeering(ctx, JobTags(j))
}

// RegistryDriver is the AWS (ECR) implementation of the registry pipeline's Driver.
type RegistryDriver struct{ P *Provider }

var _ registry.Driver = RegistryDriver{}

func (d RegistryDriver) EnsureRepository(ctx context.Context, j *job.Job, c registry.Config) (registry.Repository, error) {
	r, err := d.P.EnsureRepository(ctx, RepositorySpec{Tags: JobTags(j).WithRole("registry"), Name: c.Name, ScanOnPush: c.ScanOnPush, ImmutableTags: c.ImmutableTags})
	return registry.Repository{Name: r.Name, ID: r.ARN, URI: r.URI}, err
}

func (d RegistryDriver) DeleteRepository(ctx context.Context, j *job.Job, name string) error {
	return d.P.DeleteRepository(ctx, name)
}

// DNSZoneDriver is the AWS (Route 53) implementation of the dns_zone pipeline's Driver.
type DNSZoneDriver struct{ P *Provider }

var _ dnszone.Driver = DNSZoneDriver{}

func (d DNSZoneDriver) EnsureZone(ctx context.Context, j *job.Job, c dnszone.Config) (dnszone.Zone, error) {
	z, err := d.P.EnsureZone(ctx, ZoneSpec{Tags: JobTags(j).WithRole("zone"), Name: c.Name, Private: c.Private, VPCID: c.VPCID})
	return dnszone.Zone{ID: z.ID, Name: z.Name, NameServers: z.NameServers}, err
}

func (d DNSZoneDriver) DeleteZone(ctx context.Context, j *job.Job, name string) error {
	return d.P.DeleteZone(ctx, JobTags(j).WithRole("zone"), name)
}

func (d DNSZoneDriver) UpsertRecord(ctx context.Context, zoneID string, r dnszone.Record) error {
	return d.P.UpsertRecord(ctx, zoneID, Record{Name: r.Name, Type: r.Type, TTL: r.TTL, Values: r.Values})
}

func (d DNSZoneDriver) DeleteRecord(ctx context.Context, zoneID string, r dnszone.Record) error {
	return d.P.DeleteRecord(ctx, zoneID, Record{Name: r.Name, Type: r.Type, TTL: r.TTL, Values: r.Values})
}

// KubernetesDriver is the AWS (EKS) implementation of the kubernetes pipeline's Driver.
type KubernetesDriver struct {
	P *Provider
	// Versions upgrades the control plane when the config names a newer version than it runs
	// (nil: the EKS API).
	Versions ClusterVersionUpdater
	// NodeGroupVersions upgrades the job's node groups to the control plane's version after it
	// (nil: the EKS API).
	NodeGroupVersions NodeGroupVersionUpdater
}

var _ kubernetes.Driver = KubernetesDriver{}

func (d KubernetesDriver) EnsureNetwork(ctx context.Context, j *job.Job, c kubernetes.Config) (kubernetes.Network, error) {
	n, err := d.P.EnsureNetwork(ctx, NetworkSpec{Tags: JobTags(j), ExistingVPCID: c.VPCID, ExistingSubnetIDs: c.SubnetIDs})
	subnets := n.PrivateSubnetIDs
	if len(subnets) == 0 {
		subnets = n.PublicSubnetIDs
	}
	return kubernetes.Network{VPCID: n.VPCID, SubnetIDs: subnets, Ready: n.Ready}, err
}

func (d KubernetesDriver) DeleteNetwork(ctx context.Context, j *job.Job) (bool, error) {
	return d.P.DeleteNetwork(ctx, JobTags(j))
}

func (d KubernetesDriver) EnsureRoles(ctx context.Context, j *job.Job) (kubernetes.Roles, error) {
	specs := RolesFor(job.FamilyKubernetes, JobTags(j))
	cr, err := d.P.EnsureRole(ctx, specs[0])
	if err != nil {
		return kubernetes.Roles{}, err
	}
	nr, err := d.P.EnsureRole(ctx, specs[1])
	return kubernetes.Roles{ClusterRole: cr.ARN, NodeRole: nr.ARN}, err
}

func (d KubernetesDriver) DeleteRoles(ctx context.Context, j *job.Job) error {
	for _, s := range RolesFor(job.FamilyKubernetes, JobTags(j)) {
		if err := d.P.DeleteRole(ctx, s.Tags); err != nil {
			return err
		}
	}
	return nil
}

func (d KubernetesDriver) EnsureCluster(ctx context.Context, j *job.Job, c kubernetes.Config, n kubernetes.Network, r kubernetes.Roles) (kubernetes.Cluster, error) {
	cl, err := d.P.EnsureCluster(ctx, ClusterSpec{Tags: JobTags(j), Name: c.Name, Version: c.Version, RoleARN: r.ClusterRole, SubnetIDs: n.SubnetIDs, Private: c.PrivateCluster})
	out := kubernetes.Cluster{Name: cl.Name, ID: cl.ARN, Endpoint: cl.Endpoint, CAData: cl.CAData}
	if err != nil || !cl.Ready {
		return out, err
	}
	// A config update that raises the version: the control plane first, then the groups.
	versions := d.Versions
	if versions == nil {
		versions = SDKClusterVersions{P: d.P}
	}
	if done, err := EnsureClusterVersion(ctx, versions, JobTags(j), StepRun(j, kubernetes.StepCluster), c.Name, cl.Version, c.Version); err != nil || !done {
		return out, err
	}
	all := true
	for _, ng := range c.NodeGroups {
		active, err := d.P.EnsureNodeGroup(ctx, JobTags(j), c.Name, NodeGroupSpec{Name: ng.Name, InstanceType: ng.InstanceType,
			Min: ng.Min, Max: ng.Max, NodeRoleARN: r.NodeRole, SubnetIDs: n.SubnetIDs, Version: cl.Version})
		if err != nil {
			return out, err
		}
		if active {
			// The group follows the control plane's version once the control plane is there.
			if active, err = d.ensureNodeGroupVersion(ctx, j, c, ng.Name); err != nil {
				return out, err
			}
		}
		all = all && active
	}
	// A config update that drops a group: the job's groups the config no longer names go.
	keep := make([]string, 0, len(c.NodeGroups))
	for _, ng := range c.NodeGroups {
		keep = append(keep, ng.Name)
	}
	pruned, err := d.P.PruneNodeGroups(ctx, JobTags(j), c.Name, keep)
	if err != nil {
		return out, err
	}
	out.Ready = all && pruned
	return out, nil
}

// ensureNodeGroupVersion upgrades an active node group of the job to the config's version
// (the control plane's, which EnsureClusterVersion brought there first); done once it runs it.
func (d KubernetesDriver) ensureNodeGroupVersion(ctx context.Context, j *job.Job, c kubernetes.Config, group string) (bool, error) {
	current, err := d.P.nodeGroupVersion(ctx, c.Name, group)
	if err != nil || current == "" {
		return false, err
	}
	versions := d.NodeGroupVersions
	if versions == nil {
		versions = SDKClusterVersions{P: d.P}
	}
	return EnsureNodeGroupVersion(ctx, versions, JobTags(j), StepRun(j, kubernetes.StepCluster), c.Name, group, current, c.Version)
}

func (d KubernetesDriver) DeleteCluster(ctx context.Context, j *job.Job, name string) (bool, error) {
	return d.P.DeleteCluster(ctx, JobTags(j), name)
}
