package aws

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
)

// The drivers that read back what they made, for drift inspection (jobs.Inspector).
var (
	_ interface {
		Inspect(context.Context, *job.Job) ([]job.Drift, error)
	} = VMPoolDriver{}
	_ interface {
		Inspect(context.Context, *job.Job) ([]job.Drift, error)
	} = NetworkDriver{}
)

// sgRule is one ingress rule of a security group with one source: the unit AWS authorizes
// and revokes, and the unit drift is compared in. Descriptions are not part of it: they
// change nothing about what the rule lets in.
type sgRule struct {
	Proto      string // "-1" is every protocol
	From, To   int32
	CIDR       string
	CIDR6      string
	Group      string
	PrefixList string
}

// String renders the rule for people: "tcp 80 from 0.0.0.0/0", "all from sg-0abc".
func (r sgRule) String() string {
	proto := r.Proto
	if proto == "-1" {
		proto = "all"
	}
	ports := ""
	if r.Proto != "-1" && (r.From != 0 || r.To != 0) {
		ports = " " + strconv.Itoa(int(r.From))
		if r.To != r.From {
			ports += "-" + strconv.Itoa(int(r.To))
		}
	}
	src := r.CIDR + r.CIDR6 + r.Group + r.PrefixList
	return proto + ports + " from " + src
}

// permission is r as the one-source IpPermission that revokes (or authorizes) exactly it.
func (r sgRule) permission() ec2types.IpPermission {
	p := ec2types.IpPermission{IpProtocol: ptr(r.Proto)}
	if r.Proto != "-1" {
		p.FromPort, p.ToPort = ptr(r.From), ptr(r.To)
	}
	switch {
	case r.CIDR != "":
		p.IpRanges = []ec2types.IpRange{{CidrIp: ptr(r.CIDR)}}
	case r.CIDR6 != "":
		p.Ipv6Ranges = []ec2types.Ipv6Range{{CidrIpv6: ptr(r.CIDR6)}}
	case r.Group != "":
		p.UserIdGroupPairs = []ec2types.UserIdGroupPair{{GroupId: ptr(r.Group)}}
	case r.PrefixList != "":
		p.PrefixListIds = []ec2types.PrefixListId{{PrefixListId: ptr(r.PrefixList)}}
	}
	return p
}

// rulesOf splits permissions into one rule per source, sorted and without repeats.
func rulesOf(perms []ec2types.IpPermission) []sgRule {
	var out []sgRule
	for _, p := range perms {
		base := sgRule{Proto: strings.ToLower(deref(p.IpProtocol))}
		if base.Proto == "all" {
			base.Proto = "-1"
		}
		if base.Proto != "-1" {
			base.From, base.To = deref(p.FromPort), deref(p.ToPort)
		}
		for _, r := range p.IpRanges {
			x := base
			x.CIDR = deref(r.CidrIp)
			out = append(out, x)
		}
		for _, r := range p.Ipv6Ranges {
			x := base
			x.CIDR6 = deref(r.CidrIpv6)
			out = append(out, x)
		}
		for _, g := range p.UserIdGroupPairs {
			x := base
			x.Group = deref(g.GroupId)
			out = append(out, x)
		}
		for _, l := range p.PrefixListIds {
			x := base
			x.PrefixList = deref(l.PrefixListId)
			out = append(out, x)
		}
	}
	slices.SortFunc(out, func(a, b sgRule) int { return strings.Compare(a.String(), b.String()) })
	return slices.Compact(out)
}

// diffRules compares what is applied with what the group holds: extra rules were added
// behind Groundwork's back, missing ones were removed.
func diffRules(applied, actual []sgRule) (extra, missing []sgRule) {
	for _, r := range actual {
		if !slices.Contains(applied, r) {
			extra = append(extra, r)
		}
	}
	for _, r := range applied {
		if !slices.Contains(actual, r) {
			missing = append(missing, r)
		}
	}
	return extra, missing
}

// ruleStrings renders rules for a drift record (never nil, so that an empty side reads []).
func ruleStrings(rules []sgRule) []string {
	out := make([]string, 0, len(rules))
	for _, r := range rules {
		out = append(out, r.String())
	}
	return out
}

// ingressDrift is the drift of one group's ingress, or nil when it holds exactly perms.
func ingressDrift(groupID string, perms, actual []ec2types.IpPermission, step string) *job.Drift {
	want, have := rulesOf(perms), rulesOf(actual)
	extra, missing := diffRules(want, have)
	if len(extra) == 0 && len(missing) == 0 {
		return nil
	}
	return &job.Drift{Resource: job.ResourceRef{Type: "security-group", ID: groupID}, Field: "ingress",
		Applied: ruleStrings(want), Actual: ruleStrings(have), Step: step}
}

// convergeIngress makes the group's ingress exactly perms: what is missing is authorized,
// what was added behind Groundwork's back is revoked. A re-run after a lost answer meets
// InvalidPermission.Duplicate (authorize) or InvalidPermission.NotFound (revoke): done.
func (p *Provider) convergeIngress(ctx context.Context, groupID string, perms []ec2types.IpPermission) error {
	out, err := p.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{groupID}})
	if err != nil {
		return p.classify(err, false)
	}
	var have []sgRule
	if len(out.SecurityGroups) > 0 {
		have = rulesOf(out.SecurityGroups[0].IpPermissions)
	}
	extra, _ := diffRules(rulesOf(perms), have)
	for _, r := range extra {
		_, err := p.ec2.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: &groupID,
			IpPermissions: []ec2types.IpPermission{r.permission()}})
		if err != nil && !isCode(err, "InvalidPermission.NotFound") {
			return p.classify(err, true)
		}
	}
	return p.authorize(ctx, groupID, perms)
}

