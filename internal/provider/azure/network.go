package azure

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v7"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
)

// Subnet roles of a network the network family makes.
const (
	SubnetPrivate = "private" // workloads; egress through the NAT gateway
	SubnetPublic  = "public"  // load balancers' front ends
)

// NetworkDriver makes a job's virtual network: a VNet with a private and a public subnet, a
// NAT gateway (with its public IP) for the private subnet's egress, and a network security
// group on both that admits traffic from inside the VNet only.
type NetworkDriver struct{ C *Client }

var _ network.Driver = NetworkDriver{}

// NetworkDriver implements provider.NetworkDrivers.
func (m *Module) NetworkDriver(ctx context.Context, j *job.Job) (network.Driver, error) {
	c, err := m.Client(ctx, j)
	if err != nil {
		return nil, err
	}
	return NetworkDriver{C: c}, nil
}

// Network is what a job's network is, recorded as the step's Data.
type Network struct {
	ResourceGroup string            `json:"resourceGroup"`
	VNetID        string            `json:"vnetID"`
	Subnets       map[string]string `json:"subnets"` // role → subnet id
	NATGatewayID  string            `json:"natGatewayID,omitempty"`
	Adopted       bool              `json:"adopted,omitempty"`
}

func (d NetworkDriver) net() (*armnetwork.ClientFactory, error) {
	f, err := armnetwork.NewClientFactory(d.C.SubscriptionID, d.C.cred, d.C.opts)
	if err != nil {
		return nil, fault.System(err)
	}
	return f, nil
}

// EnsureNetwork implements network.Driver.
func (d NetworkDriver) EnsureNetwork(ctx context.Context, j *job.Job, cfg network.Config) (network.Result, error) {
	if cfg.VPCID != "" {
		return d.adopt(ctx, cfg)
	}
	n, ops, ready, err := d.C.EnsureVNet(ctx, j, network.InfraNetwork, VNetRequest{CIDR: cfg.CIDR, NAT: !cfg.NoNAT})
	res := network.Result{VPCID: n.VNetID, Ready: ready, Data: map[string]any{"ops": ops, "resourceGroup": n.ResourceGroup,
		"subnets": n.Subnets, "natGatewayID": n.NATGatewayID}}
	return res, err
}

// adopt records a VNet the user already has; it is never changed or deleted.
func (d NetworkDriver) adopt(ctx context.Context, cfg network.Config) (network.Result, error) {
	id, err := arm.ParseResourceID(cfg.VPCID)
	if err != nil || !strings.EqualFold(id.ResourceType.String(), "Microsoft.Network/virtualNetworks") {
		return network.Result{}, fault.UserAction(fmt.Errorf("vpcID %q is not a virtual network id", cfg.VPCID), "InvalidVNetID",
			"Give vpcID as the full resource id: /subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.Network/virtualNetworks/<name>.", "")
	}
	f, err := d.net()
	if err != nil {
		return network.Result{}, err
	}
	v, err := f.NewVirtualNetworksClient().Get(ctx, id.ResourceGroupName, id.Name, nil)
	if notFound(err) {
		return network.Result{}, fault.UserAction(fmt.Errorf("virtual network %s: %w", cfg.VPCID, err), "VNetNotFound",
			"The virtual network to adopt does not exist (or the account cannot see it); check vpcID.", d.C.PortalURL(cfg.VPCID))
	}
	if err != nil {
		return network.Result{}, d.C.Classify(err)
	}
	subnets := map[string]string{}
	if v.Properties != nil {
		for _, s := range v.Properties.Subnets {
			if s.Name != nil && s.ID != nil {
				subnets[*s.Name] = *s.ID
			}
		}
	}
	for _, want := range cfg.SubnetIDs {
		found := false
		for _, have := range subnets {
			found = found || strings.EqualFold(have, want)
		}
		if !found {
			return network.Result{}, fault.UserAction(fmt.Errorf("subnet %s is not in %s", want, cfg.VPCID), "SubnetNotFound",
				"Every subnetIDs entry must be a subnet of the adopted virtual network.", d.C.PortalURL(cfg.VPCID))
		}
	}
	return network.Result{VPCID: *v.ID, Ready: true, Data: map[string]any{"adopted": true, "resourceGroup": id.ResourceGroupName, "subnets": subnets}}, nil
}

// DeleteNetwork implements network.Driver: an adopted network is left alone.
func (d NetworkDriver) DeleteNetwork(ctx context.Context, j *job.Job) (bool, error) {
	return d.C.DeleteVNet(ctx, j)
}

// SubnetDelegated is the subnet a VNetRequest's Delegation asks for.
const SubnetDelegated = "delegated"

