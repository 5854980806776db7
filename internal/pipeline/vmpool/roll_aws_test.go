package vmpool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
	"github.com/groundworkhq/groundwork/internal/provider/aws"
)

// TestRollOnAWS creates a pool behind a load balancer (and one without), plans a roll onto a
// new instance type and runs it with the result of every other call lost, as when the process
// dies between the cloud call and the checkpoint. At every call at least the pool's size is
// healthy in the target group; at the end every instance is new and of the new type, there are
// as many as before, and the template has exactly 2 versions.
//
// The fixed pools plan it with PlanRoll and a new config (the launch template step adds the
// version, then the roll). The ASG pool gets its version from the test without user data and
// rolls by vmOp roll: moto stores the user data of CreateLaunchTemplateVersion unparsed, and its
// Auto Scaling group then fails every launch from that version.
func TestRollOnAWS(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		cfg        string
		newVersion func(context.Context, *testing.T, *aws.Provider, *job.Job)
	}{
		"fixed": {cfg: `{"name":"web","instanceType":"t3.micro","min":3,"max":3,"createLoadBalancer":true,"listenerPorts":[80]}`},
		"asg": {cfg: `{"name":"web","instanceType":"t3.micro","mode":"asg","min":3,"max":3,"createLoadBalancer":true,"listenerPorts":[80],"scalingPolicy":{"targetCPU":50}}`,
			newVersion: versionWithoutUserData},
		"no LB": {cfg: `{"name":"web","instanceType":"t3.micro","min":2,"max":2}`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, d := newDriver(t, "eu-west-3")
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
			defer cancel()
			j := &job.Job{ID: "job_" + fmt.Sprint(seq.Add(1)), OrgID: "org_1", Family: job.FamilyVMPool, Provider: "aws", Mode: job.ModeCreate, Config: json.RawMessage(tc.cfg)}
			pl := vmpool.New(func(context.Context, *job.Job) (vmpool.Driver, error) { return d, nil }, time.Millisecond)
			if err := pl.Validate(ctx, j); err != nil {
				t.Fatal(err)
			}
			j.Steps = pipeline.NewStepRecords(pl.Steps(j))
			runSteps(ctx, t, j, pl.Steps(j), false)
			for i := range j.Steps {
				j.Steps[i].Status = job.StepDone
			}
			c, _ := vmpool.DecodeConfig(j.Config)
			before := liveInstances(ctx, t, p, j)
			if len(before) != int(c.Desired) {
				t.Fatalf("%d instances after create, want %d", len(before), c.Desired)
			}
			var lb vmpool.LoadBalancer
			hasLB, _ := (&pipeline.Run{Job: j}).Infra(vmpool.InfraLoadBalancer, &lb)

			var next json.RawMessage
			want := []string{vmpool.StepLaunchTemplate, vmpool.StepFinalize}
			if tc.newVersion != nil {
				tc.newVersion(ctx, t, p, j)
				want = want[1:]
			} else {
				// The config update: a new instance type.
				var m map[string]any
				_ = json.Unmarshal(j.Config, &m)
				m["instanceType"] = "t3.small"
				next, _ = json.Marshal(m)
			}
			newCfg, steps, err := pl.PlanRoll(j, next)
			if err != nil {
				t.Fatal(err)
			}
			j.Config, j.Steps = newCfg, steps
			var pending []pipeline.Step
			var names []string
			for _, s := range pl.Steps(j) {
				if j.Steps[j.StepIndex(s.Name)].Status == job.StepPending {
					pending = append(pending, s)
					names = append(names, s.Name)
				}
			}
			if fmt.Sprint(names) != fmt.Sprint(want) {
				t.Fatalf("planned steps %v, want %v", names, want)
			}
			runCrashing(ctx, t, j, pending[:len(pending)-1], false, true)
			if c.Mode == "asg" {
				// An operator's own suspension, which the roll must leave as it found it.
				if _, err := autoscaling.NewFromConfig(p.Config()).SuspendProcesses(ctx, &autoscaling.SuspendProcessesInput{
					AutoScalingGroupName: groupName(ctx, t, p), ScalingProcesses: []string{"AZRebalance"}}); err != nil {
					t.Fatal(err)
				}
			}

			roll := pending[len(pending)-1]
			var last pipeline.Result
			for call := 1; ; call++ {
				if call > 100 {
					t.Fatalf("roll not done after 100 calls: %s", last.Message)
				}
				res, err := roll.Do(ctx, &pipeline.Run{Job: j, Step: roll.Name, Attempt: call})
				if err != nil {
					t.Fatalf("roll call %d: %v", call, err)
				}
				if hasLB {
					if n := healthy(ctx, t, p, lb.TargetGroupID); n < int(c.Desired) {
						t.Fatalf("after roll call %d (%s): %d healthy targets, want at least %d", call, res.Message, n, c.Desired)
					}
				}
				if c.Mode == "asg" && res.Outcome == pipeline.OutcomeWait {
					// The scaling policy must not scale the surge back in (or out) mid-roll.
					if sp := suspendedProcesses(ctx, t, p); !sp["AlarmNotification"] || !sp["ScheduledActions"] {
						t.Fatalf("after roll call %d (%s): suspended processes %v, want AlarmNotification and ScheduledActions", call, res.Message, sp)
					}
					if call == 2 {
						// As after a crash between the roll's tags and its suspension: the next
						// call must find the process running and suspend it again.
						if _, err := autoscaling.NewFromConfig(p.Config()).ResumeProcesses(ctx, &autoscaling.ResumeProcessesInput{
							AutoScalingGroupName: groupName(ctx, t, p), ScalingProcesses: []string{"AlarmNotification"}}); err != nil {
							t.Fatal(err)
						}
					}
				}
				if call%2 == 1 && res.Outcome == pipeline.OutcomeWait {
					continue // the result is lost: the next call must find the roll where the cloud is
				}
				if j.Infra, err = pipeline.MergeInfra(j.Infra, res.Infra); err != nil {
					t.Fatal(err)
				}
				last = res
				if res.Outcome == pipeline.OutcomeDone {
					break
				}
				if !strings.HasPrefix(res.Message, "replaced ") {
					t.Fatalf("roll progress message %q", res.Message)
				}
			}
			if hasLB {
				if n := healthy(ctx, t, p, lb.TargetGroupID); n != int(c.Desired) {
					t.Fatalf("%d healthy targets after the roll, want %d (the old instances out)", n, c.Desired)
				}
			}
			after := liveInstances(ctx, t, p, j)
			if len(after) != int(c.Desired) {
				t.Fatalf("%d instances after the roll, want %d: %v", len(after), c.Desired, after)
			}
			for id, typ := range after {
				if _, old := before[id]; old || typ != "t3.small" {
					t.Fatalf("instance %s (%s) after the roll; want only new t3.small instances (before: %v)", id, typ, before)
				}
			}
			var vms []vmpool.VM
			if _, err := (&pipeline.Run{Job: j}).Infra(vmpool.InfraVMs, &vms); err != nil || len(vms) != int(c.Desired) {
				t.Fatalf("infra VMs after the roll: %v %v", vms, err)
			}
			for _, vm := range vms {
				if _, ok := after[vm.ID]; !ok {
					t.Fatalf("infra VM %s is not a live instance", vm.ID)
				}
			}
			lts, err := ec2.NewFromConfig(p.Config()).DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{})
			if err != nil || len(lts.LaunchTemplates) != 1 || *lts.LaunchTemplates[0].LatestVersionNumber != 2 || *lts.LaunchTemplates[0].DefaultVersionNumber != 2 {
				t.Fatalf("launch templates after the roll: %+v (%v); want one, at version 2", lts, err)
			}
			if c.Mode == "asg" {
				g, err := autoscaling.NewFromConfig(p.Config()).DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{})
				if err != nil || len(g.AutoScalingGroups) != 1 {
					t.Fatal(err)
				}
				if gg := g.AutoScalingGroups[0]; *gg.DesiredCapacity != 3 || *gg.MaxSize != 3 || len(gg.Tags) == 0 {
					t.Fatalf("ASG after the roll: desired %d, max %d; want 3, 3", *gg.DesiredCapacity, *gg.MaxSize)
				}
				for _, tg := range g.AutoScalingGroups[0].Tags {
					if strings.HasPrefix(*tg.Key, "groundwork:roll-") {
						t.Fatalf("the roll's tag %s outlived the roll", *tg.Key)
					}
				}
				if sp := suspendedProcesses(ctx, t, p); sp["AlarmNotification"] || sp["ScheduledActions"] || !sp["AZRebalance"] {
					t.Fatalf("suspended processes after the roll: %v; want only the operator's AZRebalance", sp)
				}
				pol, err := autoscaling.NewFromConfig(p.Config()).DescribePolicies(ctx, &autoscaling.DescribePoliciesInput{})
				if err != nil || len(pol.ScalingPolicies) != 1 || *pol.ScalingPolicies[0].TargetTrackingConfiguration.TargetValue != 50 {
					t.Fatalf("scaling policies: %+v (%v); want one at 50", pol, err)
				}
			}

			runSteps(ctx, t, j, reversed(pl.Steps(j)), true)
			left, err := p.Leftovers(ctx, aws.JobTags(j))
			if err != nil || len(left) != 0 {
				t.Fatalf("left after teardown: %v (%v)", left, err)
			}
			if pol, err := autoscaling.NewFromConfig(p.Config()).DescribePolicies(ctx, &autoscaling.DescribePoliciesInput{}); err != nil || len(pol.ScalingPolicies) != 0 {
				t.Fatalf("scaling policies after teardown: %+v (%v)", pol, err)
			}
		})
	}
}

