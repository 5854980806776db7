package aws

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/testenv/faultproxy"
)

// faultProvider opens a provider for a fresh moto account whose calls go through a fault
// proxy; direct is a provider on the same account that talks to moto without faults.
func faultProvider(t *testing.T, cfg faultproxy.Config) (faulty, direct *Provider, px *faultproxy.Proxy) {
	t.Helper()
	direct, acct := testProvider(t, "eu-west-1")
	cfg.Logf = t.Logf
	px, err := faultproxy.Start(motoEnv.Endpoint(t), faultproxy.AWS, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Close)
	faulty, err = Open(testCtx(t), Account{AuthMethod: AuthAssumeRole, Region: "eu-west-1", Endpoint: px.URL,
		AccessKeyID: "testing", SecretAccessKey: "testing", RoleARN: "arn:aws:iam::" + acct + ":role/groundwork"})
	if err != nil {
		t.Fatal(err)
	}
	return faulty, direct, px
}

// ec2Counts counts the job's network resources by kind, read without faults.
func ec2Counts(t *testing.T, p *Provider, tags Tags) map[string]int {
	t.Helper()
	got, err := p.Leftovers(testCtx(t), tags)
	if err != nil {
		t.Fatal(err)
	}
	delete(got, "iam-role") // the account's, not the job's, in this package's tests
	return got
}

// TestNetworkSurvivesLostAnswers: the first call of every kind of mutation, and a share of the
// later ones, lose their answer after moto acted on them; EnsureNetwork still completes with
// one of everything, a second run (the engine's re-run) changes nothing, and DeleteNetwork,
// whose deletes lose answers too, leaves nothing. Several seeds (GROUNDWORK_FAULT_SEEDS=N for
// more, GROUNDWORK_FAULT_SEED=S to replay one).
func TestNetworkSurvivesLostAnswers(t *testing.T) {
	t.Parallel()
	want := map[string]int{"vpc": 1, "subnet": 4, "internet-gateway": 1, "route-table": 2, "elastic-ip": 1, "nat-gateway": 1}
	for _, seed := range faultproxy.Seeds(os.Getenv, 1, 2, 3) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			p, direct, px := faultProvider(t, faultproxy.Config{Seed: seed, DropFirst: true, DropAnswer: 0.3, Throttle: 0.1, Reset: 0.05})
			defer func() { t.Log(px.Summary()) }()
			ctx, tags := testCtx(t), testTags(t)
			first, err := p.EnsureNetwork(ctx, NetworkSpec{Tags: tags, CIDR: "10.62.0.0/16"})
			if err != nil {
				t.Fatalf("ensure network: %v (class %s)", err, fault.ClassOf(err))
			}
			if got := ec2Counts(t, direct, tags); !maps.Equal(got, want) {
				t.Fatalf("after create: %v, want exactly %v", got, want)
			}
			second, err := p.EnsureNetwork(ctx, NetworkSpec{Tags: tags, CIDR: "10.62.0.0/16"})
			if err != nil || second.VPCID != first.VPCID || second.NATGatewayID != first.NATGatewayID || second.EIPAllocationID != first.EIPAllocationID {
				t.Fatalf("re-run: %+v (%v), want the first run's %+v", second, err, first)
			}
			if got := ec2Counts(t, direct, tags); !maps.Equal(got, want) {
				t.Fatalf("after re-run: %v, want exactly %v", got, want)
			}
			sn, err := direct.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: first.PublicSubnetIDs})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range sn.Subnets {
				if !deref(s.MapPublicIpOnLaunch) {
					t.Fatalf("public subnet %s does not map public IPs", deref(s.SubnetId))
				}
			}
			if px.Count(faultproxy.DropAnswer) == 0 {
				t.Fatal("no answer was dropped: the test proved nothing")
			}
			deleteUntilDone(t, func() (bool, error) { return p.DeleteNetwork(ctx, tags) })
			if got := ec2Counts(t, direct, tags); len(got) > 0 {
				t.Fatalf("after delete: %v", got)
			}
		})
	}
}

// TestStrangersSubnetIsNamed: a CIDR taken in the job's VPC by a subnet without the job's tags
// is a user_action naming that subnet, not a system error and not an adoption.
func TestStrangersSubnetIsNamed(t *testing.T) {
	t.Parallel()
	p, _ := testProvider(t, "eu-west-1")
	ctx, tags := testCtx(t), testTags(t)
	vpcID, err := p.ensureVPC(ctx, tags.WithRole("vpc"), "10.63.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	zones, err := p.zones(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := p.ec2.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: &vpcID, CidrBlock: ptr("10.63.0.0/20"), AvailabilityZone: &zones[0],
		TagSpecifications: Tags{OrgID: "org_other", JobID: "job_other", Role: "subnet-public-0"}.ec2Spec(ec2types.ResourceTypeSubnet)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.ensureSubnet(ctx, tags.WithRole("subnet-public-0"), vpcID, "10.63.0.0/20", zones[0], true)
	var fe *fault.Error
	if !errors.As(err, &fe) || fe.Class != job.ClassUserAction || fe.Code != "AlreadyExists" || !strings.Contains(fe.Error(), deref(theirs.Subnet.SubnetId)) {
		t.Fatalf("ensureSubnet over a stranger's subnet: %v (%+v); want user_action naming %s", err, fe, deref(theirs.Subnet.SubnetId))
	}
	_, _ = p.ec2.DeleteSubnet(context.WithoutCancel(ctx), &ec2.DeleteSubnetInput{SubnetId: theirs.Subnet.SubnetId})
	_, _ = p.ec2.DeleteVpc(context.WithoutCancel(ctx), &ec2.DeleteVpcInput{VpcId: &vpcID})
}

func TestClientTokenIsDeterministicAndFits(t *testing.T) {
	t.Parallel()
	a := Tags{OrgID: "org_1", JobID: "job_01JABCDEFGHJKMNPQRSTVWXYZ0123456789", Role: "nat"}
	cases := map[string]struct {
		step string
		t    Tags
		same bool
	}{
		"same job, step and resource": {stepNetwork, a, true},
		"another resource":            {stepNetwork, a.WithRole("rt-public"), false},
		"another step":                {stepVMs, a, false},
		"another job":                 {stepNetwork, Tags{OrgID: "org_1", JobID: "job_2", Role: "nat"}, false},
	}
	base := clientToken(stepNetwork, a)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := clientToken(tc.step, tc.t)
			if (got == base) != tc.same {
				t.Fatalf("token %s vs %s: same=%v, want %v", got, base, got == base, tc.same)
			}
			if len(got) < 32 || len(got) > 64 {
				t.Fatalf("token %q is %d characters; AWS wants 32-64", got, len(got))
			}
		})
	}
}
