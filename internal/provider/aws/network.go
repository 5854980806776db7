package aws

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/groundworkhq/groundwork/internal/fault"
)

// NetworkSpec asks for a VPC with public and private subnets in AZCount zones, an internet
// gateway, and (unless NoNAT) one NAT gateway for the private subnets' egress.
type NetworkSpec struct {
	Tags    Tags
	CIDR    string // default 10.0.0.0/16
	AZCount int    // default 2 (at least 2)
	NoNAT   bool
	// ExistingVPCID adopts a customer's VPC: nothing is created in it and it is never
	// deleted. ExistingSubnetIDs are the subnets to use (all private when given).
	ExistingVPCID     string
	ExistingSubnetIDs []string
}

// Network is what EnsureNetwork built (or adopted); the pipeline keeps it in infra.
type Network struct {
	VPCID               string   `json:"vpcID"`
	CIDR                string   `json:"cidr"`
	Existing            bool     `json:"existing,omitempty"`
	AvailabilityZones   []string `json:"availabilityZones,omitempty"`
	PublicSubnetIDs     []string `json:"publicSubnetIDs,omitempty"`
	PrivateSubnetIDs    []string `json:"privateSubnetIDs,omitempty"`
	InternetGatewayID   string   `json:"internetGatewayID,omitempty"`
	EIPAllocationID     string   `json:"eipAllocationID,omitempty"`
	NATGatewayID        string   `json:"natGatewayID,omitempty"`
	PublicRouteTableID  string   `json:"publicRouteTableID,omitempty"`
	PrivateRouteTableID string   `json:"privateRouteTableID,omitempty"`
	// Ready is false while the NAT gateway is still pending: the caller waits and calls again.
	Ready bool `json:"ready"`
}

// EnsureNetwork creates whatever of the network is missing and returns all of it. Every piece is
// found by its job and role tags first, so a re-run creates nothing new.
func (p *Provider) EnsureNetwork(ctx context.Context, s NetworkSpec) (Network, error) {
	if s.ExistingVPCID != "" {
		return p.adoptVPC(ctx, s)
	}
	if s.CIDR == "" {
		s.CIDR = "10.0.0.0/16"
	}
	if s.AZCount < 2 {
		s.AZCount = 2
	}
	prefix, err := netip.ParsePrefix(s.CIDR)
	if err != nil || !prefix.Addr().Is4() || prefix.Bits() > 20 {
		return Network{}, fault.UserAction(fmt.Errorf("cidr %q: want an IPv4 block of /20 or larger", s.CIDR), "InvalidCIDR", "Give the network a CIDR such as 10.0.0.0/16.", "")
	}
	n := Network{CIDR: s.CIDR}
	if n.VPCID, err = p.ensureVPC(ctx, s.Tags.WithRole("vpc"), s.CIDR); err != nil {
		return n, err
	}
	if n.AvailabilityZones, err = p.zones(ctx, s.AZCount); err != nil {
		return n, err
	}
	cidrs, err := p.subnetLayout(ctx, s.Tags, n.VPCID, prefix, s.AZCount)
	if err != nil {
		return n, err
	}
	for i, az := range n.AvailabilityZones {
		id, err := p.ensureSubnet(ctx, s.Tags.WithRole(subnetRole(true, i)), n.VPCID, cidrs[subnetRole(true, i)], az, true)
		if err != nil {
			return n, err
		}
		n.PublicSubnetIDs = append(n.PublicSubnetIDs, id)
		id, err = p.ensureSubnet(ctx, s.Tags.WithRole(subnetRole(false, i)), n.VPCID, cidrs[subnetRole(false, i)], az, false)
		if err != nil {
			return n, err
		}
		n.PrivateSubnetIDs = append(n.PrivateSubnetIDs, id)
	}
	if n.InternetGatewayID, err = p.ensureIGW(ctx, s.Tags.WithRole("igw"), n.VPCID); err != nil {
		return n, err
	}
	if n.PublicRouteTableID, err = p.ensureRouteTable(ctx, s.Tags.WithRole("rt-public"), n.VPCID, n.PublicSubnetIDs); err != nil {
		return n, err
	}
	if err := p.ensureRoute(ctx, n.PublicRouteTableID, &ec2.CreateRouteInput{GatewayId: &n.InternetGatewayID}); err != nil {
		return n, err
	}
	if n.PrivateRouteTableID, err = p.ensureRouteTable(ctx, s.Tags.WithRole("rt-private"), n.VPCID, n.PrivateSubnetIDs); err != nil {
		return n, err
	}
	n.Ready = true
	if s.NoNAT {
		return n, nil
	}
	if n.EIPAllocationID, err = p.ensureEIP(ctx, s.Tags.WithRole("eip-nat")); err != nil {
		return n, err
	}
	var state ec2types.NatGatewayState
	if n.NATGatewayID, state, err = p.ensureNAT(ctx, s.Tags.WithRole("nat"), n.PublicSubnetIDs[0], n.EIPAllocationID); err != nil {
		return n, err
	}
	if state != ec2types.NatGatewayStateAvailable {
		n.Ready = false
		return n, nil
	}
	if err := p.ensureRoute(ctx, n.PrivateRouteTableID, &ec2.CreateRouteInput{NatGatewayId: &n.NATGatewayID}); err != nil {
		return n, err
	}
	return n, nil
}

