package plan

import (
	"context"
	"slices"
	"testing"

	"github.com/groundworkhq/groundwork/internal/job"
)

func TestReadOnlyGrants(t *testing.T) {
	t.Parallel()
	for op, want := range map[string]bool{
		"ec2:DescribeVpcs": true, "ecr:ListImages": true, "iam:GetRole": true,
		"secretsmanager:GetSecretValue": false, "ec2:CreateVpc": false, "ec2:DeleteVpc": false, "ec2:ModifyVpcAttribute": false,
		"Describe":             false,
		"compute.networks.get": true, "compute.networks.list": true, "compute.instances.getGuestAttributes": true,
		"compute.networks.create": false, "resourcemanager.projects.setIamPolicy": false, "resourcemanager.projects.getIamPolicy": false,
		"secretmanager.versions.access": false, "redis.instances.getAuthString": false, "compute.instanceGroupManagers.listManagedInstances": true,
		"Microsoft.Network/virtualNetworks/read": true, "Microsoft.Network/virtualNetworks/write": false,
		"Microsoft.KeyVault/vaults/secrets/read": false,
	} {
		if got := ReadOnlyGrants(op); got != want {
			t.Errorf("ReadOnlyGrants(%q) = %v, want %v", op, got, want)
		}
	}
	p := &Plan{Steps: []Step{{Operations: []string{"ec2:DescribeVpcs", "ec2:CreateVpc"}}, {Operations: []string{"ec2:CreateVpc", "ec2:DeleteVpc"}}}}
	if got := p.Operations(); !slices.Equal(got, []string{"ec2:DescribeVpcs", "ec2:CreateVpc", "ec2:DeleteVpc"}) {
		t.Fatalf("operations = %v", got)
	}
	if got := p.NotGranted(); !slices.Equal(got, []string{"ec2:CreateVpc", "ec2:DeleteVpc"}) {
		t.Fatalf("not granted = %v", got)
	}
}

// A provider without a source plans the steps and says it does not know their operations.
func TestPlannerWithoutSource(t *testing.T) {
	t.Parallel()
	pl, err := (&Planner{}).Plan(context.Background(), &job.Job{ID: "job_1", Provider: "gcp"}, "europe-west1", []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	if pl.OperationsKnown || len(pl.Steps) != 2 || pl.Policy.Format != FormatNone || len(pl.Operations()) != 0 {
		t.Fatalf("plan = %+v", pl)
	}
}
