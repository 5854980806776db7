package aws

import (
	"testing"

	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
)

// TestTargetGroupHealthCheckUpdate: a pool's health check path and port changed by a config
// update reach its target group in place through the vm_pool driver's SetHealthCheck (the
// same group, now checking the new path and port); create_target_group run again keeps it.
func TestTargetGroupHealthCheckUpdate(t *testing.T) {
	t.Parallel()
	p, _ := testProvider(t, "eu-west-3")
	ctx, tags := testCtx(t), testTags(t)
	net, err := p.EnsureNetwork(ctx, NetworkSpec{Tags: tags})
	if err != nil {
		t.Fatal(err)
	}
	d := VMPoolDriver{P: p}
	j := &job.Job{ID: tags.JobID, OrgID: tags.OrgID, Family: job.FamilyVMPool}
	n := vmpool.Network{VPCID: net.VPCID, PublicSubnetIDs: net.PublicSubnetIDs}
	c := vmpool.Config{Name: "web", InstanceType: "t3.micro", CreateLoadBalancer: true}
	check := func(arn, path, port string) {
		t.Helper()
		out, err := p.elb.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{TargetGroupArns: []string{arn}})
		if err != nil || len(out.TargetGroups) != 1 {
			t.Fatalf("describe the target group: %v", err)
		}
		tg := out.TargetGroups[0]
		if deref(tg.HealthCheckPath) != path || deref(tg.HealthCheckPort) != port {
			t.Fatalf("the target group checks %s on port %s, want %s on %s", deref(tg.HealthCheckPath), deref(tg.HealthCheckPort), path, port)
		}
	}
	first, err := d.EnsureTargetGroup(ctx, j, c, n)
	if err != nil {
		t.Fatal(err)
	}
	check(first, "/healthz", "80")

	c.HealthCheckPath, c.HealthCheckPort = "/up", 8080
	// A config update's finalize sets it (twice: a crash lost the first call's checkpoint).
	for range 2 {
		if err := d.SetHealthCheck(ctx, j, c); err != nil {
			t.Fatal(err)
		}
		check(first, "/up", "8080")
	}
	for range 2 {
		arn, err := d.EnsureTargetGroup(ctx, j, c, n)
		if err != nil {
			t.Fatal(err)
		}
		if arn != first {
			t.Fatalf("the update made target group %s; want %s changed in place", arn, first)
		}
		check(arn, "/up", "8080")
	}
}
