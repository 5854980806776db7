package aws

import (
	"context"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/acm"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/groundworkhq/groundwork/internal/job"
)

// TestVMPools walks a pool through what the vm_pool pipeline does, in both modes, with a load
// balancer: create twice (nothing new), attach, detach, attach, resize (ASG), then tear down in
// the reference's order and check nothing tagged with the job is left.
func TestVMPools(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{ModeFixed, ModeASG} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			p, _ := testProvider(t, "eu-west-2")
			ctx, tags := testCtx(t), testTags(t)
			net, err := p.EnsureNetwork(ctx, NetworkSpec{Tags: tags})
			if err != nil {
				t.Fatal(err)
			}
			role, err := p.EnsureRole(ctx, RolesFor(job.FamilyVMPool, tags)[0])
			if err != nil {
				t.Fatal(err)
			}
			spec := VMPoolSpec{Tags: tags, Name: "checkout-edge", InstanceType: "m5.large", Mode: mode, Min: 2, Max: 6, Desired: 2,
				VPCID: net.VPCID, VPCCIDR: net.CIDR, SubnetIDs: net.PrivateSubnetIDs, InstanceProfileARN: role.InstanceProfileARN}
			lbSpec := LBSpec{Tags: tags, VPCID: net.VPCID, PublicSubnetIDs: net.PublicSubnetIDs, ListenerPorts: []int32{80, 443}}

			var vms []VM
			var lb LoadBalancer
			for round := 0; round < 2; round++ {
				lbSG, err := p.EnsureLBSecurityGroup(ctx, tags, net.VPCID, lbSpec.ListenerPorts)
				if err != nil {
					t.Fatal(err)
				}
				sg, err := p.EnsureVMSecurityGroup(ctx, tags, net.VPCID, net.CIDR, lbSG)
				if err != nil {
					t.Fatal(err)
				}
				lt, err := p.EnsureLaunchTemplate(ctx, spec, sg)
				if err != nil {
					t.Fatal(err)
				}
				if lt.Version != 1 {
					t.Fatalf("round %d: launch template version %d, want 1 (unchanged spec)", round, lt.Version)
				}
				if vms, err = p.EnsureVMs(ctx, spec, lt); err != nil {
					t.Fatal(err)
				}
				if len(vms) != 2 {
					t.Fatalf("round %d: %d VMs, want 2", round, len(vms))
				}
				lbSpec.SecurityGroupID = lbSG
				if lb, err = p.EnsureLoadBalancer(ctx, lbSpec); err != nil {
					t.Fatal(err)
				}
				if lb.TargetGroupARN, err = p.EnsureTargetGroup(ctx, lbSpec); err != nil {
					t.Fatal(err)
				}
				if lb.CertificateARN, lb.SelfSigned, err = p.EnsureCertificate(ctx, tags, "", ""); err != nil || !lb.SelfSigned {
					t.Fatalf("certificate: %v self-signed=%v", err, lb.SelfSigned)
				}
				if lb.ListenerARNs, err = p.EnsureListeners(ctx, lbSpec, lb.ARN, lb.TargetGroupARN, lb.CertificateARN); err != nil || len(lb.ListenerARNs) != 2 {
					t.Fatalf("listeners = %v, %v", lb.ListenerARNs, err)
				}
			}
			certs, _ := p.acm.ListCertificates(ctx, &acm.ListCertificatesInput{})
			lbs, _ := p.elb.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{})
			if len(certs.CertificateSummaryList) != 1 || len(lbs.LoadBalancers) != 1 {
				t.Fatalf("after two rounds: %d certificates, %d LBs; want 1 each", len(certs.CertificateSummaryList), len(lbs.LoadBalancers))
			}
			tg, _ := p.elb.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{TargetGroupArns: []string{lb.TargetGroupARN}})
			if hc := tg.TargetGroups[0]; *hc.HealthCheckPath != "/healthz" || *hc.HealthCheckPort != "80" {
				t.Fatalf("health check %s:%s", *hc.HealthCheckPort, *hc.HealthCheckPath)
			}

			// attach_lb / detach_lb on the live pool.
			attached := func() bool {
				if mode == ModeASG {
					g, _, err := p.describeASG(ctx, ASGName(tags))
					if err != nil {
						t.Fatal(err)
					}
					return slices.Contains(g.TargetGroupARNs, lb.TargetGroupARN)
				}
				ids, err := p.TargetIDs(ctx, lb.TargetGroupARN)
				if err != nil {
					t.Fatal(err)
				}
				return len(ids) == len(vms)
			}
			for _, want := range []bool{true, false, true} {
				op := p.AttachLB
				if !want {
					op = p.DetachLB
				}
				for i := 0; i < 2; i++ { // each op twice: idempotent
					if err := op(ctx, tags, mode, lb.TargetGroupARN, vms); err != nil {
						t.Fatalf("attach=%v: %v", want, err)
					}
				}
				if attached() != want {
					t.Fatalf("attached = %v, want %v", !want, want)
				}
			}

			probe := FakeBootstrapProbe{Ready: map[string]bool{vms[0].ID: true}}
			checked, all, err := CheckBootstrap(ctx, probe, vms)
			if err != nil || all || checked[0].State != VMReady || checked[1].State != VMBootstrap {
				t.Fatalf("bootstrap check = %+v, all=%v, %v", checked, all, err)
			}

			if mode == ModeASG {
				if err := p.ResizeASG(ctx, tags, 1, 4, 3); err != nil {
					t.Fatal(err)
				}
				g, _ := p.asg.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{ASGName(tags)}})
				if got := g.AutoScalingGroups[0]; *got.MinSize != 1 || *got.MaxSize != 4 || *got.DesiredCapacity != 3 {
					t.Fatalf("resize not applied: %d/%d/%d", *got.MinSize, *got.MaxSize, *got.DesiredCapacity)
				}
				refresher := &FakeRefresher{}
				var r InstanceRefresher = refresher
				if _, err := r.StartInstanceRefresh(ctx, ASGName(tags)); err != nil || len(refresher.Started) != 1 {
					t.Fatalf("refresh: %v", err)
				}
			}

			// Teardown in the reference's order.
			if err := p.DetachLB(ctx, tags, mode, lb.TargetGroupARN, vms); err != nil {
				t.Fatal(err)
			}
			if err := p.DeleteLoadBalancer(ctx, tags); err != nil {
				t.Fatal(err)
			}
			deleteUntilDone(t, func() (bool, error) { return p.DeleteVMs(ctx, tags) })
			if err := p.DeleteLaunchTemplate(ctx, tags); err != nil {
				t.Fatal(err)
			}
			if err := p.DeleteSecurityGroups(ctx, tags, "vm-sg", "lb-sg"); err != nil {
				t.Fatal(err)
			}
			if err := p.DeleteRole(ctx, RolesFor(job.FamilyVMPool, tags)[0].Tags); err != nil {
				t.Fatal(err)
			}
			deleteUntilDone(t, func() (bool, error) { return p.DeleteNetwork(ctx, tags) })

			if n := countJobEC2(t, p, tags); n != 0 {
				t.Fatalf("%d tagged EC2 resources left", n)
			}
			assertNoLBLeft(ctx, t, p)
			roles, _ := p.iam.ListRoles(ctx, &iam.ListRolesInput{})
			if countRoles(t, p) != 0 {
				t.Fatalf("roles left: %d", len(roles.Roles))
			}
		})
	}
}

func assertNoLBLeft(ctx context.Context, t *testing.T, p *Provider) {
	t.Helper()
	lbs, _ := p.elb.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{})
	tgs, _ := p.elb.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{})
	certs, _ := p.acm.ListCertificates(ctx, &acm.ListCertificatesInput{})
	asgs, _ := p.asg.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{})
	if n := len(lbs.LoadBalancers) + len(tgs.TargetGroups) + len(certs.CertificateSummaryList) + len(asgs.AutoScalingGroups); n != 0 {
		t.Fatalf("left: %d LBs, %d target groups, %d certificates, %d ASGs", len(lbs.LoadBalancers), len(tgs.TargetGroups), len(certs.CertificateSummaryList), len(asgs.AutoScalingGroups))
	}
}