// DeleteNetwork removes everything EnsureNetwork created for the job, in reverse order, found by
// tag (not by the recorded IDs alone, so that a crash between create and checkpoint leaves
// nothing behind). It reports done=false while the NAT gateway is still being deleted. An
// adopted VPC is never touched.
func (p *Provider) DeleteNetwork(ctx context.Context, t Tags) (done bool, err error) {
	nats, err := p.ec2.DescribeNatGateways(ctx, &ec2.DescribeNatGatewaysInput{Filter: t.ec2JobFilter()})
	if err != nil {
		return false, p.classify(err, false)
	}
	for _, g := range nats.NatGateways {
		switch g.State {
		case ec2types.NatGatewayStateDeleted:
			continue
		case ec2types.NatGatewayStateDeleting:
			done = false
		default:
			if _, err := p.ec2.DeleteNatGateway(ctx, &ec2.DeleteNatGatewayInput{NatGatewayId: g.NatGatewayId}); err != nil && !gone(err) {
				return false, p.classify(err, false)
			}
		}
		return false, nil
	}
	addrs, err := p.ec2.DescribeAddresses(ctx, &ec2.DescribeAddressesInput{Filters: t.ec2JobFilter()})
	if err != nil {
		return false, p.classify(err, false)
	}
	for _, a := range addrs.Addresses {
		if _, err := p.ec2.ReleaseAddress(ctx, &ec2.ReleaseAddressInput{AllocationId: a.AllocationId}); err != nil && !gone(err) {
			return false, p.classify(err, false)
		}
	}
	rts, err := p.ec2.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{Filters: t.ec2JobFilter()})
	if err != nil {
		return false, p.classify(err, false)
	}
	for _, rt := range rts.RouteTables {
		for _, a := range rt.Associations {
			if a.Main != nil && *a.Main {
				continue
			}
			if _, err := p.ec2.DisassociateRouteTable(ctx, &ec2.DisassociateRouteTableInput{AssociationId: a.RouteTableAssociationId}); err != nil && !gone(err) {
				return false, p.classify(err, false)
			}
		}
		if _, err := p.ec2.DeleteRouteTable(ctx, &ec2.DeleteRouteTableInput{RouteTableId: rt.RouteTableId}); err != nil && !gone(err) {
			return false, p.classify(err, false)
		}
	}
	subnets, err := p.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: t.ec2JobFilter()})
	if err != nil {
		return false, p.classify(err, false)
	}
	for _, sn := range subnets.Subnets {
		if _, err := p.ec2.DeleteSubnet(ctx, &ec2.DeleteSubnetInput{SubnetId: sn.SubnetId}); err != nil && !gone(err) {
			return false, p.classify(err, false)
		}
	}
	igws, err := p.ec2.DescribeInternetGateways(ctx, &ec2.DescribeInternetGatewaysInput{Filters: t.ec2JobFilter()})
	if err != nil {
		return false, p.classify(err, false)
	}
	for _, g := range igws.InternetGateways {
		for _, a := range g.Attachments {
			if _, err := p.ec2.DetachInternetGateway(ctx, &ec2.DetachInternetGatewayInput{InternetGatewayId: g.InternetGatewayId, VpcId: a.VpcId}); err != nil && !gone(err) && !isCode(err, "Gateway.NotAttached") {
				return false, p.classify(err, false)
			}
		}
		if _, err := p.ec2.DeleteInternetGateway(ctx, &ec2.DeleteInternetGatewayInput{InternetGatewayId: g.InternetGatewayId}); err != nil && !gone(err) {
			return false, p.classify(err, false)
		}
	}
	vpcs, err := p.ec2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{Filters: t.ec2JobFilter()})
	if err != nil {
		return false, p.classify(err, false)
	}
	for _, v := range vpcs.Vpcs {
		if err := p.deleteVPCLeftovers(ctx, deref(v.VpcId)); err != nil {
			return false, err
		}
		if _, err := p.ec2.DeleteVpc(ctx, &ec2.DeleteVpcInput{VpcId: v.VpcId}); err != nil && !gone(err) {
			return false, p.classify(err, false)
		}
	}
	return true, nil
}