// versionWithoutUserData adds a t3.small version to the job's launch template, without user
// data, and makes it the default.
func versionWithoutUserData(ctx context.Context, t *testing.T, p *aws.Provider, j *job.Job) {
	t.Helper()
	c := ec2.NewFromConfig(p.Config())
	lts, err := c.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{})
	if err != nil || len(lts.LaunchTemplates) != 1 {
		t.Fatalf("launch templates: %v %v", lts, err)
	}
	id := lts.LaunchTemplates[0].LaunchTemplateId
	v1, err := c.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: id, Versions: []string{"1"}})
	if err != nil {
		t.Fatal(err)
	}
	d := v1.LaunchTemplateVersions[0].LaunchTemplateData
	nv, err := c.CreateLaunchTemplateVersion(ctx, &ec2.CreateLaunchTemplateVersionInput{LaunchTemplateId: id,
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: d.ImageId, InstanceType: "t3.small"}})
	if err != nil {
		t.Fatal(err)
	}
	v := fmt.Sprint(*nv.LaunchTemplateVersion.VersionNumber)
	if _, err := c.ModifyLaunchTemplate(ctx, &ec2.ModifyLaunchTemplateInput{LaunchTemplateId: id, DefaultVersion: &v}); err != nil {
		t.Fatal(err)
	}
}

