package aws

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/rds"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/remediation"
)

// Remediator carries out remediation actions on one account and region: EC2 instances and
// RDS instances stop and start, ASGs change desired capacity.
type Remediator struct{ p *Provider }

// Remediator returns the provider's remediation executor.
func (p *Provider) Remediator() *Remediator { return &Remediator{p: p} }

var _ remediation.Executor = (*Remediator)(nil)

func notFound(r remediation.Resource) error {
	return fault.UserAction(fmt.Errorf("%s %s was not found", r.Type, r.ID), "ResourceNotFound",
		"The resource is gone or lives in another account or region: check the space the remediation names.", "")
}

func unsupported(r remediation.Resource, what string) error {
	return fault.UserAction(fmt.Errorf("%s of resource type %q is not supported on AWS", what, r.Type), "UnsupportedResourceType",
		"AWS remediation handles ec2-instance, rds-instance and asg.", "")
}

// Observe reads the resource's state in the workflow's words.
func (m *Remediator) Observe(ctx context.Context, r remediation.Resource) (remediation.State, error) {
	switch r.Type {
	case remediation.TypeEC2Instance:
		out, err := m.p.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{r.ID}})
		if err != nil {
			if isNotFound(apiCode(err)) || apiCode(err) == "InvalidInstanceID.Malformed" {
				return remediation.State{}, notFound(r)
			}
			return remediation.State{}, m.p.classify(err, false)
		}
		for _, res := range out.Reservations {
			for _, in := range res.Instances {
				if in.State == nil {
					continue
				}
				s := string(in.State.Name)
				if s == "pending" {
					s = "starting"
				}
				return remediation.State{Status: s}, nil
			}
		}
		return remediation.State{}, notFound(r)
	case remediation.TypeRDSInstance:
		out, err := m.p.rds.DescribeDBInstances(ctx, &rds.DescribeDBInstancesInput{DBInstanceIdentifier: aws.String(r.ID)})
		if err != nil {
			if isNotFound(apiCode(err)) {
				return remediation.State{}, notFound(r)
			}
			return remediation.State{}, m.p.classify(err, false)
		}
		if len(out.DBInstances) == 0 {
			return remediation.State{}, notFound(r)
		}
		s := deref(out.DBInstances[0].DBInstanceStatus)
		if s == "available" {
			s = "running"
		}
		return remediation.State{Status: s}, nil
	case remediation.TypeASG:
		out, err := m.p.asg.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{r.ID}})
		if err != nil {
			return remediation.State{}, m.p.classify(err, false)
		}
		if len(out.AutoScalingGroups) == 0 {
			return remediation.State{}, notFound(r)
		}
		d := aws.ToInt32(out.AutoScalingGroups[0].DesiredCapacity)
		st := remediation.State{Status: "running", Capacity: d}
		if d == 0 {
			st.Status = "stopped"
		}
		return st, nil
	}
	return remediation.State{}, unsupported(r, "observing")
}

// Stop stops an EC2 or RDS instance. Stopping one already stopping is not an error.
func (m *Remediator) Stop(ctx context.Context, r remediation.Resource) error {
	switch r.Type {
	case remediation.TypeEC2Instance:
		_, err := m.p.ec2.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{r.ID}})
		return m.p.classify(err, false)
	case remediation.TypeRDSInstance:
		_, err := m.p.rds.StopDBInstance(ctx, &rds.StopDBInstanceInput{DBInstanceIdentifier: aws.String(r.ID)})
		return m.p.classify(err, false)
	}
	return unsupported(r, "stop")
}

// Start starts an EC2 or RDS instance.
func (m *Remediator) Start(ctx context.Context, r remediation.Resource) error {
	switch r.Type {
	case remediation.TypeEC2Instance:
		_, err := m.p.ec2.StartInstances(ctx, &ec2.StartInstancesInput{InstanceIds: []string{r.ID}})
		return m.p.classify(err, false)
	case remediation.TypeRDSInstance:
		_, err := m.p.rds.StartDBInstance(ctx, &rds.StartDBInstanceInput{DBInstanceIdentifier: aws.String(r.ID)})
		return m.p.classify(err, false)
	}
	return unsupported(r, "start")
}

// SetCapacity sets an ASG's desired capacity; scaling to zero lowers its minimum with it.
func (m *Remediator) SetCapacity(ctx context.Context, r remediation.Resource, desired int32) error {
	if r.Type != remediation.TypeASG {
		return unsupported(r, "changing capacity")
	}
	in := &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: aws.String(r.ID), DesiredCapacity: aws.Int32(desired)}
	if desired == 0 {
		in.MinSize = aws.Int32(0)
	} else {
		out, err := m.p.asg.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{r.ID}})
		if err != nil {
			return m.p.classify(err, false)
		}
		if len(out.AutoScalingGroups) == 0 {
			return notFound(r)
		}
		if mx := aws.ToInt32(out.AutoScalingGroups[0].MaxSize); desired > mx {
			return fault.UserAction(errors.New("the desired capacity exceeds the group's maximum"), "CapacityAboveMax",
				fmt.Sprintf("Ask for at most %d, or raise the group's maximum size.", mx), "")
		}
	}
	_, err := m.p.asg.UpdateAutoScalingGroup(ctx, in)
	return m.p.classify(err, false)
}
