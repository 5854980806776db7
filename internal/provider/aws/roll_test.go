package aws

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// TestLaunchTemplateVersionSurvivesACrashBeforeItIsDefault: a changed spec adds one version;
// when the process dies between CreateLaunchTemplateVersion and ModifyLaunchTemplate (the
// default is still the old version), the re-run makes that version the default instead of
// adding another, which moto, ignoring the ClientToken, would otherwise do.
func TestLaunchTemplateVersionSurvivesACrashBeforeItIsDefault(t *testing.T) {
	t.Parallel()
	p, _ := testProvider(t, "eu-west-2")
	ctx, tags := testCtx(t), testTags(t)
	net, err := p.EnsureNetwork(ctx, NetworkSpec{Tags: tags, NoNAT: true})
	if err != nil {
		t.Fatal(err)
	}
	sg, err := p.EnsureVMSecurityGroup(ctx, tags, net.VPCID, net.CIDR, "")
	if err != nil {
		t.Fatal(err)
	}
	spec := VMPoolSpec{Tags: tags, Name: "web", InstanceType: "t3.micro", Mode: ModeFixed, Min: 1, Max: 1, VPCID: net.VPCID, VPCCIDR: net.CIDR}
	if lt, err := p.EnsureLaunchTemplate(ctx, spec, sg); err != nil || lt.Version != 1 {
		t.Fatalf("first version: %+v %v", lt, err)
	}
	spec.InstanceType = "t3.small"
	lt, err := p.EnsureLaunchTemplate(ctx, spec, sg)
	if err != nil || lt.Version != 2 {
		t.Fatalf("changed spec: %+v %v; want version 2", lt, err)
	}
	// The crash: the default never moved.
	if _, err := p.ec2.ModifyLaunchTemplate(ctx, &ec2.ModifyLaunchTemplateInput{LaunchTemplateId: &lt.ID, DefaultVersion: ptr("1")}); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2; round++ {
		again, err := p.EnsureLaunchTemplate(ctx, spec, sg)
		if err != nil || again.Version != 2 {
			t.Fatalf("round %d after the crash: %+v %v; want version 2", round, again, err)
		}
	}
	out, err := p.ec2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{lt.ID}})
	if err != nil || *out.LaunchTemplates[0].LatestVersionNumber != 2 || *out.LaunchTemplates[0].DefaultVersionNumber != 2 {
		t.Fatalf("template after the re-runs: %+v %v; want latest = default = 2", out, err)
	}
}
