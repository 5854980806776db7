package aws

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	asgtypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/rds"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/remediation"
)

// The remediation executor against moto: an EC2 instance and an RDS instance stop and start,
// an ASG's desired capacity goes to zero (its minimum with it) and back, above the maximum is
// refused, and a missing or unknown resource is user_action.
func TestRemediator(t *testing.T) {
	t.Parallel()
	p, _ := testProvider(t, "eu-west-1")
	ctx := testCtx(t)
	m := p.Remediator()
	observe := func(r remediation.Resource) remediation.State {
		t.Helper()
		st, err := m.Observe(ctx, r)
		if err != nil {
			t.Fatalf("observe %+v: %v", r, err)
		}
		return st
	}
	until := func(r remediation.Resource, want string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for st := observe(r); st.Status != want; st = observe(r) {
			if time.Now().After(deadline) {
				t.Fatalf("%+v is %s, want %s", r, st.Status, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	t.Run("ec2", func(t *testing.T) {
		img, err := p.DefaultImage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		run, err := p.ec2.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: &img, InstanceType: ec2types.InstanceTypeT3Micro, MinCount: ptr(int32(1)), MaxCount: ptr(int32(1))})
		if err != nil {
			t.Fatal(err)
		}
		r := remediation.Resource{Type: remediation.TypeEC2Instance, ID: *run.Instances[0].InstanceId}
		until(r, "running")
		if err := m.Stop(ctx, r); err != nil {
			t.Fatal(err)
		}
		until(r, "stopped")
		if err := m.Start(ctx, r); err != nil {
			t.Fatal(err)
		}
		until(r, "running")
	})
	t.Run("rds", func(t *testing.T) {
		id := fmt.Sprintf("rem-%d", time.Now().UnixNano()%1e9)
		if _, err := p.rds.CreateDBInstance(ctx, &rds.CreateDBInstanceInput{DBInstanceIdentifier: &id, Engine: ptr("postgres"),
			DBInstanceClass: ptr("db.t3.micro"), AllocatedStorage: ptr(int32(20)), MasterUsername: ptr("admin_user"),
			MasterUserPassword: ptr("not-a-real-password-1")}); err != nil {
			t.Fatal(err)
		}
		r := remediation.Resource{Type: remediation.TypeRDSInstance, ID: id}
		until(r, "running")
		if err := m.Stop(ctx, r); err != nil {
			t.Fatal(err)
		}
		until(r, "stopped")
		if err := m.Start(ctx, r); err != nil {
			t.Fatal(err)
		}
		until(r, "running")
	})
	t.Run("asg", func(t *testing.T) {
		img, err := p.DefaultImage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("rem-asg-%d", time.Now().UnixNano()%1e9)
		lt, err := p.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: &name,
			LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: &img, InstanceType: ec2types.InstanceTypeT3Micro}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.asg.CreateAutoScalingGroup(ctx, &autoscaling.CreateAutoScalingGroupInput{AutoScalingGroupName: &name,
			MinSize: ptr(int32(1)), MaxSize: ptr(int32(3)), DesiredCapacity: ptr(int32(2)), AvailabilityZones: []string{"eu-west-1a"},
			LaunchTemplate: &asgtypes.LaunchTemplateSpecification{LaunchTemplateId: lt.LaunchTemplate.LaunchTemplateId, Version: ptr("$Default")}}); err != nil {
			t.Fatal(err)
		}
		r := remediation.Resource{Type: remediation.TypeASG, ID: name}
		if st := observe(r); st.Capacity != 2 || st.Status != "running" {
			t.Fatalf("before: %+v", st)
		}
		if err := m.SetCapacity(ctx, r, 0); err != nil {
			t.Fatal(err)
		}
		if st := observe(r); st.Capacity != 0 || st.Status != "stopped" {
			t.Fatalf("after scaling to zero: %+v", st)
		}
		if err := m.SetCapacity(ctx, r, 5); fault.ClassOf(err) != job.ClassUserAction {
			t.Fatalf("above the maximum: %v", err)
		}
		if err := m.SetCapacity(ctx, r, 2); err != nil {
			t.Fatal(err)
		}
		if st := observe(r); st.Capacity != 2 {
			t.Fatalf("after scaling back: %+v", st)
		}
	})
	t.Run("refusals", func(t *testing.T) {
		for _, r := range []remediation.Resource{
			{Type: remediation.TypeEC2Instance, ID: "i-0123456789abcdef0"},
			{Type: remediation.TypeRDSInstance, ID: "no-such-db"},
			{Type: remediation.TypeASG, ID: "no-such-group"},
			{Type: "synapse-pool", ID: "x"},
		} {
			_, err := m.Observe(ctx, r)
			var fe *fault.Error
			if !errors.As(err, &fe) || fe.Class != job.ClassUserAction {
				t.Errorf("observe %+v: %v, want user_action", r, err)
			}
		}
		if err := m.Stop(ctx, remediation.Resource{Type: remediation.TypeASG, ID: "x"}); fault.ClassOf(err) != job.ClassUserAction {
			t.Errorf("stop an ASG: %v", err)
		}
	})
}
