package aws

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

func TestNetworkCreateTwiceThenDelete(t *testing.T) {
	t.Parallel()
	p, _ := testProvider(t, "eu-west-1")
	ctx, tags := testCtx(t), testTags(t)

	first, err := p.EnsureNetwork(ctx, NetworkSpec{Tags: tags})
	if err != nil {
		t.Fatalf("ensure network: %v", err)
	}
	if !first.Ready || len(first.PublicSubnetIDs) != 2 || len(first.PrivateSubnetIDs) != 2 || first.NATGatewayID == "" {
		t.Fatalf("network incomplete: %+v", first)
	}
	if first.AvailabilityZones[0] == first.AvailabilityZones[1] {
		t.Fatalf("subnets in one AZ: %v", first.AvailabilityZones)
	}
	before := countJobEC2(t, p, tags)
	second, err := p.EnsureNetwork(ctx, NetworkSpec{Tags: tags})
	if err != nil {
		t.Fatalf("ensure network again: %v", err)
	}
	if second.VPCID != first.VPCID || second.NATGatewayID != first.NATGatewayID || second.PrivateSubnetIDs[1] != first.PrivateSubnetIDs[1] {
		t.Fatalf("second run differs: %+v vs %+v", second, first)
	}
	if after := countJobEC2(t, p, tags); after != before {
		t.Fatalf("second run created resources: %d -> %d", before, after)
	}

	deleteUntilDone(t, func() (bool, error) { return p.DeleteNetwork(ctx, tags) })
	if n := countJobEC2(t, p, tags); n != 0 {
		t.Fatalf("%d tagged EC2 resources left after delete", n)
	}
}

func TestNetworkAdoptsExistingVPCAndNeverDeletesIt(t *testing.T) {
	t.Parallel()
	p, _ := testProvider(t, "us-east-2")
	ctx, tags := testCtx(t), testTags(t)
	vpc, err := p.ec2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: ptr("10.9.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	n, err := p.EnsureNetwork(ctx, NetworkSpec{Tags: tags, ExistingVPCID: *vpc.Vpc.VpcId})
	if err != nil {
		t.Fatalf("adopt: %v", err)
	}
	if !n.Existing || n.VPCID != *vpc.Vpc.VpcId {
		t.Fatalf("adopted = %+v", n)
	}
	deleteUntilDone(t, func() (bool, error) { return p.DeleteNetwork(ctx, tags) })
	if _, err := p.ec2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{VpcIds: []string{*vpc.Vpc.VpcId}}); err != nil {
		t.Fatalf("existing VPC gone after delete: %v", err)
	}
}

func TestNetworksInTwoAccountsAreApart(t *testing.T) {
	t.Parallel()
	a, _ := testProvider(t, "eu-central-1")
	b, _ := testProvider(t, "ap-southeast-2")
	ctx, tags := testCtx(t), testTags(t)
	if _, err := a.EnsureNetwork(ctx, NetworkSpec{Tags: tags, NoNAT: true}); err != nil {
		t.Fatal(err)
	}
	if n := countJobEC2(t, b, tags); n != 0 {
		t.Fatalf("account b sees %d of account a's resources", n)
	}
	nb, err := b.EnsureNetwork(ctx, NetworkSpec{Tags: tags, NoNAT: true})
	if err != nil {
		t.Fatal(err)
	}
	deleteUntilDone(t, func() (bool, error) { return a.DeleteNetwork(ctx, tags) })
	if _, err := b.ec2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{VpcIds: []string{nb.VPCID}}); err != nil {
		t.Fatalf("deleting in account a removed account b's VPC: %v", err)
	}
	deleteUntilDone(t, func() (bool, error) { return b.DeleteNetwork(ctx, tags) })
}

// countJobEC2 counts the job's tagged EC2 resources that still exist.
func countJobEC2(t *testing.T, p *Provider, tags Tags) int {
	t.Helper()
	ctx, f := testCtx(t), tags.ec2JobFilter()
	n := 0
	vpcs, err := p.ec2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	n += len(vpcs.Vpcs)
	subs, err := p.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	n += len(subs.Subnets)
	igws, err := p.ec2.DescribeInternetGateways(ctx, &ec2.DescribeInternetGatewaysInput{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	n += len(igws.InternetGateways)
	rts, err := p.ec2.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	n += len(rts.RouteTables)
	eips, err := p.ec2.DescribeAddresses(ctx, &ec2.DescribeAddressesInput{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	n += len(eips.Addresses)
	nats, err := p.ec2.DescribeNatGateways(ctx, &ec2.DescribeNatGatewaysInput{Filter: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range nats.NatGateways {
		if g.State != "deleted" {
			n++
		}
	}
	sgs, err := p.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	n += len(sgs.SecurityGroups)
	insts, err := p.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range insts.Reservations {
		for _, i := range r.Instances {
			if i.State == nil || i.State.Name != "terminated" {
				n++
			}
		}
	}
	lts, err := p.ec2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	n += len(lts.LaunchTemplates)
	return n
}

// deleteUntilDone polls a delete that reports done=false while the cloud works, with a deadline
// instead of a fixed sleep.
func deleteUntilDone(t *testing.T, del func() (bool, error)) {
	t.Helper()
	for i := 0; i < 100; i++ {
		done, err := del()
		if err != nil {
			t.Fatalf("delete: %v", err)
		}
		if done {
			return
		}
	}
	t.Fatal("delete not done after 100 rounds")
}