// deleteVPCLeftovers removes the non-default security groups of this job's VPC (created by
// other drivers of the same job and already emptied), which would block DeleteVpc.
func (p *Provider) deleteVPCLeftovers(ctx context.Context, vpcID string) error {
	sgs, err := p.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{{Name: ptr("vpc-id"), Values: []string{vpcID}}}})
	if err != nil {
		return p.classify(err, false)
	}
	for _, g := range sgs.SecurityGroups {
		if deref(g.GroupName) == "default" {
			continue
		}
		if _, err := p.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: g.GroupId}); err != nil && !gone(err) {
			return p.classify(err, false)
		}
	}
	return nil
}

func (p *Provider) adoptVPC(ctx context.Context, s NetworkSpec) (Network, error) {
	out, err := p.ec2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{VpcIds: []string{s.ExistingVPCID}})
	if err != nil {
		if isCode(err, "InvalidVpcID.NotFound") {
			return Network{}, fault.UserAction(err, "VPCNotFound", fmt.Sprintf("VPC %s does not exist in %s: pick an existing VPC of this account and region.", s.ExistingVPCID, p.region), "https://console.aws.amazon.com/vpcconsole/home?region="+p.region+"#vpcs:")
		}
		return Network{}, p.classify(err, false)
	}
	n := Network{VPCID: s.ExistingVPCID, CIDR: deref(out.Vpcs[0].CidrBlock), Existing: true, Ready: true}
	filters := []ec2types.Filter{{Name: ptr("vpc-id"), Values: []string{s.ExistingVPCID}}}
	in := &ec2.DescribeSubnetsInput{Filters: filters}
	if len(s.ExistingSubnetIDs) > 0 {
		in = &ec2.DescribeSubnetsInput{SubnetIds: s.ExistingSubnetIDs}
	}
	subs, err := p.ec2.DescribeSubnets(ctx, in)
	if err != nil {
		return n, p.classify(err, false)
	}
	azs := map[string]bool{}
	for _, sn := range subs.Subnets {
		if deref(sn.VpcId) != s.ExistingVPCID {
			return n, fault.UserAction(fmt.Errorf("subnet %s is not in VPC %s", deref(sn.SubnetId), s.ExistingVPCID), "SubnetNotInVPC", "Pick subnets of the chosen VPC.", "")
		}
		if deref(sn.MapPublicIpOnLaunch) {
			n.PublicSubnetIDs = append(n.PublicSubnetIDs, deref(sn.SubnetId))
		} else {
			n.PrivateSubnetIDs = append(n.PrivateSubnetIDs, deref(sn.SubnetId))
		}
		azs[deref(sn.AvailabilityZone)] = true
	}
	for az := range azs {
		n.AvailabilityZones = append(n.AvailabilityZones, az)
	}
	sort.Strings(n.AvailabilityZones)
	return n, nil
}

