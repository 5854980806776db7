package aws

import (
	"context"
	"encoding/json"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/dnszone"
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