// liveInstances maps the job's live instances to their type.
func liveInstances(ctx context.Context, t *testing.T, p *aws.Provider, j *job.Job) map[string]string {
	t.Helper()
	vms, err := p.ListVMs(ctx, aws.JobTags(j))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, vm := range vms {
		d, err := ec2.NewFromConfig(p.Config()).DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{vm.ID}})
		if err != nil {
			t.Fatal(err)
		}
		out[vm.ID] = string(d.Reservations[0].Instances[0].InstanceType)
	}
	return out
}

// healthy counts the target group's healthy targets.
func healthy(ctx context.Context, t *testing.T, p *aws.Provider, tg string) int {
	t.Helper()
	out, err := elbv2.NewFromConfig(p.Config()).DescribeTargetHealth(ctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: &tg})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range out.TargetHealthDescriptions {
		if d.TargetHealth.State == elbtypes.TargetHealthStateEnumHealthy {
			n++
		}
	}
	return n
}

// groupName is the name of the test account's one Auto Scaling group.
func groupName(ctx context.Context, t *testing.T, p *aws.Provider) *string {
	t.Helper()
	g, err := autoscaling.NewFromConfig(p.Config()).DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{})
	if err != nil || len(g.AutoScalingGroups) != 1 {
		t.Fatalf("Auto Scaling groups: %v (%v); want one", g, err)
	}
	return g.AutoScalingGroups[0].AutoScalingGroupName
}

// suspendedProcesses are the processes suspended on the test account's one Auto Scaling group.
func suspendedProcesses(ctx context.Context, t *testing.T, p *aws.Provider) map[string]bool {
	t.Helper()
	g, err := autoscaling.NewFromConfig(p.Config()).DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{})
	if err != nil || len(g.AutoScalingGroups) != 1 {
		t.Fatalf("Auto Scaling groups: %v (%v); want one", g, err)
	}
	out := map[string]bool{}
	for _, sp := range g.AutoScalingGroups[0].SuspendedProcesses {
		out[*sp.ProcessName] = true
	}
	return out
}
