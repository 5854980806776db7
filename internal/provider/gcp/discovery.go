package gcp

import (
	"context"
	"fmt"
	"sort"
	"strings"

	compute "google.golang.org/api/compute/v1"
	container "google.golang.org/api/container/v1"
	dns "google.golang.org/api/dns/v1"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/discovery"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/provider"
	"github.com/groundworkhq/groundwork/internal/store"
)

var _ provider.Listers = (*Module)(nil)

// Lister implements provider.Listers: the space's project and region, opened with its cloud
// account as the space's jobs open it.
func (m *Module) Lister(ctx context.Context, sp *store.Space) (discovery.Lister, error) {
	if sp.CloudAccountID == "" {
		return nil, fmt.Errorf("%w: space %s names no cloud account", discovery.ErrUnsupported, sp.ID)
	}
	c, err := m.ClientFor(ctx, sp.OrgID, sp.ID)
	if err != nil {
		return nil, err
	}
	return Discoverer{C: c}, nil
}

// Discoverer lists what a project has (discovery.Lister), following every list's
// nextPageToken to the end:
//   - networks: the project's VPC networks (global on GCP); CIDR is empty, as a custom-mode
//     network has none of its own (its subnets do);
//   - subnets: the subnetworks in the space's region, VPCID their network;
//   - dns-zones: the project's Cloud DNS managed zones;
//   - instance-types: the machine types of the region's default zone;
//   - clusters: the GKE clusters in the space's region, VPCID their network;
//   - versions: the datastore engine versions Check accepts.
//
// Managed is the groundwork-managed-by label, or for types without labels (networks,
// subnets) a description written by Groundwork.
type Discoverer struct{ C *Client }

// Discover implements discovery.Lister.
func (d Discoverer) Discover(ctx context.Context, kind string) ([]discovery.Item, error) {
	var (
		out []discovery.Item
		err error
	)
	switch kind {
	case discovery.KindNetworks:
		out, err = d.networks(ctx)
	case discovery.KindSubnets:
		out, err = d.subnets(ctx)
	case discovery.KindDNSZones:
		out, err = d.zones(ctx)
	case discovery.KindInstanceTypes:
		out, err = d.machineTypes(ctx)
	case discovery.KindClusters:
		out, err = d.clusters(ctx)
	case discovery.KindVersions:
		out = engineVersions()
	default:
		return nil, fmt.Errorf("%w %q", discovery.ErrUnknownKind, kind)
	}
	if err != nil {
		return nil, d.C.Classify(err)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	if out == nil {
		out = []discovery.Item{}
	}
	return out, nil
}

// managedDescription reports whether a description was written by Groundwork.
func managedDescription(d string) bool { return JobOfDescription(d) != "" }

func (d Discoverer) networks(ctx context.Context) ([]discovery.Item, error) {
	s, err := d.C.computeService(ctx)
	if err != nil {
		return nil, err
	}
	var out []discovery.Item
	err = s.Networks.List(d.C.ProjectID).Pages(ctx, func(page *compute.NetworkList) error {
		for _, n := range page.Items {
			out = append(out, discovery.Item{ID: "projects/" + d.C.ProjectID + "/global/networks/" + n.Name, Name: n.Name,
				CIDR: n.IPv4Range, Tags: map[string]string{}, Managed: managedDescription(n.Description)})
		}
		return nil
	})
	return out, err
}

func (d Discoverer) subnets(ctx context.Context) ([]discovery.Item, error) {
	s, err := d.C.computeService(ctx)
	if err != nil {
		return nil, err
	}
	var out []discovery.Item
	err = s.Subnetworks.List(d.C.ProjectID, d.C.Region).Pages(ctx, func(page *compute.SubnetworkList) error {
		for _, n := range page.Items {
			out = append(out, discovery.Item{ID: "projects/" + d.C.ProjectID + "/regions/" + d.C.Region + "/subnetworks/" + n.Name,
				Name: n.Name, CIDR: n.IpCidrRange, VPCID: strings.TrimPrefix(n.Network, "https://www.googleapis.com/compute/v1/"),
				Tags: map[string]string{}, Managed: managedDescription(n.Description)})
		}
		return nil
	})
	return out, err
}

func (d Discoverer) zones(ctx context.Context) ([]discovery.Item, error) {
	s, err := dns.NewService(ctx, d.C.Options(ServiceDNS)...)
	if err != nil {
		return nil, fault.System(err)
	}
	var out []discovery.Item
	err = s.ManagedZones.List(d.C.ProjectID).Pages(ctx, func(page *dns.ManagedZonesListResponse) error {
		for _, z := range page.ManagedZones {
			l := z.Labels
			if l == nil {
				l = map[string]string{}
			}
			out = append(out, discovery.Item{ID: "projects/" + d.C.ProjectID + "/managedZones/" + z.Name,
				Name: strings.TrimSuffix(z.DnsName, "."), Tags: l, Managed: l[LabelManagedBy] == managedBy})
		}
		return nil
	})
	return out, err
}

func (d Discoverer) machineTypes(ctx context.Context) ([]discovery.Item, error) {
	s, err := d.C.computeService(ctx)
	if err != nil {
		return nil, err
	}
	var out []discovery.Item
	err = s.MachineTypes.List(d.C.ProjectID, d.C.Zone()).Pages(ctx, func(page *compute.MachineTypeList) error {
		for _, m := range page.Items {
			out = append(out, discovery.Item{ID: m.Name, Name: fmt.Sprintf("%s (%d vCPU, %d GiB)", m.Name, m.GuestCpus, m.MemoryMb/1024),
				AZ: d.C.Zone(), Tags: map[string]string{}})
		}
		return nil
	})
	return out, err
}

func (d Discoverer) clusters(ctx context.Context) ([]discovery.Item, error) {
	s, err := container.NewService(ctx, d.C.Options(ServiceContainer)...)
	if err != nil {
		return nil, fault.System(err)
	}
	// GKE answers a location's clusters in one page.
	resp, err := s.Projects.Locations.Clusters.List("projects/" + d.C.ProjectID + "/locations/" + d.C.Region).Context(ctx).Do()
	if err != nil {
		return nil, err
	}
	var out []discovery.Item
	for _, cl := range resp.Clusters {
		l := cl.ResourceLabels
		if l == nil {
			l = map[string]string{}
		}
		vpc := cl.Network
		if vpc != "" && !strings.Contains(vpc, "/") {
			vpc = "projects/" + d.C.ProjectID + "/global/networks/" + vpc
		}
		out = append(out, discovery.Item{ID: "projects/" + d.C.ProjectID + "/locations/" + cl.Location + "/clusters/" + cl.Name,
			Name: cl.Name, Version: cl.CurrentMasterVersion, VPCID: vpc, Tags: l, Managed: l[LabelManagedBy] == managedBy})
	}
	return out, nil
}

// engineVersions are the datastore versions Check accepts, from the tables it checks with.
func engineVersions() []discovery.Item {
	var out []discovery.Item
	add := func(engine, title, version string) {
		out = append(out, discovery.Item{ID: engine + "-" + version, Name: title + " " + version, Engine: engine, Version: version, Tags: map[string]string{}})
	}
	for _, v := range sqlEngines[ds.EnginePostgres].versions {
		add("postgres", "PostgreSQL", v)
	}
	for _, v := range sqlEngines[ds.EngineMySQL].versions {
		add("mysql", "MySQL", v)
	}
	for _, v := range redisVersions {
		add("redis", "Redis", v.named)
	}
	return out
}
