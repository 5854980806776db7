package aws

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/elasticache"
	"github.com/aws/aws-sdk-go-v2/service/rds"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/job"
	awsp "github.com/groundworkhq/groundwork/internal/provider/aws"
	"github.com/groundworkhq/groundwork/internal/provider/local/localtest"
)

// rdsWant is what the datastore request asked for, as RDS or ElastiCache should show it.
type rdsWant struct {
	class   string
	storage int32
	multiAZ bool
	backup  int32
	version string
}

// datastoreInfra is the part of a datastore job's infra the AWS checks read.
type datastoreInfra struct {
	Credentials struct {
		SecretRef string `json:"secretRef"`
	} `json:"credentials"`
	Server struct {
		ID     string `json:"id"`
		Host   string `json:"host"`
		Port   int    `json:"port"`
		Engine string `json:"engine"`
	} `json:"server"`
	Connection struct {
		Host      string `json:"host"`
		Port      int    `json:"port"`
		User      string `json:"user"`
		SecretRef string `json:"secretRef"`
	} `json:"connection"`
	Network struct {
		SubnetIDs []string `json:"subnetIDs"`
	} `json:"network"`
}

// checkDatastore judges a completed AWS datastore job: the server in moto is the one the
// request asked for, in its own subnet group, its admin password is in a Secrets Manager secret
// whose ARN the infra keeps, and the password is nowhere in the job, the API's answers or the
// server's data dir.
func checkDatastore(want rdsWant) func(t *testing.T, e *env, j *job.Job) {
	return func(t *testing.T, e *env, j *job.Job) {
		t.Helper()
		ctx := testCtx(t)
		var in datastoreInfra
		if err := json.Unmarshal(j.Infra, &in); err != nil {
			t.Fatalf("infra %s: %v", j.Infra, err)
		}
		ref := in.Credentials.SecretRef
		if !strings.HasPrefix(ref, "arn:aws:secretsmanager:") || in.Connection.SecretRef != ref {
			t.Fatalf("credentials ref %q, connection ref %q: want the same Secrets Manager ARN", ref, in.Connection.SecretRef)
		}
		if in.Server.ID != awsp.DatastoreID(awsp.JobTags(j)) || in.Connection.Host == "" || in.Connection.Port == 0 || len(in.Network.SubnetIDs) == 0 {
			t.Fatalf("infra does not describe the server: %s", j.Infra)
		}

		sm := secretsmanager.NewFromConfig(e.p.Config())
		sec, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &ref})
		if err != nil {
			t.Fatalf("the admin secret %s: %v", ref, err)
		}
		password := awssdk.ToString(sec.SecretString)
		if len(password) < 16 {
			t.Fatalf("the admin secret holds %d characters, want a generated password", len(password))
		}
		desc, err := sm.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: &ref})
		if err != nil || !hasTag(desc, awsp.TagJobID, j.ID) {
			t.Fatalf("the admin secret is not tagged with the job: %+v (%v)", desc, err)
		}

		switch in.Server.Engine {
		case "postgres", "mysql":
			out, err := rds.NewFromConfig(e.p.Config()).DescribeDBInstances(ctx, &rds.DescribeDBInstancesInput{DBInstanceIdentifier: &in.Server.ID})
			if err != nil || len(out.DBInstances) != 1 {
				t.Fatalf("RDS instance %s: %v", in.Server.ID, err)
			}
			db := out.DBInstances[0]
			got := rdsWant{class: awssdk.ToString(db.DBInstanceClass), storage: awssdk.ToInt32(db.AllocatedStorage),
				multiAZ: awssdk.ToBool(db.MultiAZ), backup: awssdk.ToInt32(db.BackupRetentionPeriod), version: awssdk.ToString(db.EngineVersion)}
			if got != want || awssdk.ToString(db.Engine) != in.Server.Engine || db.DBSubnetGroup == nil ||
				awssdk.ToString(db.DBSubnetGroup.DBSubnetGroupName) != in.Server.ID {
				t.Fatalf("RDS instance %+v in subnet group %+v, want %+v in %s", got, db.DBSubnetGroup, want, in.Server.ID)
			}
		case "redis":
			ec := elasticache.NewFromConfig(e.p.Config())
			out, err := ec.DescribeReplicationGroups(ctx, &elasticache.DescribeReplicationGroupsInput{ReplicationGroupId: &in.Server.ID})
			if err != nil || len(out.ReplicationGroups) != 1 {
				t.Fatalf("replication group %s: %v", in.Server.ID, err)
			}
			g := out.ReplicationGroups[0]
			if awssdk.ToString(g.CacheNodeType) != want.class || awssdk.ToInt32(g.SnapshotRetentionLimit) != want.backup ||
				(g.MultiAZ == "enabled") != want.multiAZ {
				t.Fatalf("replication group %+v, want %+v", g, want)
			}
			sgs, err := ec.DescribeCacheSubnetGroups(ctx, &elasticache.DescribeCacheSubnetGroupsInput{CacheSubnetGroupName: &in.Server.ID})
			if err != nil || len(sgs.CacheSubnetGroups) != 1 {
				t.Fatalf("cache subnet group %s: %v", in.Server.ID, err)
			}
		default:
			t.Fatalf("infra names engine %q", in.Server.Engine)
		}

		e.noPassword(t, j, password)
	}
}

