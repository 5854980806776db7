package aws

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
)

// Leftovers counts, by kind, the resources of the job that still exist (describe calls per
// service). After a teardown every count is zero; an operator uses it to audit a failed one.
func (p *Provider) Leftovers(ctx context.Context, t Tags) (map[string]int, error) {
	out := map[string]int{}
	f := t.ec2JobFilter()
	count := func(kind string, n int, err error) error {
		if err != nil {
			return p.classify(err, false)
		}
		if n > 0 {
			out[kind] += n
		}
		return nil
	}
	vpcs, err := p.ec2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{Filters: f})
	if err := count("vpc", len(vpcs.Vpcs), err); err != nil {
		return nil, err
	}
	subs, err := p.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: f})
	if err := count("subnet", len(subs.Subnets), err); err != nil {
		return nil, err
	}
	igws, err := p.ec2.DescribeInternetGateways(ctx, &ec2.DescribeInternetGatewaysInput{Filters: f})
	if err := count("internet-gateway", len(igws.InternetGateways), err); err != nil {
		return nil, err
	}
	rts, err := p.ec2.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{Filters: f})
	if err := count("route-table", len(rts.RouteTables), err); err != nil {
		return nil, err
	}
	eips, err := p.ec2.DescribeAddresses(ctx, &ec2.DescribeAddressesInput{Filters: f})
	if err := count("elastic-ip", len(eips.Addresses), err); err != nil {
		return nil, err
	}
	nats, err := p.ec2.DescribeNatGateways(ctx, &ec2.DescribeNatGatewaysInput{Filter: append(f, ec2typesFilter("state", "pending", "available", "deleting"))})
	if err := count("nat-gateway", len(nats.NatGateways), err); err != nil {
		return nil, err
	}
	sgs, err := p.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: f})
	if err := count("security-group", len(sgs.SecurityGroups), err); err != nil {
		return nil, err
	}
	insts, err := p.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: append(f, ec2typesFilter("instance-state-name", "pending", "running", "stopping", "stopped"))})
	n := 0
	if err == nil {
		for _, r := range insts.Reservations {
			n += len(r.Instances)
		}
	}
	if err := count("instance", n, err); err != nil {
		return nil, err
	}
	lts, err := p.ec2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{Filters: f})
	if err := count("launch-template", len(lts.LaunchTemplates), err); err != nil {
		return nil, err
	}
	pcs, err := p.ec2.DescribeVpcPeeringConnections(ctx, &ec2.DescribeVpcPeeringConnectionsInput{Filters: append(f, ec2typesFilter("status-code", "pending-acceptance", "active", "provisioning"))})
	if err := count("vpc-peering", len(pcs.VpcPeeringConnections), err); err != nil {
		return nil, err
	}
	if lb, err := p.jobLB(ctx, t); err != nil {
		return nil, err
	} else if lb != nil {
		out["load-balancer"]++
	}
	if tgs, err := p.elb.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{Names: []string{lbName(t, "gt-")}}); err == nil {
		out["target-group"] += len(tgs.TargetGroups)
	} else if !isCode(err, "TargetGroupNotFound") {
		return nil, p.classify(err, false)
	}
	if _, found, err := p.findSelfSigned(ctx, t); err != nil {
		return nil, err
	} else if found {
		out["certificate"]++
	}
	g, found, err := p.describeASG(ctx, poolName(t))
	if err != nil {
		return nil, err
	}
	if found && g.Status == nil {
		out["auto-scaling-group"]++
	}
	// The group's scaling policy, which the teardown deletes before the group.
	pols, err := p.asg.DescribePolicies(ctx, &autoscaling.DescribePoliciesInput{AutoScalingGroupName: ptr(poolName(t)), PolicyNames: []string{scalingPolicyName(t)}})
	if err != nil && !isCode(err, "ValidationError") {
		return nil, p.classify(err, false)
	}
	if err == nil && len(pols.ScalingPolicies) > 0 {
		out["scaling-policy"] += len(pols.ScalingPolicies)
	}
	roles, err := p.iam.ListRoles(ctx, &iam.ListRolesInput{})
	if err != nil {
		return nil, p.classify(err, false)
	}
	prefix := "gw-" + t.JobID + "-"
	for _, r := range roles.Roles {
		if name := deref(r.RoleName); len(name) >= len(prefix) && name[:len(prefix)] == prefix {
			out["iam-role"]++
		}
	}
	return out, nil
}

func ec2typesFilter(name string, values ...string) ec2types.Filter {
	return ec2types.Filter{Name: &name, Values: values}
}
