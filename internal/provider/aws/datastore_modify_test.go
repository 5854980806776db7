package aws

import (
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/rds"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
)

// TestModifyDatastore: ModifyDatastore sends only the settings that differ, DescribeDBInstances
// then shows them on the same instance, a repeat sends nothing, and a redis group is refused
// as a user action. moto applies every modification at once, whatever ApplyImmediately says,
// so the maintenance-window choice is sent but not observable here.
func TestModifyDatastore(t *testing.T) {
	t.Parallel()
	p, _ := testProvider(t, "eu-west-1")
	ctx, tags := testCtx(t), testTags(t)
	net, err := p.EnsureNetwork(ctx, NetworkSpec{Tags: tags, NoNAT: true})
	if err != nil {
		t.Fatal(err)
	}
	spec := DatastoreSpec{Tags: tags, SubnetIDs: net.PrivateSubnetIDs, Engine: "postgres", Version: "16.3", InstanceClass: "db.t3.micro",
		AllocatedStorageGB: 20, BackupRetentionDays: 7}
	if _, err := p.EnsureDatastore(ctx, spec); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name        string
		set         func(s *DatastoreSpec)
		immediately bool
		changed     []string
	}{
		{"storage and retention", func(s *DatastoreSpec) { s.AllocatedStorageGB, s.BackupRetentionDays = 40, 14 }, true, []string{"allocatedStorageGB", "backupRetentionDays"}},
		{"repeat", func(*DatastoreSpec) {}, true, nil},
		{"class in the window", func(s *DatastoreSpec) { s.InstanceClass = "db.t3.small" }, false, []string{"instanceClass"}},
	} {
		step.set(&spec)
		res, err := p.ModifyDatastore(ctx, spec, step.immediately)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if !slices.Equal(res.Changed, step.changed) {
			t.Fatalf("%s: changed %v, want %v", step.name, res.Changed, step.changed)
		}
	}
	out, err := p.rds.DescribeDBInstances(ctx, &rds.DescribeDBInstancesInput{})
	if err != nil || len(out.DBInstances) != 1 {
		t.Fatalf("instances %v (%v), want the one", out, err)
	}
	in := out.DBInstances[0]
	if *in.AllocatedStorage != 40 || *in.BackupRetentionPeriod != 14 || *in.DBInstanceClass != "db.t3.small" || *in.Engine != "postgres" {
		t.Fatalf("after modifying: %d GB, %d days, %s, %s", *in.AllocatedStorage, *in.BackupRetentionPeriod, *in.DBInstanceClass, *in.Engine)
	}
	_, err = p.ModifyDatastore(ctx, DatastoreSpec{Tags: tags, Engine: "redis", InstanceClass: "cache.t3.small"}, true)
	if fault.ClassOf(err) != job.ClassUserAction {
		t.Fatalf("modify redis: %v, want a user action", err)
	}
}
