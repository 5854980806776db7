package azure

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/dns/armdns"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v7"

	"github.com/groundworkhq/groundwork/internal/discovery"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/provider"
	"github.com/groundworkhq/groundwork/internal/store"
)

var _ provider.Listers = (*Module)(nil)

// Lister implements provider.Listers: the space's subscription and location, opened with its
// cloud account as the space's jobs open it.
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

// Discoverer lists what a subscription has in the client's location (discovery.Lister),
// following Resource Manager's pages (nextLink) to the end:
//   - networks: the virtual networks in the location, CIDR their first address prefix;
//   - subnets: the subnets of those networks, VPCID their network's id; a subnet has no tags
//     of its own on Azure, so it carries its network's (and is managed when that is);
//   - dns-zones: the public DNS zones of the subscription (a zone is global);
//   - clusters: the AKS clusters in the location, VPCID the network of their first pool;
//   - instance-types: the VM sizes in vmSizes (Resource Manager's SKU list is the compute
//     module's, which the server does not carry);
//   - versions: the datastore engine versions DatastoreDriver.Check accepts.
//
// Managed is the groundwork-managed-by tag.
type Discoverer struct{ C *Client }

// Discover implements discovery.Lister.
func (d Discoverer) Discover(ctx context.Context, kind string) ([]discovery.Item, error) {
	var (
		out []discovery.Item
		err error
	)
	switch kind {
	case discovery.KindNetworks, discovery.KindSubnets:
		out, err = d.networks(ctx, kind == discovery.KindSubnets)
	case discovery.KindDNSZones:
		out, err = d.zones(ctx)
	case discovery.KindClusters:
		out, err = d.clusters(ctx)
	case discovery.KindInstanceTypes:
		for _, s := range vmSizes {
			out = append(out, discovery.Item{ID: s.Name, Name: fmt.Sprintf("%s (%d vCPU, %d GiB)", s.Name, s.VCPUs, s.MemoryGiB), Tags: map[string]string{}})
		}
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

func (d Discoverer) networks(ctx context.Context, subnets bool) ([]discovery.Item, error) {
	c, err := armnetwork.NewVirtualNetworksClient(d.C.SubscriptionID, d.C.cred, d.C.opts)
	if err != nil {
		return nil, fault.System(err)
	}
	return listAll(ctx, c.NewListAllPager(nil), func(page armnetwork.VirtualNetworksClientListAllResponse) (out []discovery.Item) {
		for _, v := range page.Value {
			if v == nil || v.ID == nil || !d.here(v.Location) {
				continue
			}
			tags := tagMap(v.Tags)
			managed := tags[TagManagedBy] == managedBy
			if !subnets {
				it := discovery.Item{ID: *v.ID, Name: deref(v.Name), Tags: tags, Managed: managed}
				if p := v.Properties; p != nil && p.AddressSpace != nil && len(p.AddressSpace.AddressPrefixes) > 0 {
					it.CIDR = deref(p.AddressSpace.AddressPrefixes[0])
				}
				out = append(out, it)
				continue
			}
			if v.Properties == nil {
				continue
			}
			for _, s := range v.Properties.Subnets {
				if s == nil || s.ID == nil {
					continue
				}
				it := discovery.Item{ID: *s.ID, Name: deref(s.Name), VPCID: *v.ID, Tags: tags, Managed: managed}
				if p := s.Properties; p != nil {
					it.CIDR = deref(p.AddressPrefix)
					if it.CIDR == "" && len(p.AddressPrefixes) > 0 {
						it.CIDR = deref(p.AddressPrefixes[0])
					}
				}
				out = append(out, it)
			}
		}
		return out
	})
}

func (d Discoverer) zones(ctx context.Context) ([]discovery.Item, error) {
	c, err := armdns.NewZonesClient(d.C.SubscriptionID, d.C.cred, d.C.opts)
	if err != nil {
		return nil, fault.System(err)
	}
	return listAll(ctx, c.NewListPager(nil), func(page armdns.ZonesClientListResponse) (out []discovery.Item) {
		for _, z := range page.Value {
			if z == nil || z.ID == nil {
				continue
			}
			tags := tagMap(z.Tags)
			out = append(out, discovery.Item{ID: *z.ID, Name: deref(z.Name), Tags: tags, Managed: tags[TagManagedBy] == managedBy})
		}
		return out
	})
}

func (d Discoverer) clusters(ctx context.Context) ([]discovery.Item, error) {
	c, err := armcontainerservice.NewManagedClustersClient(d.C.SubscriptionID, d.C.cred, d.C.opts)
	if err != nil {
		return nil, fault.System(err)
	}
	return listAll(ctx, c.NewListPager(nil), func(page armcontainerservice.ManagedClustersClientListResponse) (out []discovery.Item) {
		for _, mc := range page.Value {
			if mc == nil || mc.ID == nil || !d.here(mc.Location) {
				continue
			}
			tags := tagMap(mc.Tags)
			it := discovery.Item{ID: *mc.ID, Name: deref(mc.Name), Tags: tags, Managed: tags[TagManagedBy] == managedBy}
			if p := mc.Properties; p != nil {
				it.Version = deref(p.KubernetesVersion)
				for _, ap := range p.AgentPoolProfiles {
					if ap == nil || ap.VnetSubnetID == nil {
						continue
					}
					if sid, err := arm.ParseResourceID(*ap.VnetSubnetID); err == nil && sid.Parent != nil {
						it.VPCID = sid.Parent.String()
					}
					break
				}
			}
			out = append(out, it)
		}
		return out
	})
}

// listAll follows a pager to its last page, turning each page into items.
func listAll[P any](ctx context.Context, pg *runtime.Pager[P], items func(P) []discovery.Item) ([]discovery.Item, error) {
	var out []discovery.Item
	for pg.More() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, items(page)...)
	}
	return out, nil
}