// vmGroupPerms is the VMs' group's ingress: everything from the VPC, and from the load
// balancer's group when the pool has one.
func vmGroupPerms(vpcCIDR, lbGroupID string) []ec2types.IpPermission {
	perms := []ec2types.IpPermission{{IpProtocol: ptr("-1"), IpRanges: []ec2types.IpRange{{CidrIp: &vpcCIDR, Description: ptr("VPC")}}}}
	if lbGroupID != "" {
		perms = append(perms, ec2types.IpPermission{IpProtocol: ptr("-1"), UserIdGroupPairs: []ec2types.UserIdGroupPair{{GroupId: &lbGroupID, Description: ptr("load balancer")}}})
	}
	return perms
}

// lbGroupPerms is the load balancer's group's ingress: the listener ports from anywhere.
func lbGroupPerms(ports []int32) []ec2types.IpPermission {
	var perms []ec2types.IpPermission
	for _, port := range ports {
		perms = append(perms, ec2types.IpPermission{IpProtocol: ptr("tcp"), FromPort: ptr(port), ToPort: ptr(port),
			IpRanges: []ec2types.IpRange{{CidrIp: ptr("0.0.0.0/0")}}})
	}
	return perms
}

// findGroup returns the job's security group of a role, or nil when there is none.
func (p *Provider) findGroup(ctx context.Context, t Tags) (*ec2types.SecurityGroup, error) {
	out, err := p.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: t.ec2Filters()})
	if err != nil {
		return nil, p.classify(err, false)
	}
	if len(out.SecurityGroups) == 0 {
		return nil, nil
	}
	return &out.SecurityGroups[0], nil
}

// Inspect reads the pool's security groups back and reports ingress that differs from what
// the launch template step applied (that step owns both groups and converges them).
func (d VMPoolDriver) Inspect(ctx context.Context, j *job.Job) ([]job.Drift, error) {
	c, err := vmpool.DecodeConfig(j.Config)
	if err != nil {
		return nil, err
	}
	n, err := pipeline.InfraOf[vmpool.Network](&pipeline.Run{Job: j}, vmpool.InfraNetwork)
	if err != nil {
		return nil, err
	}
	var out []job.Drift
	lbGroupID := ""
	if c.CreateLoadBalancer {
		g, err := d.P.findGroup(ctx, JobTags(j).WithRole("lb-sg"))
		if err != nil {
			return nil, err
		}
		if g == nil {
			out = append(out, missingGroup("lb-sg"))
		} else {
			lbGroupID = deref(g.GroupId)
			if dr := ingressDrift(lbGroupID, lbGroupPerms(c.ListenerPorts), g.IpPermissions, vmpool.StepLaunchTemplate); dr != nil {
				out = append(out, *dr)
			}
		}
	}
	g, err := d.P.findGroup(ctx, JobTags(j).WithRole("vm-sg"))
	if err != nil {
		return nil, err
	}
	if g == nil {
		return append(out, missingGroup("vm-sg")), nil
	}
	if dr := ingressDrift(deref(g.GroupId), vmGroupPerms(n.CIDR, lbGroupID), g.IpPermissions, vmpool.StepLaunchTemplate); dr != nil {
		out = append(out, *dr)
	}
	return out, nil
}

// missingGroup is the drift of a security group that is gone: the launch template step
// creates it again.
func missingGroup(role string) job.Drift {
	return job.Drift{Resource: job.ResourceRef{Type: "security-group", ID: role}, Field: "exists",
		Applied: true, Actual: false, Step: vmpool.StepLaunchTemplate}
}

// Inspect reads the network back: the VPC's DNS attributes (RDS and EKS private endpoints
// need both) and the public subnets' public addresses on launch, which the network step
// sets on every run. An adopted VPC is the customer's and is not inspected.
func (d NetworkDriver) Inspect(ctx context.Context, j *job.Job) ([]job.Drift, error) {
	var n Network
	if ok, err := (&pipeline.Run{Job: j}).Infra(network.InfraNetwork, &n); err != nil || !ok {
		if err == nil {
			err = fmt.Errorf("job %s has no network on record", j.ID)
		}
		return nil, err
	}
	if n.Existing {
		return nil, nil
	}
	var out []job.Drift
	for _, attr := range []ec2types.VpcAttributeName{ec2types.VpcAttributeNameEnableDnsSupport, ec2types.VpcAttributeNameEnableDnsHostnames} {
		a, err := d.P.ec2.DescribeVpcAttribute(ctx, &ec2.DescribeVpcAttributeInput{VpcId: &n.VPCID, Attribute: attr})
		if err != nil {
			return nil, d.P.classify(err, false)
		}
		v := a.EnableDnsSupport
		if attr == ec2types.VpcAttributeNameEnableDnsHostnames {
			v = a.EnableDnsHostnames
		}
		if v == nil || !deref(v.Value) {
			out = append(out, job.Drift{Resource: job.ResourceRef{Type: "vpc", ID: n.VPCID}, Field: string(attr),
				Applied: true, Actual: false, Step: network.StepNetwork})
		}
	}
	if len(n.PublicSubnetIDs) > 0 {
		subs, err := d.P.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: n.PublicSubnetIDs})
		if err != nil {
			return nil, d.P.classify(err, false)
		}
		for _, sn := range subs.Subnets {
			if !deref(sn.MapPublicIpOnLaunch) {
				out = append(out, job.Drift{Resource: job.ResourceRef{Type: "subnet", ID: deref(sn.SubnetId)}, Field: "mapPublicIpOnLaunch",
					Applied: true, Actual: false, Step: network.StepNetwork})
			}
		}
	}
	return out, nil
}
