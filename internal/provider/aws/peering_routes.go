package aws

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// peeringRouteTableRoles are the route tables of a network Groundwork made: both reach the
// peer VPC through the connection.
var peeringRouteTableRoles = []string{"rt-public", "rt-private"}

// jobRouteTables are the job's own route tables (none for an adopted VPC: its tables are the
// customer's).
func (p *Provider) jobRouteTables(ctx context.Context, t Tags) ([]ec2types.RouteTable, error) {
	out, err := p.ec2.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{Filters: []ec2types.Filter{
		{Name: ptr("tag:" + TagJobID), Values: []string{t.JobID}},
		{Name: ptr("tag:" + TagRole), Values: peeringRouteTableRoles},
	}})
	if err != nil {
		return nil, p.classify(err, false)
	}
	return out.RouteTables, nil
}

// ensurePeeringRoutes routes the peer VPC's block through the connection in the job's route
// tables. The block is the one the connection reports for its accepter, or, for a peer of the
// same account and region, the peer VPC's own; a cross-account peer not yet accepted has none
// yet, and its routes come with the next run of the step.
func (p *Provider) ensurePeeringRoutes(ctx context.Context, s PeeringSpec, pc ec2types.VpcPeeringConnection) error {
	id := deref(pc.VpcPeeringConnectionId)
	var cidr string
	if pc.AccepterVpcInfo != nil {
		cidr = deref(pc.AccepterVpcInfo.CidrBlock)
	}
	if cidr == "" && s.PeerOwnerID == "" && (s.PeerRegion == "" || s.PeerRegion == p.region) {
		out, err := p.ec2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{VpcIds: []string{s.PeerVPCID}})
		if err != nil {
			return p.classify(err, false)
		}
		if len(out.Vpcs) > 0 {
			cidr = deref(out.Vpcs[0].CidrBlock)
		}
	}
	if cidr == "" {
		return nil
	}
	rts, err := p.jobRouteTables(ctx, s.Tags)
	if err != nil {
		return err
	}
	for _, rt := range rts {
		routed := false
		for _, r := range rt.Routes {
			if deref(r.DestinationCidrBlock) == cidr && deref(r.VpcPeeringConnectionId) == id {
				routed = true
			}
		}
		if routed {
			continue
		}
		_, err := p.ec2.CreateRoute(ctx, &ec2.CreateRouteInput{RouteTableId: rt.RouteTableId, DestinationCidrBlock: &cidr, VpcPeeringConnectionId: &id})
		if err != nil && !isCode(err, "RouteAlreadyExists") {
			return p.classify(err, true)
		}
	}
	return nil
}

// deletePeering removes the job's routes through connection pc, then pc itself.
func (p *Provider) deletePeering(ctx context.Context, t Tags, pc ec2types.VpcPeeringConnection) error {
	rts, err := p.jobRouteTables(ctx, t)
	if err != nil {
		return err
	}
	for _, rt := range rts {
		for _, r := range rt.Routes {
			if deref(r.VpcPeeringConnectionId) != deref(pc.VpcPeeringConnectionId) {
				continue
			}
			if _, err := p.ec2.DeleteRoute(ctx, &ec2.DeleteRouteInput{RouteTableId: rt.RouteTableId, DestinationCidrBlock: r.DestinationCidrBlock}); err != nil && !gone(err) {
				return p.classify(err, false)
			}
		}
	}
	if _, err := p.ec2.DeleteVpcPeeringConnection(ctx, &ec2.DeleteVpcPeeringConnectionInput{VpcPeeringConnectionId: pc.VpcPeeringConnectionId}); err != nil && !gone(err) {
		return p.classify(err, false)
	}
	return nil
}