func hasTag(d *secretsmanager.DescribeSecretOutput, key, value string) bool {
	for _, tg := range d.Tags {
		if awssdk.ToString(tg.Key) == key && awssdk.ToString(tg.Value) == value {
			return true
		}
	}
	return false
}

// noPassword: the admin password is in none of the API's answers about the job (the job, the
// space's job list, its steps' events via the job, the audit log) nor in any file of the
// server's data dir (the job store among them).
func (e *env) noPassword(t *testing.T, j *job.Job, password string) {
	t.Helper()
	for _, path := range []string{
		"/api/provisioning-jobs/" + j.ID,
		"/api/provisioning-jobs?spaceID=" + e.space.ID,
		"/api/audit-logs?limit=200",
	} {
		var raw json.RawMessage
		if err := e.s.Client.Do(testCtx(t), http.MethodGet, path, nil, &raw); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		if bytes.Contains(raw, []byte(password)) {
			t.Fatalf("GET %s answers the admin password", path)
		}
	}
	if bytes.Contains(j.Config, []byte(password)) || bytes.Contains(j.Infra, []byte(password)) {
		t.Fatal("the job's config or infra holds the admin password")
	}
	if e.dataDir == "" {
		t.Fatal("the env knows no data dir to scan")
	}
	err := filepath.WalkDir(e.dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			// A file SQLite removed between listing and reading is no finding.
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		b, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(password)) {
			t.Errorf("%s holds the admin password", path)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("scan the data dir: %v", err)
	}
}

// redisTeardownWaits stands in for DELETE-then-nothing-left on redis: moto 5.2.5 marks a
// deleted replication group "deleting" and keeps it for ever (real ElastiCache removes it
// within minutes), and has no DeleteCacheSubnetGroup. What moto can show: teardown deletes the
// group, then waits on it without failing the job, well past the engine's transient retries
// (5 attempts, as a slow RDS or ElastiCache delete would outlast), and removes neither the
// admin secret nor the network while the server is still there.
func redisTeardownWaits(t *testing.T, e *env, j *job.Job) {
	t.Helper()
	// The engine fails a step after 5 transient attempts; a wait is no failure.
	const pastRetries = 8
	if err := e.s.Client.Do(testCtx(t), http.MethodDelete, "/api/provisioning-jobs/"+j.ID, nil, nil); err != nil {
		t.Fatalf("delete %s: %v", j.ID, err)
	}
	id := awsp.DatastoreID(awsp.JobTags(j))
	ec := elasticache.NewFromConfig(e.p.Config())
	deadline := time.Now().Add(3 * time.Minute)
	for {
		got := getJob(t, e.s.Client, j.ID)
		if got.Status == job.StatusFailed || got.Status == job.StatusDeleted {
			b, _ := json.MarshalIndent(got, "", " ")
			t.Fatalf("teardown while moto still deletes the replication group: job %s\n%s", got.Status, b)
		}
		attempts := 0
		if i := got.StepIndex("create_server"); i >= 0 {
			attempts = got.Steps[i].Attempts
		}
		out, err := ec.DescribeReplicationGroups(testCtx(t), &elasticache.DescribeReplicationGroupsInput{ReplicationGroupId: &id})
		if err != nil || len(out.ReplicationGroups) != 1 {
			t.Fatalf("replication group %s during teardown: %v", id, err)
		}
		if attempts >= pastRetries && awssdk.ToString(out.ReplicationGroups[0].Status) == "deleting" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 3 minutes: create_server undone %d times, group %s", attempts, awssdk.ToString(out.ReplicationGroups[0].Status))
		}
		time.Sleep(100 * time.Millisecond)
	}
	left := e.leftovers(t, j)
	for _, kind := range []string{"replication-group", "secret", "vpc"} {
		if left[kind] == 0 {
			t.Fatalf("while the server is being deleted moto holds %v; want its %s still there", left, kind)
		}
	}
}