// here reports whether a resource's location is the client's: Resource Manager spells a
// location "westeurope", a person may write "West Europe".
func (d Discoverer) here(location *string) bool {
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, " ", "")) }
	return location != nil && norm(*location) == norm(d.C.Location)
}

// vmSize is an Azure virtual machine size.
type vmSize struct {
	Name      string
	VCPUs     int
	MemoryGiB int
}

// vmSizes are the sizes instance-types lists: general purpose (D), memory optimised (E),
// compute optimised (F) and burstable (B) sizes that AKS node pools and the flexible servers
// take, the datastore's defaults (Standard_B1ms, Standard_D2ds_v4) among them.
var vmSizes = []vmSize{
	{"Standard_B1ms", 1, 2}, {"Standard_B2s", 2, 4}, {"Standard_B2ms", 2, 8}, {"Standard_B4ms", 4, 16},
	{"Standard_D2s_v5", 2, 8}, {"Standard_D4s_v5", 4, 16}, {"Standard_D8s_v5", 8, 32}, {"Standard_D16s_v5", 16, 64},
	{"Standard_D2ds_v4", 2, 8}, {"Standard_D2ds_v5", 2, 8}, {"Standard_D4ds_v5", 4, 16}, {"Standard_D8ds_v5", 8, 32},
	{"Standard_E2s_v5", 2, 16}, {"Standard_E4s_v5", 4, 32}, {"Standard_E8s_v5", 8, 64},
	{"Standard_E2ds_v5", 2, 16}, {"Standard_E4ds_v5", 4, 32},
	{"Standard_F2s_v2", 2, 4}, {"Standard_F4s_v2", 4, 8}, {"Standard_F8s_v2", 8, 16},
}

// engineVersions are the datastore versions Check accepts, from the tables it checks with.
func engineVersions() []discovery.Item {
	var out []discovery.Item
	add := func(engine, title, version string) {
		out = append(out, discovery.Item{ID: engine + "-" + version, Name: title + " " + version, Engine: engine, Version: version, Tags: map[string]string{}})
	}
	for _, v := range pgVersions {
		add("postgres", "PostgreSQL", v)
	}
	for _, v := range mysqlVersions {
		add("mysql", "MySQL", v.named)
	}
	add("redis", "Redis", redisVersion)
	return out
}

func tagMap(t map[string]*string) map[string]string {
	m := make(map[string]string, len(t))
	for k, v := range t {
		if v != nil {
			m[k] = *v
		}
	}
	return m
}