// stepNetwork names the step that builds the network in every family, for idempotency keys.
const stepNetwork = "create_network"

func (p *Provider) ensureVPC(ctx context.Context, t Tags, cidr string) (string, error) {
	find := func(ctx context.Context) (string, bool, error) {
		out, err := p.ec2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{Filters: t.ec2Filters()})
		if err != nil || len(out.Vpcs) == 0 {
			return "", false, err
		}
		return deref(out.Vpcs[0].VpcId), true, nil
	}
	id, found, err := find(ctx)
	if err != nil {
		return "", p.classify(err, false)
	}
	if !found {
		// CreateVpc has no idempotency key: the tags in the same call are what a look-up finds.
		id, err = createOnce(ctx, p.ec2.Options().Retryer, find, func(ctx context.Context) (string, error) {
			out, err := p.ec2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: &cidr, TagSpecifications: t.ec2Spec(ec2types.ResourceTypeVpc)}, ec2NoRetry)
			if err != nil {
				return "", err
			}
			return deref(out.Vpc.VpcId), nil
		})
		if err != nil {
			return "", p.classify(err, false)
		}
	}
	// Hostnames are needed by RDS and EKS private endpoints. Set on every run (it is
	// idempotent), so that a run that lost its way between the create and these still sets them.
	for _, attr := range []*ec2.ModifyVpcAttributeInput{
		{VpcId: &id, EnableDnsSupport: &ec2types.AttributeBooleanValue{Value: ptr(true)}},
		{VpcId: &id, EnableDnsHostnames: &ec2types.AttributeBooleanValue{Value: ptr(true)}},
	} {
		if _, err := p.ec2.ModifyVpcAttribute(ctx, attr); err != nil {
			return "", p.classify(err, true)
		}
	}
	return id, nil
}

func (p *Provider) zones(ctx context.Context, n int) ([]string, error) {
	out, err := p.ec2.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{
		Filters: []ec2types.Filter{{Name: ptr("state"), Values: []string{"available"}}},
	})
	if err != nil {
		return nil, p.classify(err, false)
	}
	var names []string
	for _, z := range out.AvailabilityZones {
		names = append(names, deref(z.ZoneName))
	}
	sort.Strings(names)
	if len(names) < n {
		return nil, fault.UserAction(fmt.Errorf("region %s has %d availability zones, need %d", p.region, len(names), n), "NotEnoughZones", "Pick a region with at least two availability zones.", "")
	}
	return names[:n], nil
}

// subnetRole is the role tag of the public or private subnet of zone i.
func subnetRole(public bool, i int) string {
	if public {
		return fmt.Sprintf("subnet-public-%d", i)
	}
	return fmt.Sprintf("subnet-private-%d", i)
}

// subnetLayout gives each of the network's subnet roles its CIDR block. A subnet the job has
// keeps its block. A new network lays out the public blocks first, then the private ones
// (subnetCIDRs); a network grown to more zones later finds that layout's blocks for the new
// zones partly taken by the first zones' private subnets, so a new subnet whose block is taken
// gets the first free one instead. Blocks already given out are never moved: what runs in
// them keeps its addresses.
func (p *Provider) subnetLayout(ctx context.Context, t Tags, vpcID string, prefix netip.Prefix, azCount int) (map[string]string, error) {
	out, err := p.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: ptr("vpc-id"), Values: []string{vpcID}}}})
	if err != nil {
		return nil, p.classify(err, false)
	}
	layout, used := map[string]string{}, map[string]bool{}
	for _, sn := range out.Subnets {
		used[deref(sn.CidrBlock)] = true
		tags := map[string]string{}
		for _, tg := range sn.Tags {
			tags[deref(tg.Key)] = deref(tg.Value)
		}
		if tags[TagJobID] == t.JobID && tags[TagRole] != "" {
			layout[tags[TagRole]] = deref(sn.CidrBlock)
		}
	}
	all := subnetCIDRs(prefix, 1<<(subnetBits(prefix)-prefix.Bits()))
	fresh := subnetCIDRs(prefix, min(2*azCount, len(all)))
	want := func(role string, slot int) error {
		if _, ok := layout[role]; ok {
			return nil
		}
		if slot < len(fresh) && !used[fresh[slot]] {
			layout[role], used[fresh[slot]] = fresh[slot], true
			return nil
		}
		for _, c := range all {
			if !used[c] {
				layout[role], used[c] = c, true
				return nil
			}
		}
		return fault.UserAction(fmt.Errorf("cidr %s: no free block for subnet %s", prefix, role), "NoFreeSubnetBlock",
			fmt.Sprintf("The network's %s has room for %d subnets: ask for fewer zones.", prefix, len(all)), "")
	}
	for i := range azCount {
		if err := want(subnetRole(true, i), i); err != nil {
			return nil, err
		}
	}
	for i := range azCount {
		if err := want(subnetRole(false, i), azCount+i); err != nil {
			return nil, err
		}
	}
	return layout, nil
}

