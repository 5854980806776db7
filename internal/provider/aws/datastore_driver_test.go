package aws

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/rds"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/secrets/secretstest"
)

// TestDatastorePipelineOnAWS runs the shared datastore pipeline with the AWS driver and the
// Secrets Manager store: the reference's RDS request, created twice, then torn down.
func TestDatastorePipelineOnAWS(t *testing.T) {
	t.Parallel()
	p, _ := testProvider(t, "eu-west-1")
	ctx := testCtx(t)
	j := &job.Job{ID: "job_dspipe1", OrgID: "org_1", Family: job.FamilyDatastore, Provider: "aws", Mode: job.ModeCreate,
		Config: json.RawMessage(`{"engine":"postgres","version":"16.3","instanceClass":"db.t3.medium","allocatedStorageGB":50,"multiAZ":true,"backupRetentionDays":7}`)}
	tags := JobTags(j)
	drv := DatastoreDriver{Resolve: func(context.Context, string) (Placement, error) { return Placement{P: p, Tags: tags}, nil }}
	pl := dspipe.New(dspipe.Options{Drivers: map[string]dspipe.Driver{"aws": drv.Driver()}, Secrets: secretstest.Vault(p.Secrets(tags)), Poll: time.Millisecond})
	if err := pl.Validate(ctx, j); err != nil {
		t.Fatal(err)
	}
	steps := pl.Steps(j)
	drive(ctx, t, j, steps, false)
	drive(ctx, t, j, steps, false)

	db, err := p.rds.DescribeDBInstances(ctx, &rds.DescribeDBInstancesInput{})
	if err != nil || len(db.DBInstances) != 1 {
		t.Fatalf("instances = %v, %v; want 1", db, err)
	}
	in := db.DBInstances[0]
	if *in.DBInstanceClass != "db.t3.medium" || *in.AllocatedStorage != 50 || !*in.MultiAZ || *in.BackupRetentionPeriod != 7 {
		t.Fatalf("instance does not match the request: %+v", in)
	}
	var conn dspipe.ConnectionInfra
	if ok, err := (&pipeline.Run{Job: j}).Infra(dspipe.InfraConnection, &conn); !ok || err != nil {
		t.Fatalf("no connection in infra: %v", err)
	}
	if !strings.HasPrefix(conn.SecretRef, "arn:aws:secretsmanager:") || conn.Host == "" {
		t.Fatalf("connection = %+v; want a Secrets Manager ARN and a host", conn)
	}
	if strings.Contains(string(j.Infra), "password") {
		t.Fatalf("infra mentions a password: %s", j.Infra)
	}

	drive(ctx, t, j, steps, true)
	db, _ = p.rds.DescribeDBInstances(ctx, &rds.DescribeDBInstancesInput{})
	secs, _ := p.sm.ListSecrets(ctx, &secretsmanager.ListSecretsInput{})
	left, err := p.Leftovers(ctx, tags)
	if err != nil {
		t.Fatal(err)
	}
	if len(db.DBInstances) != 0 || len(secs.SecretList) != 0 || len(left) != 0 {
		t.Fatalf("left: %d instances, %d secrets, %v", len(db.DBInstances), len(secs.SecretList), left)
	}
}
