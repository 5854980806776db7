package aws

import (
	"encoding/json"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/elasticache"
	"github.com/aws/aws-sdk-go-v2/service/rds"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

func TestDatastores(t *testing.T) {
	t.Parallel()
	cases := map[string]DatastoreSpec{
		"postgres": {Engine: "postgres", Version: "16.3", InstanceClass: "db.t3.medium", AllocatedStorageGB: 50, MultiAZ: true, BackupRetentionDays: 7},
		"mysql":    {Engine: "mysql", Version: "8.0.35", InstanceClass: "db.t3.micro", AllocatedStorageGB: 20, BackupRetentionDays: 1},
		"redis":    {Engine: "redis", Version: "7.1", InstanceClass: "cache.t3.micro", BackupRetentionDays: 1},
	}
	for name, spec := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, _ := testProvider(t, "eu-west-1")
			ctx, tags := testCtx(t), testTags(t)
			net, err := p.EnsureNetwork(ctx, NetworkSpec{Tags: tags, NoNAT: true})
			if err != nil {
				t.Fatal(err)
			}
			spec.Tags, spec.SubnetIDs = tags, net.PrivateSubnetIDs
			first, err := p.EnsureDatastore(ctx, spec)
			if err != nil {
				t.Fatalf("ensure: %v", err)
			}
			second, err := p.EnsureDatastore(ctx, spec)
			if err != nil || second.ID != first.ID || second.SecretARN != first.SecretARN {
				t.Fatalf("second ensure = %+v, %v; first %+v", second, err, first)
			}
			var st Datastore
			for i := 0; i < 50 && !st.Ready; i++ { // poll as the wait-ready step does
				if st, err = p.DatastoreStatus(ctx, spec); err != nil {
					t.Fatal(err)
				}
			}
			if !st.Ready || st.Host == "" || st.Port == 0 {
				t.Fatalf("not ready: %+v", st)
			}
			sec, err := p.sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &first.SecretARN})
			if err != nil {
				t.Fatal(err)
			}
			var v struct{ Username, Password string }
			if err := json.Unmarshal([]byte(*sec.SecretString), &v); err != nil || v.Password == "" || v.Username != adminUser {
				t.Fatalf("admin secret = %q, %v", *sec.SecretString, err)
			}
			if spec.Engine != "redis" {
				db, err := p.rds.DescribeDBInstances(ctx, &rds.DescribeDBInstancesInput{})
				if err != nil || len(db.DBInstances) != 1 {
					t.Fatalf("instances = %v, %v; want exactly 1", db, err)
				}
				in := db.DBInstances[0]
				if *in.Engine != spec.Engine || *in.AllocatedStorage != spec.AllocatedStorageGB || *in.MultiAZ != spec.MultiAZ || *in.BackupRetentionPeriod != spec.BackupRetentionDays || *in.DBInstanceClass != spec.InstanceClass {
					t.Fatalf("instance does not match the request: %+v", in)
				}
			} else {
				g, err := p.ec.DescribeReplicationGroups(ctx, &elasticache.DescribeReplicationGroupsInput{})
				if err != nil || len(g.ReplicationGroups) != 1 {
					t.Fatalf("replication groups = %v, %v; want exactly 1", g, err)
				}
			}
			if spec.Engine == "redis" {
				// moto marks a deleted replication group "deleting" and keeps it forever (real
				// ElastiCache removes it), so the test checks the delete was issued and that
				// calling again while it is deleting is safe and not done.
				for i := 0; i < 2; i++ {
					if done, err := p.DeleteDatastore(ctx, spec); err != nil || done {
						t.Fatalf("delete round %d = %v, %v; want not done, no error", i, done, err)
					}
				}
				g, err := p.ec.DescribeReplicationGroups(ctx, &elasticache.DescribeReplicationGroupsInput{})
				if err != nil || *g.ReplicationGroups[0].Status != "deleting" {
					t.Fatalf("group after delete = %+v, %v", g, err)
				}
				return
			}
			deleteUntilDone(t, func() (bool, error) { return p.DeleteDatastore(ctx, spec) })
			db, _ := p.rds.DescribeDBInstances(ctx, &rds.DescribeDBInstancesInput{})
			rg, _ := p.ec.DescribeReplicationGroups(ctx, &elasticache.DescribeReplicationGroupsInput{})
			sgs, _ := p.rds.DescribeDBSubnetGroups(ctx, &rds.DescribeDBSubnetGroupsInput{})
			secs, _ := p.sm.ListSecrets(ctx, &secretsmanager.ListSecretsInput{})
			if len(db.DBInstances)+len(rg.ReplicationGroups)+len(sgs.DBSubnetGroups)+len(secs.SecretList) != 0 {
				t.Fatalf("left after delete: %d instances, %d groups, %d subnet groups, %d secrets",
					len(db.DBInstances), len(rg.ReplicationGroups), len(sgs.DBSubnetGroups), len(secs.SecretList))
			}
			deleteUntilDone(t, func() (bool, error) { return p.DeleteNetwork(ctx, tags) })
		})
	}
}