// subnetBits is the size of the network's subnets: /20, or /24 in a block smaller than /18.
func subnetBits(prefix netip.Prefix) int {
	if prefix.Bits() > 18 {
		return prefix.Bits() + 4
	}
	return 20
}

// subnetCIDRs cuts n consecutive subnet blocks (subnetBits) out of prefix.
func subnetCIDRs(prefix netip.Prefix, n int) []string {
	bits := subnetBits(prefix)
	base := prefix.Masked().Addr().As4()
	start := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	size := uint32(1) << (32 - bits)
	out := make([]string, n)
	for i := range n {
		a := start + uint32(i)*size
		out[i] = netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}), bits).String()
	}
	return out
}

func (p *Provider) ensureSubnet(ctx context.Context, t Tags, vpcID, cidr, az string, public bool) (string, error) {
	find := func(ctx context.Context) (ec2types.Subnet, bool, error) {
		out, err := p.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: t.ec2Filters()})
		if err != nil || len(out.Subnets) == 0 {
			return ec2types.Subnet{}, false, err
		}
		return out.Subnets[0], true, nil
	}
	sn, found, err := find(ctx)
	if err != nil {
		return "", p.classify(err, false)
	}
	if !found {
		sn, err = createOnce(ctx, p.ec2.Options().Retryer, find, func(ctx context.Context) (ec2types.Subnet, error) {
			out, err := p.ec2.CreateSubnet(ctx, &ec2.CreateSubnetInput{
				VpcId: &vpcID, CidrBlock: &cidr, AvailabilityZone: &az,
				TagSpecifications: t.ec2Spec(ec2types.ResourceTypeSubnet),
			}, ec2NoRetry)
			if err != nil {
				return ec2types.Subnet{}, err
			}
			return *out.Subnet, nil
		})
		if isCode(err, "InvalidSubnet.Conflict") {
			return "", p.subnetConflict(ctx, err, vpcID, cidr)
		}
		if err != nil {
			return "", p.classify(err, true)
		}
	}
	if public && !deref(sn.MapPublicIpOnLaunch) {
		// Also on a re-run: the run that created the subnet may have lost its way before this.
		if _, err := p.ec2.ModifySubnetAttribute(ctx, &ec2.ModifySubnetAttributeInput{
			SubnetId: sn.SubnetId, MapPublicIpOnLaunch: &ec2types.AttributeBooleanValue{Value: ptr(true)},
		}); err != nil {
			return "", p.classify(err, true)
		}
	}
	return deref(sn.SubnetId), nil
}

// subnetConflict explains a CIDR conflict that a look-up by this job's tags did not resolve:
// the block is taken by a subnet that is not this job's, which the user must move.
func (p *Provider) subnetConflict(ctx context.Context, err error, vpcID, cidr string) error {
	out, derr := p.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{
		{Name: ptr("vpc-id"), Values: []string{vpcID}}, {Name: ptr("cidr-block"), Values: []string{cidr}}}})
	if derr != nil || len(out.Subnets) == 0 {
		// Not visible yet (eventual consistency): the step's re-run looks again.
		return p.classify(err, true)
	}
	return alreadyExists("subnet", deref(out.Subnets[0].SubnetId)+" ("+cidr+")")
}