// VNetRequest is a network as a family asks for it.
type VNetRequest struct {
	CIDR string
	NAT  bool
	// Delegation, when set, adds a subnet delegated to that service
	// ("Microsoft.DBforPostgreSQL/flexibleServers"): the service places its servers there and
	// nothing else may use it.
	Delegation string
}

// EnsureVNet makes (one call at a time) the network of j. infraKey is where the calling step
// records its result, from which the operations in flight are read back. The kubernetes and
// datastore families call it for their own networks.
func (c *Client) EnsureVNet(ctx context.Context, j *job.Job, infraKey string, r VNetRequest) (Network, Ops, bool, error) {
	n := Network{ResourceGroup: c.ResourceGroup, Subnets: map[string]string{}}
	ops := opsOf(j, infraKey)
	if err := c.EnsureGroup(ctx, j.SpaceID); err != nil {
		return n, ops, false, err
	}
	cidr := r.CIDR
	if cidr == "" {
		cidr = "10.0.0.0/16"
	}
	pfx, err := netip.ParsePrefix(cidr)
	if err != nil {
		return n, ops, false, fault.UserAction(fmt.Errorf("cidr %q: %w", cidr, err), "InvalidCIDR", "Give cidr as an IPv4 block such as 10.0.0.0/16.", "")
	}
	f, err := armnetwork.NewClientFactory(c.SubscriptionID, c.cred, c.opts)
	if err != nil {
		return n, ops, false, fault.System(err)
	}
	rg := c.ResourceGroup
	nsgName, pipName, natName, vnetName := name(j, "nsg"), name(j, "nat-ip"), name(j, "nat"), name(j, "vnet")
	sub := func(typ, name string) string {
		return "/subscriptions/" + c.SubscriptionID + "/resourceGroups/" + rg + "/providers/Microsoft.Network/" + typ + "/" + name
	}

	nsgs := f.NewSecurityGroupsClient()
	ok, err := converge(ctx, c, ops, "create nsg", func(ctx context.Context) (State, error) {
		v, err := nsgs.Get(ctx, rg, nsgName, nil)
		return stateOf(err, v.Tags, v.Properties, j)
	}, nil, func(ctx context.Context, tok string) (*runtime.Poller[armnetwork.SecurityGroupsClientCreateOrUpdateResponse], error) {
		return nsgs.BeginCreateOrUpdate(ctx, rg, nsgName, armnetwork.SecurityGroup{Location: to.Ptr(c.Location), Tags: tags(j, "nsg"),
			Properties: &armnetwork.SecurityGroupPropertiesFormat{SecurityRules: vnetOnlyRules()}},
			&armnetwork.SecurityGroupsClientBeginCreateOrUpdateOptions{ResumeToken: tok})
	})
	if !ok || err != nil {
		return n, ops, false, err
	}
	var subnetNAT *armnetwork.SubResource
	if r.NAT {
		pips := f.NewPublicIPAddressesClient()
		ok, err = converge(ctx, c, ops, "create nat-ip", func(ctx context.Context) (State, error) {
			v, err := pips.Get(ctx, rg, pipName, nil)
			return stateOf(err, v.Tags, v.Properties, j)
		}, nil, func(ctx context.Context, tok string) (*runtime.Poller[armnetwork.PublicIPAddressesClientCreateOrUpdateResponse], error) {
			return pips.BeginCreateOrUpdate(ctx, rg, pipName, armnetwork.PublicIPAddress{Location: to.Ptr(c.Location), Tags: tags(j, "nat-ip"),
				SKU: &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard)},
				Properties: &armnetwork.PublicIPAddressPropertiesFormat{PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic),
					PublicIPAddressVersion: to.Ptr(armnetwork.IPVersionIPv4)}},
				&armnetwork.PublicIPAddressesClientBeginCreateOrUpdateOptions{ResumeToken: tok})
		})
		if !ok || err != nil {
			return n, ops, false, err
		}
		nats := f.NewNatGatewaysClient()
		ok, err = converge(ctx, c, ops, "create nat", func(ctx context.Context) (State, error) {
			v, err := nats.Get(ctx, rg, natName, nil)
			return stateOf(err, v.Tags, v.Properties, j)
		}, nil, func(ctx context.Context, tok string) (*runtime.Poller[armnetwork.NatGatewaysClientCreateOrUpdateResponse], error) {
			return nats.BeginCreateOrUpdate(ctx, rg, natName, armnetwork.NatGateway{Location: to.Ptr(c.Location), Tags: tags(j, "nat"),
				SKU: &armnetwork.NatGatewaySKU{Name: to.Ptr(armnetwork.NatGatewaySKUNameStandard)},
				Properties: &armnetwork.NatGatewayPropertiesFormat{IdleTimeoutInMinutes: to.Ptr[int32](4),
					PublicIPAddresses: []*armnetwork.SubResource{{ID: to.Ptr(sub("publicIPAddresses", pipName))}}}},
				&armnetwork.NatGatewaysClientBeginCreateOrUpdateOptions{ResumeToken: tok})
		})
		if !ok || err != nil {
			return n, ops, false, err
		}
		n.NATGatewayID = sub("natGateways", natName)
		subnetNAT = &armnetwork.SubResource{ID: to.Ptr(n.NATGatewayID)}
	}
	privateCIDR, publicCIDR := carve(pfx, 0), carve(pfx, 1)
	nsgRef := &armnetwork.SecurityGroup{ID: to.Ptr(sub("networkSecurityGroups", nsgName))}
	subnets := []*armnetwork.Subnet{
		{Name: to.Ptr(SubnetPrivate), Properties: &armnetwork.SubnetPropertiesFormat{AddressPrefix: to.Ptr(privateCIDR),
			NatGateway: subnetNAT, NetworkSecurityGroup: nsgRef, DefaultOutboundAccess: to.Ptr(false)}},
		{Name: to.Ptr(SubnetPublic), Properties: &armnetwork.SubnetPropertiesFormat{AddressPrefix: to.Ptr(publicCIDR),
			NetworkSecurityGroup: nsgRef}},
	}
	if r.Delegation != "" {
		subnets = append(subnets, &armnetwork.Subnet{Name: to.Ptr(SubnetDelegated), Properties: &armnetwork.SubnetPropertiesFormat{
			AddressPrefix: to.Ptr(carve(pfx, 2)), NetworkSecurityGroup: nsgRef, DefaultOutboundAccess: to.Ptr(false),
			Delegations: []*armnetwork.Delegation{{Name: to.Ptr(SubnetDelegated), Properties: &armnetwork.ServiceDelegationPropertiesFormat{ServiceName: to.Ptr(r.Delegation)}}}}})
	}
	vnets := f.NewVirtualNetworksClient()
	ok, err = converge(ctx, c, ops, "create vnet", func(ctx context.Context) (State, error) {
		v, err := vnets.Get(ctx, rg, vnetName, nil)
		return stateOf(err, v.Tags, v.Properties, j)
	}, nil, func(ctx context.Context, tok string) (*runtime.Poller[armnetwork.VirtualNetworksClientCreateOrUpdateResponse], error) {
		return vnets.BeginCreateOrUpdate(ctx, rg, vnetName, armnetwork.VirtualNetwork{Location: to.Ptr(c.Location), Tags: tags(j, "vnet"),
			Properties: &armnetwork.VirtualNetworkPropertiesFormat{
				AddressSpace: &armnetwork.AddressSpace{AddressPrefixes: []*string{to.Ptr(pfx.Masked().String())}},
				Subnets:      subnets}},
			&armnetwork.VirtualNetworksClientBeginCreateOrUpdateOptions{ResumeToken: tok})
	})
	if !ok || err != nil {
		return n, ops, false, err
	}
	n.VNetID = sub("virtualNetworks", vnetName)
	n.Subnets[SubnetPrivate] = n.VNetID + "/subnets/" + SubnetPrivate
	n.Subnets[SubnetPublic] = n.VNetID + "/subnets/" + SubnetPublic
	if r.Delegation != "" {
		n.Subnets[SubnetDelegated] = n.VNetID + "/subnets/" + SubnetDelegated
	}
	return n, ops, true, nil
}

