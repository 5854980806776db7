package aws

import (
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func TestRulesOfSplitsPerSourceAndIgnoresDescriptions(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		perms []ec2types.IpPermission
		want  []string
	}{
		"nothing": {nil, []string{}},
		"all traffic from a CIDR and a group": {
			[]ec2types.IpPermission{{IpProtocol: ptr("-1"), IpRanges: []ec2types.IpRange{{CidrIp: ptr("10.0.0.0/16"), Description: ptr("VPC")}},
				UserIdGroupPairs: []ec2types.UserIdGroupPair{{GroupId: ptr("sg-lb")}}}},
			[]string{"all from 10.0.0.0/16", "all from sg-lb"},
		},
		"ports, a range, IPv6 and a prefix list, sorted and without repeats": {
			[]ec2types.IpPermission{
				{IpProtocol: ptr("tcp"), FromPort: ptr(int32(443)), ToPort: ptr(int32(443)), IpRanges: []ec2types.IpRange{{CidrIp: ptr("0.0.0.0/0")}}},
				{IpProtocol: ptr("TCP"), FromPort: ptr(int32(80)), ToPort: ptr(int32(80)), IpRanges: []ec2types.IpRange{{CidrIp: ptr("0.0.0.0/0"), Description: ptr("again")}}},
				{IpProtocol: ptr("tcp"), FromPort: ptr(int32(80)), ToPort: ptr(int32(80)), IpRanges: []ec2types.IpRange{{CidrIp: ptr("0.0.0.0/0")}}},
				{IpProtocol: ptr("udp"), FromPort: ptr(int32(1000)), ToPort: ptr(int32(2000)), Ipv6Ranges: []ec2types.Ipv6Range{{CidrIpv6: ptr("::/0")}}},
				{IpProtocol: ptr("tcp"), FromPort: ptr(int32(22)), ToPort: ptr(int32(22)), PrefixListIds: []ec2types.PrefixListId{{PrefixListId: ptr("pl-1")}}},
			},
			[]string{"tcp 22 from pl-1", "tcp 443 from 0.0.0.0/0", "tcp 80 from 0.0.0.0/0", "udp 1000-2000 from ::/0"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := ruleStrings(rulesOf(tc.perms)); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("rules = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestIngressDrift(t *testing.T) {
	t.Parallel()
	applied := vmGroupPerms("10.0.0.0/16", "sg-lb")
	ssh := ec2types.IpPermission{IpProtocol: ptr("tcp"), FromPort: ptr(int32(22)), ToPort: ptr(int32(22)), IpRanges: []ec2types.IpRange{{CidrIp: ptr("0.0.0.0/0")}}}
	// What AWS answers for the applied rules: one permission per protocol, without descriptions.
	asRead := []ec2types.IpPermission{{IpProtocol: ptr("-1"), IpRanges: []ec2types.IpRange{{CidrIp: ptr("10.0.0.0/16")}},
		UserIdGroupPairs: []ec2types.UserIdGroupPair{{GroupId: ptr("sg-lb"), UserId: ptr("123456789012")}}}}
	tests := map[string]struct {
		actual                  []ec2types.IpPermission
		wantDrift               bool
		wantApplied, wantActual []string
	}{
		"same rules, read back in AWS's shape": {actual: asRead},
		"a rule added": {actual: append(asRead, ssh), wantDrift: true,
			wantApplied: []string{"all from 10.0.0.0/16", "all from sg-lb"},
			wantActual:  []string{"all from 10.0.0.0/16", "all from sg-lb", "tcp 22 from 0.0.0.0/0"}},
		"a rule removed": {actual: vmGroupPerms("10.0.0.0/16", ""), wantDrift: true,
			wantApplied: []string{"all from 10.0.0.0/16", "all from sg-lb"}, wantActual: []string{"all from 10.0.0.0/16"}},
		"every rule removed": {actual: nil, wantDrift: true,
			wantApplied: []string{"all from 10.0.0.0/16", "all from sg-lb"}, wantActual: []string{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := ingressDrift("sg-vm", applied, tc.actual, "create_launch_template")
			if (d != nil) != tc.wantDrift {
				t.Fatalf("drift = %+v, want drift %v", d, tc.wantDrift)
			}
			if d == nil {
				return
			}
			if d.Resource.Type != "security-group" || d.Resource.ID != "sg-vm" || d.Field != "ingress" || d.Step != "create_launch_template" {
				t.Fatalf("drift names %+v", d)
			}
			if !reflect.DeepEqual(d.Applied, tc.wantApplied) || !reflect.DeepEqual(d.Actual, tc.wantActual) {
				t.Fatalf("applied %q actual %q, want %q and %q", d.Applied, d.Actual, tc.wantApplied, tc.wantActual)
			}
		})
	}
}

func TestRulePermissionRoundTrips(t *testing.T) {
	t.Parallel()
	for _, r := range []sgRule{
		{Proto: "-1", CIDR: "10.0.0.0/16"},
		{Proto: "tcp", From: 22, To: 22, CIDR: "0.0.0.0/0"},
		{Proto: "udp", From: 1, To: 9, CIDR6: "::/0"},
		{Proto: "-1", Group: "sg-1"},
		{Proto: "tcp", From: 5432, To: 5432, PrefixList: "pl-1"},
	} {
		if got := rulesOf([]ec2types.IpPermission{r.permission()}); len(got) != 1 || got[0] != r {
			t.Errorf("%v: round trip gives %v", r, got)
		}
	}
}

// TestSecurityGroupConvergesOnMoto adds a rule to a pool's group behind Groundwork's back:
// the pool's driver reports it as drift, and ensuring the group again revokes it.
func TestSecurityGroupConvergesOnMoto(t *testing.T) {
	t.Parallel()
	p, _ := testProvider(t, "eu-west-1")
	ctx, tags := testCtx(t), testTags(t)
	net, err := p.EnsureNetwork(ctx, NetworkSpec{Tags: tags, NoNAT: true})
	if err != nil {
		t.Fatal(err)
	}
	lb, err := p.EnsureLBSecurityGroup(ctx, tags, net.VPCID, []int32{80})
	if err != nil {
		t.Fatal(err)
	}
	sg, err := p.EnsureVMSecurityGroup(ctx, tags, net.VPCID, net.CIDR, lb)
	if err != nil {
		t.Fatal(err)
	}
	read := func() []ec2types.IpPermission {
		out, err := p.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{sg}})
		if err != nil {
			t.Fatal(err)
		}
		return out.SecurityGroups[0].IpPermissions
	}
	if d := ingressDrift(sg, vmGroupPerms(net.CIDR, lb), read(), "s"); d != nil {
		t.Fatalf("drift right after create: %+v", d)
	}
	ssh := ec2types.IpPermission{IpProtocol: ptr("tcp"), FromPort: ptr(int32(22)), ToPort: ptr(int32(22)), IpRanges: []ec2types.IpRange{{CidrIp: ptr("0.0.0.0/0")}}}
	if _, err := p.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: &sg, IpPermissions: []ec2types.IpPermission{ssh}}); err != nil {
		t.Fatal(err)
	}
	d := ingressDrift(sg, vmGroupPerms(net.CIDR, lb), read(), "s")
	if d == nil || !reflect.DeepEqual(d.Actual, []string{"all from " + net.CIDR, "all from " + lb, "tcp 22 from 0.0.0.0/0"}) {
		t.Fatalf("drift after an added rule: %+v", d)
	}
	if again, err := p.EnsureVMSecurityGroup(ctx, tags, net.VPCID, net.CIDR, lb); err != nil || again != sg {
		t.Fatalf("ensure again: %s %v", again, err)
	}
	if d := ingressDrift(sg, vmGroupPerms(net.CIDR, lb), read(), "s"); d != nil {
		t.Fatalf("drift after converging: %+v", d)
	}
}