func (p *Provider) ensureIGW(ctx context.Context, t Tags, vpcID string) (string, error) {
	find := func(ctx context.Context) (ec2types.InternetGateway, bool, error) {
		out, err := p.ec2.DescribeInternetGateways(ctx, &ec2.DescribeInternetGatewaysInput{Filters: t.ec2Filters()})
		if err != nil || len(out.InternetGateways) == 0 {
			return ec2types.InternetGateway{}, false, err
		}
		return out.InternetGateways[0], true, nil
	}
	g, found, err := find(ctx)
	if err != nil {
		return "", p.classify(err, false)
	}
	if !found {
		g, err = createOnce(ctx, p.ec2.Options().Retryer, find, func(ctx context.Context) (ec2types.InternetGateway, error) {
			out, err := p.ec2.CreateInternetGateway(ctx, &ec2.CreateInternetGatewayInput{TagSpecifications: t.ec2Spec(ec2types.ResourceTypeInternetGateway)}, ec2NoRetry)
			if err != nil {
				return ec2types.InternetGateway{}, err
			}
			return *out.InternetGateway, nil
		})
		if err != nil {
			return "", p.classify(err, false)
		}
	}
	for _, a := range g.Attachments {
		if deref(a.VpcId) == vpcID {
			return deref(g.InternetGatewayId), nil
		}
	}
	// A repeat after a lost answer meets the attachment it made: Resource.AlreadyAssociated.
	if _, err := p.ec2.AttachInternetGateway(ctx, &ec2.AttachInternetGatewayInput{InternetGatewayId: g.InternetGatewayId, VpcId: &vpcID}); err != nil && !isCode(err, "Resource.AlreadyAssociated") {
		return "", p.classify(err, true)
	}
	return deref(g.InternetGatewayId), nil
}

func (p *Provider) ensureRouteTable(ctx context.Context, t Tags, vpcID string, subnetIDs []string) (string, error) {
	find := func(ctx context.Context) (ec2types.RouteTable, bool, error) {
		out, err := p.ec2.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{Filters: t.ec2Filters()})
		if err != nil || len(out.RouteTables) == 0 {
			return ec2types.RouteTable{}, false, err
		}
		return out.RouteTables[0], true, nil
	}
	rt, found, err := find(ctx)
	if err != nil {
		return "", p.classify(err, false)
	}
	if !found {
		// EC2's key where it is honoured, and the look-up where it is not.
		rt, err = createOnce(ctx, p.ec2.Options().Retryer, find, func(ctx context.Context) (ec2types.RouteTable, error) {
			out, err := p.ec2.CreateRouteTable(ctx, &ec2.CreateRouteTableInput{VpcId: &vpcID, ClientToken: ptr(clientToken(stepNetwork, t)),
				TagSpecifications: t.ec2Spec(ec2types.ResourceTypeRouteTable)}, ec2NoRetry)
			if err != nil {
				return ec2types.RouteTable{}, err
			}
			return *out.RouteTable, nil
		})
		if err != nil {
			return "", p.classify(err, true)
		}
	}
	associated := map[string]bool{}
	for _, a := range rt.Associations {
		associated[deref(a.SubnetId)] = true
	}
	for _, sn := range subnetIDs {
		if associated[sn] {
			continue
		}
		_, err := p.ec2.AssociateRouteTable(ctx, &ec2.AssociateRouteTableInput{RouteTableId: rt.RouteTableId, SubnetId: ptr(sn)})
		if isCode(err, "Resource.AlreadyAssociated") {
			err = p.checkAssociation(ctx, err, deref(rt.RouteTableId), sn)
		}
		if err != nil {
			return "", p.classify(err, true)
		}
	}
	return deref(rt.RouteTableId), nil
}