// DeleteVNet removes j's network, one call at a time, in the order Azure allows: the VNet
// (and its subnets) first, which frees the NAT gateway and the NSG, then those, then the IP.
// Deletes keep no resume token: a resource being deleted reads as Deleting, and that is
// what the next call waits on.
func (c *Client) DeleteVNet(ctx context.Context, j *job.Job) (bool, error) {
	f, err := armnetwork.NewClientFactory(c.SubscriptionID, c.cred, c.opts)
	if err != nil {
		return false, fault.System(err)
	}
	rg := c.ResourceGroup
	vnets, nats, pips, nsgs := f.NewVirtualNetworksClient(), f.NewNatGatewaysClient(), f.NewPublicIPAddressesClient(), f.NewSecurityGroupsClient()
	ops := Ops{}
	steps := []func() (bool, error){
		func() (bool, error) {
			return remove(ctx, c, ops, "vnet", func(ctx context.Context) (State, error) {
				v, err := vnets.Get(ctx, rg, name(j, "vnet"), nil)
				return stateOf(err, v.Tags, v.Properties, j)
			}, func(ctx context.Context, tok string) (*runtime.Poller[armnetwork.VirtualNetworksClientDeleteResponse], error) {
				return vnets.BeginDelete(ctx, rg, name(j, "vnet"), &armnetwork.VirtualNetworksClientBeginDeleteOptions{ResumeToken: tok})
			})
		},
		func() (bool, error) {
			return remove(ctx, c, ops, "nat", func(ctx context.Context) (State, error) {
				v, err := nats.Get(ctx, rg, name(j, "nat"), nil)
				return stateOf(err, v.Tags, v.Properties, j)
			}, func(ctx context.Context, tok string) (*runtime.Poller[armnetwork.NatGatewaysClientDeleteResponse], error) {
				return nats.BeginDelete(ctx, rg, name(j, "nat"), &armnetwork.NatGatewaysClientBeginDeleteOptions{ResumeToken: tok})
			})
		},
		func() (bool, error) {
			return remove(ctx, c, ops, "nat-ip", func(ctx context.Context) (State, error) {
				v, err := pips.Get(ctx, rg, name(j, "nat-ip"), nil)
				return stateOf(err, v.Tags, v.Properties, j)
			}, func(ctx context.Context, tok string) (*runtime.Poller[armnetwork.PublicIPAddressesClientDeleteResponse], error) {
				return pips.BeginDelete(ctx, rg, name(j, "nat-ip"), &armnetwork.PublicIPAddressesClientBeginDeleteOptions{ResumeToken: tok})
			})
		},
		func() (bool, error) {
			return remove(ctx, c, ops, "nsg", func(ctx context.Context) (State, error) {
				v, err := nsgs.Get(ctx, rg, name(j, "nsg"), nil)
				return stateOf(err, v.Tags, v.Properties, j)
			}, func(ctx context.Context, tok string) (*runtime.Poller[armnetwork.SecurityGroupsClientDeleteResponse], error) {
				return nsgs.BeginDelete(ctx, rg, name(j, "nsg"), &armnetwork.SecurityGroupsClientBeginDeleteOptions{ResumeToken: tok})
			})
		},
	}
	for _, s := range steps {
		gone, err := s()
		if err != nil || !gone {
			return false, err
		}
	}
	return true, nil
}