// TestAdoptOnAWS: a datastore adopted on an AWS space is Groundwork's to use, not to delete.
// Another job creates an RDS instance; the adopt job's server is a local PostgreSQL standing in
// for an RDS endpoint (moto runs no database behind its endpoints, and adoption logs in once).
// A database made on the adopted server keeps its owner's password in the account's Secrets
// Manager; teardown of the adopted job removes that, and only that: moto holds what it held
// before, and the adopted server still answers.
func TestAdoptOnAWS(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	e := newEnv(t)
	created := e.create(t, "datastore", `{"engine":"postgres","version":"16.3","instanceClass":"db.t3.medium","allocatedStorageGB":50,"multiAZ":true,"backupRetentionDays":7}`)
	created = waitStatus(t, e.s.Client, created.ID, job.StatusCompleted)
	before := e.leftovers(t, created)
	if before["rds-instance"] != 1 || before["secret"] != 1 {
		t.Fatalf("after create, moto holds %v; want one RDS instance and its secret", before)
	}

	own, adminPW := localtest.StartServer(t, datastore.EnginePostgres)
	var adopted job.Job
	if err := e.s.Client.Do(ctx, http.MethodPost, "/api/provisioning-jobs", map[string]any{"spaceID": e.space.ID, "kind": "datastore", "mode": "adopt",
		"config": map[string]any{"engine": "postgres", "host": own.Host, "port": own.Port, "adminUser": own.AdminUser, "adminPassword": adminPW}}, &adopted); err != nil {
		t.Fatalf("adopt: %v", err)
	}
	adopted = *waitStatus(t, e.s.Client, adopted.ID, job.StatusCompleted)
	if bytes.Contains(adopted.Config, []byte(adminPW)) || bytes.Contains(adopted.Infra, []byte(adminPW)) {
		t.Fatal("the adopted job keeps the admin password given")
	}
	if left := e.leftovers(t, created); !maps.Equal(left, before) {
		t.Fatalf("adoption changed moto: %v, before %v", left, before)
	}

	var db struct {
		ID         string `json:"id"`
		Status     string `json:"status"`
		Connection struct {
			Host      string `json:"host"`
			Port      int    `json:"port"`
			User      string `json:"user"`
			Database  string `json:"database"`
			SecretRef string `json:"secretRef"`
		} `json:"connection"`
	}
	base := "/api/provisioning-jobs/" + adopted.ID
	if err := e.s.Client.Do(ctx, http.MethodPost, base+"/databases", map[string]string{"name": "checkout", "owner": "checkout_app"}, &db); err != nil {
		t.Fatalf("create database on the adopted server: %v", err)
	}
	ref := db.Connection.SecretRef
	if db.Status != "ready" || !strings.HasPrefix(ref, "arn:aws:secretsmanager:") {
		t.Fatalf("database %+v; want ready, its owner's password under a Secrets Manager ARN", db)
	}
	desc, err := secretsmanager.NewFromConfig(e.p.Config()).DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: &ref})
	if err != nil || !hasTag(desc, awsp.TagJobID, adopted.ID) {
		t.Fatalf("the owner's secret is not tagged with the adopt job: %+v (%v)", desc, err)
	}
	var revealed struct {
		Value string `json:"value"`
	}
	if err := e.s.Client.Do(ctx, http.MethodPost, "/api/secrets/reveal", map[string]string{"ref": ref}, &revealed); err != nil {
		t.Fatalf("reveal the owner's password: %v", err)
	}
	user := datastore.Conn{Engine: datastore.EnginePostgres, Host: db.Connection.Host, Port: db.Connection.Port,
		User: db.Connection.User, Password: revealed.Value, Database: db.Connection.Database}
	if err := localtest.WriteRead(ctx, user); err != nil {
		t.Fatalf("write and read as the owner, with the password from Secrets Manager: %v", err)
	}

	e.teardown(t, adopted.ID)
	if left := e.leftovers(t, created); !maps.Equal(left, before) {
		t.Fatalf("after teardown of the adopted job moto holds %v; want what it held before, %v", left, before)
	}
	var in datastoreInfra
	if err := json.Unmarshal(created.Infra, &in); err != nil {
		t.Fatal(err)
	}
	out, err := rds.NewFromConfig(e.p.Config()).DescribeDBInstances(ctx, &rds.DescribeDBInstancesInput{DBInstanceIdentifier: &in.Server.ID})
	if err != nil || len(out.DBInstances) != 1 || awssdk.ToString(out.DBInstances[0].DBInstanceStatus) != "available" {
		t.Fatalf("the created job's RDS instance after the adopted job's teardown: %+v (%v)", out, err)
	}
	if !localtest.Alive(own.PID) {
		t.Fatalf("the adopted server (pid %d) is gone after teardown", own.PID)
	}
	if err := datastore.Check(ctx, own.Admin(adminPW)); err != nil {
		t.Fatalf("the adopted server refuses its admin after teardown: %v", err)
	}
	if err := datastore.Check(ctx, user); err != nil {
		t.Fatalf("the database made on the adopted server is gone after teardown: %v", err)
	}

	e.teardown(t, created.ID)
	if left := e.leftovers(t, created); len(left) > 0 {
		t.Fatalf("after teardown of the created job, moto still holds %v", left)
	}
}