// checkAssociation settles Resource.AlreadyAssociated: the association a lost answer made is
// success; the subnet bound to another table is a conflict for the user.
func (p *Provider) checkAssociation(ctx context.Context, err error, rtID, subnetID string) error {
	out, derr := p.ec2.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{Filters: []ec2types.Filter{
		{Name: ptr("association.subnet-id"), Values: []string{subnetID}}}})
	if derr != nil {
		return derr
	}
	for _, rt := range out.RouteTables {
		if deref(rt.RouteTableId) == rtID {
			return nil
		}
		return alreadyExists("route table association of subnet "+subnetID, deref(rt.RouteTableId))
	}
	return err
}

// ensureRoute sets the default route of a table to the target in in; an existing default route
// to the same target is success.
func (p *Provider) ensureRoute(ctx context.Context, rtID string, in *ec2.CreateRouteInput) error {
	in.RouteTableId = &rtID
	in.DestinationCidrBlock = ptr("0.0.0.0/0")
	if _, err := p.ec2.CreateRoute(ctx, in); err != nil {
		if isCode(err, "RouteAlreadyExists") {
			return nil
		}
		return p.classify(err, true)
	}
	return nil
}

func (p *Provider) ensureEIP(ctx context.Context, t Tags) (string, error) {
	find := func(ctx context.Context) (string, bool, error) {
		out, err := p.ec2.DescribeAddresses(ctx, &ec2.DescribeAddressesInput{Filters: t.ec2Filters()})
		if err != nil || len(out.Addresses) == 0 {
			return "", false, err
		}
		return deref(out.Addresses[0].AllocationId), true, nil
	}
	id, found, err := find(ctx)
	if err != nil || found {
		return id, p.classify(err, false)
	}
	// AllocateAddress has no idempotency key: the tags in the same call are what a look-up finds.
	id, err = createOnce(ctx, p.ec2.Options().Retryer, find, func(ctx context.Context) (string, error) {
		out, err := p.ec2.AllocateAddress(ctx, &ec2.AllocateAddressInput{Domain: ec2types.DomainTypeVpc, TagSpecifications: t.ec2Spec(ec2types.ResourceTypeElasticIp)}, ec2NoRetry)
		if err != nil {
			return "", err
		}
		return deref(out.AllocationId), nil
	})
	return id, p.classify(err, false)
}

func (p *Provider) ensureNAT(ctx context.Context, t Tags, subnetID, allocID string) (string, ec2types.NatGatewayState, error) {
	find := func(ctx context.Context) (ec2types.NatGateway, bool, error) {
		out, err := p.ec2.DescribeNatGateways(ctx, &ec2.DescribeNatGatewaysInput{Filter: append(t.ec2Filters(),
			ec2types.Filter{Name: ptr("state"), Values: []string{"pending", "available"}})})
		if err != nil || len(out.NatGateways) == 0 {
			return ec2types.NatGateway{}, false, err
		}
		return out.NatGateways[0], true, nil
	}
	g, found, err := find(ctx)
	if err != nil {
		return "", "", p.classify(err, false)
	}
	if !found {
		// EC2's idempotency key (a repeat returns the same gateway), and the look-up for clouds
		// that do not honour it.
		g, err = createOnce(ctx, p.ec2.Options().Retryer, find, func(ctx context.Context) (ec2types.NatGateway, error) {
			out, err := p.ec2.CreateNatGateway(ctx, &ec2.CreateNatGatewayInput{
				SubnetId: &subnetID, AllocationId: &allocID, ClientToken: ptr(clientToken(stepNetwork, t)),
				TagSpecifications: t.ec2Spec(ec2types.ResourceTypeNatgateway),
			}, ec2NoRetry)
			if err != nil {
				return ec2types.NatGateway{}, err
			}
			return *out.NatGateway, nil
		})
		if err != nil {
			return "", "", p.classify(err, true)
		}
	}
	return deref(g.NatGatewayId), g.State, nil
}

// isCode reports whether err is an AWS API error with one of codes.
func isCode(err error, codes ...string) bool {
	var api smithy.APIError
	if !errors.As(err, &api) {
		return false
	}
	for _, c := range codes {
		if api.ErrorCode() == c {
			return true
		}
	}
	return false
}