// EnsurePeering implements network.Driver: a peering from the job's VNet to peerVPCID (a
// virtual network's resource id), replacing one of the job's to another network. Azure makes
// one in seconds, so it is awaited here.
func (d NetworkDriver) EnsurePeering(ctx context.Context, j *job.Job, vnetID string, p network.Peering) (string, error) {
	if _, err := arm.ParseResourceID(p.PeerVPCID); err != nil {
		return "", fault.UserAction(fmt.Errorf("peering.peerVPCID %q: %w", p.PeerVPCID, err), "InvalidVNetID",
			"Give peering.peerVPCID as a virtual network's full resource id.", "")
	}
	own, err := arm.ParseResourceID(vnetID)
	if err != nil {
		return "", fault.System(fmt.Errorf("own vnet id %q: %w", vnetID, err))
	}
	f, err := d.net()
	if err != nil {
		return "", err
	}
	peerings := f.NewVirtualNetworkPeeringsClient()
	pname := name(j, "peering")
	ops := Ops{}
	read := func(ctx context.Context) (State, string, error) {
		v, err := peerings.Get(ctx, own.ResourceGroupName, own.Name, pname, nil)
		if notFound(err) {
			return State{}, "", nil
		}
		if err != nil {
			return State{}, "", err
		}
		remote := ""
		if v.Properties != nil && v.Properties.RemoteVirtualNetwork != nil {
			remote = deref(v.Properties.RemoteVirtualNetwork.ID)
		}
		return State{Found: true, Provisioning: provisioning(v.Properties)}, remote, nil
	}
	err = d.C.await(ctx, "peering "+pname, func() (bool, error) {
		// A peering keeps its remote network (Azure refuses to change it): one of the job's
		// to another network (a config update moved it) is deleted before the new one is made.
		gone, err := remove(ctx, d.C, ops, "replaced peering", func(ctx context.Context) (State, error) {
			st, remote, err := read(ctx)
			if st.Found && strings.EqualFold(remote, p.PeerVPCID) {
				return State{}, err
			}
			return st, err
		}, func(ctx context.Context, tok string) (*runtime.Poller[armnetwork.VirtualNetworkPeeringsClientDeleteResponse], error) {
			return peerings.BeginDelete(ctx, own.ResourceGroupName, own.Name, pname, &armnetwork.VirtualNetworkPeeringsClientBeginDeleteOptions{ResumeToken: tok})
		})
		if !gone || err != nil {
			return false, err
		}
		return converge(ctx, d.C, ops, "peering", func(ctx context.Context) (State, error) {
			st, _, err := read(ctx)
			return st, err
		}, nil, func(ctx context.Context, tok string) (*runtime.Poller[armnetwork.VirtualNetworkPeeringsClientCreateOrUpdateResponse], error) {
			return peerings.BeginCreateOrUpdate(ctx, own.ResourceGroupName, own.Name, pname, armnetwork.VirtualNetworkPeering{
				Properties: &armnetwork.VirtualNetworkPeeringPropertiesFormat{
					RemoteVirtualNetwork:      &armnetwork.SubResource{ID: to.Ptr(p.PeerVPCID)},
					AllowVirtualNetworkAccess: to.Ptr(true), AllowForwardedTraffic: to.Ptr(false)}},
				&armnetwork.VirtualNetworkPeeringsClientBeginCreateOrUpdateOptions{ResumeToken: tok})
		})
	})
	if err != nil {
		if code := fault.As(err).Code; code == "" && strings.Contains(err.Error(), "ReferencedResourceNotFound") {
			return "", fault.UserAction(err, "PeerNotFound", "The virtual network in peering.peerVPCID does not exist; check the id.", d.C.PortalURL(p.PeerVPCID))
		}
		return "", err
	}
	return vnetID + "/virtualNetworkPeerings/" + pname, nil
}

