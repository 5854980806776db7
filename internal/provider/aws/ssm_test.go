package aws

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// TestSSMProbeWiring sends the sentinel check through moto's SSM Run Command. moto runs no
// command on the (emulated) instance, so the sentinel is never seen: the probe must say "not
// yet" without error, first after sending, then after reading the empty answer.
func TestSSMProbeWiring(t *testing.T) {
	t.Parallel()
	p, _ := testProvider(t, "eu-west-1")
	ctx := testCtx(t)
	img, err := p.DefaultImage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	run, err := p.ec2.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: &img, InstanceType: ec2types.InstanceTypeT3Micro, MinCount: ptr(int32(1)), MaxCount: ptr(int32(1))})
	if err != nil {
		t.Fatal(err)
	}
	id := *run.Instances[0].InstanceId
	probe := NewSSMProbe(p)
	for i := 0; i < 2; i++ {
		ok, err := probe.SentinelPresent(ctx, id)
		if err != nil || ok {
			t.Fatalf("poll %d = %v, %v; want not present, no error", i, ok, err)
		}
	}
	if len(probe.last) != 1 {
		t.Fatalf("commands recorded: %v", probe.last)
	}
}
