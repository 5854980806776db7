package aws

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	asgtypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
)

// scalingPolicyName is the pool's target-tracking policy; the name is the key of
// PutScalingPolicy, which replaces a policy of the same name, so a repeat is the same policy.
func scalingPolicyName(t Tags) string { return poolName(t) + "-cpu" }

// EnsureScalingPolicy puts a target-tracking policy on the pool's ASG that keeps its average
// CPU at targetCPU percent; targetCPU 0 removes it.
func (p *Provider) EnsureScalingPolicy(ctx context.Context, t Tags, targetCPU float64) error {
	if targetCPU == 0 {
		return p.DeleteScalingPolicy(ctx, t)
	}
	_, err := p.asg.PutScalingPolicy(ctx, &autoscaling.PutScalingPolicyInput{
		AutoScalingGroupName: ptr(poolName(t)), PolicyName: ptr(scalingPolicyName(t)), PolicyType: ptr("TargetTrackingScaling"),
		TargetTrackingConfiguration: &asgtypes.TargetTrackingConfiguration{TargetValue: &targetCPU,
			PredefinedMetricSpecification: &asgtypes.PredefinedMetricSpecification{PredefinedMetricType: asgtypes.MetricTypeASGAverageCPUUtilization}},
	})
	return p.classify(err, true)
}

// DeleteScalingPolicy removes the pool's policy; a missing one (or group) is success. AWS
// deletes a group's policies with the group, but the teardown removes it first so that nothing
// of the pool outlives it where the group's deletion does not take them (moto keeps them).
func (p *Provider) DeleteScalingPolicy(ctx context.Context, t Tags) error {
	out, err := p.asg.DescribePolicies(ctx, &autoscaling.DescribePoliciesInput{AutoScalingGroupName: ptr(poolName(t)), PolicyNames: []string{scalingPolicyName(t)}})
	if err != nil {
		if gone(err) || isCode(err, "ValidationError") {
			return nil
		}
		return p.classify(err, false)
	}
	for _, pol := range out.ScalingPolicies {
		_, err := p.asg.DeletePolicy(ctx, &autoscaling.DeletePolicyInput{AutoScalingGroupName: ptr(poolName(t)), PolicyName: pol.PolicyName})
		if err != nil && !gone(err) && !isCode(err, "ValidationError") {
			return p.classify(err, false)
		}
	}
	return nil
}