// DeletePeering implements network.Driver: awaited here, as Azure removes a peering in
// seconds.
func (d NetworkDriver) DeletePeering(ctx context.Context, j *job.Job) error {
	f, err := d.net()
	if err != nil {
		return err
	}
	peerings := f.NewVirtualNetworkPeeringsClient()
	rg, vnet, pname := d.C.ResourceGroup, name(j, "vnet"), name(j, "peering")
	ops := Ops{}
	return d.C.await(ctx, "deleting peering "+pname, func() (bool, error) {
		return remove(ctx, d.C, ops, "peering", func(ctx context.Context) (State, error) {
			v, err := peerings.Get(ctx, rg, vnet, pname, nil)
			if notFound(err) {
				return State{}, nil
			}
			if err != nil {
				return State{}, err
			}
			return State{Found: true, Provisioning: provisioning(v.Properties)}, nil
		}, func(ctx context.Context, tok string) (*runtime.Poller[armnetwork.VirtualNetworkPeeringsClientDeleteResponse], error) {
			return peerings.BeginDelete(ctx, rg, vnet, pname, &armnetwork.VirtualNetworkPeeringsClientBeginDeleteOptions{ResumeToken: tok})
		})
	})
}

// vnetOnlyRules admit traffic from inside the VNet and Azure's load balancer probes, and
// refuse the internet, explicitly, so the rule shows in the portal next to the job's tags.
func vnetOnlyRules() []*armnetwork.SecurityRule {
	rule := func(name string, prio int32, src string, access armnetwork.SecurityRuleAccess) *armnetwork.SecurityRule {
		return &armnetwork.SecurityRule{Name: to.Ptr(name), Properties: &armnetwork.SecurityRulePropertiesFormat{
			Priority: to.Ptr(prio), Direction: to.Ptr(armnetwork.SecurityRuleDirectionInbound), Access: to.Ptr(access),
			Protocol: to.Ptr(armnetwork.SecurityRuleProtocolAsterisk), SourceAddressPrefix: to.Ptr(src),
			SourcePortRange: to.Ptr("*"), DestinationAddressPrefix: to.Ptr("VirtualNetwork"), DestinationPortRange: to.Ptr("*")}}
	}
	return []*armnetwork.SecurityRule{
		rule("allow-vnet-inbound", 100, "VirtualNetwork", armnetwork.SecurityRuleAccessAllow),
		rule("allow-lb-probes", 110, "AzureLoadBalancer", armnetwork.SecurityRuleAccessAllow),
		rule("deny-internet-inbound", 4000, "Internet", armnetwork.SecurityRuleAccessDeny),
	}
}

// carve is the i-th /20 (or a quarter of a smaller block) of pfx.
func carve(pfx netip.Prefix, i int) string {
	bits := pfx.Bits() + 4
	if bits > 28 {
		bits = pfx.Bits() + 2
	}
	base := pfx.Masked().Addr().As4()
	v := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	v += uint32(i) << (32 - bits)
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), bits).String()
}
