package aws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/elasticache"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/aws-sdk-go-v2/service/rds"
	"github.com/aws/aws-sdk-go-v2/service/route53"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/groundworkhq/groundwork/internal/api"
	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/client"
	"github.com/groundworkhq/groundwork/internal/job"
	awsp "github.com/groundworkhq/groundwork/internal/provider/aws"
	"github.com/groundworkhq/groundwork/internal/provider/kube"
	"github.com/groundworkhq/groundwork/internal/store"
)

var accountSeq atomic.Int64

// newAccount returns a fresh moto account ID, so a test sees only its own resources.
func newAccount() string {
	return fmt.Sprintf("%012d", 200000000000+accountSeq.Add(1)+int64(os.Getpid()%1000)*1000)
}

// env is one server with an AWS space on a fresh moto account, and a provider on the same
// account for the test's own describe calls.
type env struct {
	s     *apptest.Server
	space *store.Space
	p     *awsp.Provider
	role  string // the account's role, assumed by p
	// dataDir is the server's data dir (job store, local secret store), when the test made it.
	dataDir string
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func newEnv(t *testing.T) *env {
	t.Helper()
	endpoint := motoEnv.Endpoint(t)
	dataDir := t.TempDir()
	s := apptest.Start(t, app.Options{DataDir: dataDir, PollInterval: 100 * time.Millisecond,
		Datastores: app.DatastoreOptions{Poll: 100 * time.Millisecond}, AWS: app.AWSOptions{
			Poll: 100 * time.Millisecond,
			// moto runs no command on its instances, so the SSM probe would never see the sentinel.
			Probe: func(*awsp.Provider) awsp.BootstrapProbe { return awsp.FakeBootstrapProbe{AllReady: true} },
		}})
	e := newEnvOn(t, s, endpoint, true)
	e.dataDir = dataDir
	return e
}

// newEnvOn makes the account and space on s. With inAccount the account's config names the
// endpoint; without, the server must find it in AWS_ENDPOINT_URL.
func newEnvOn(t *testing.T, s *apptest.Server, endpoint string, inAccount bool) *env {
	t.Helper()
	return newEnvIn(t, s, endpoint, inAccount, "eu-west-1")
}

// newEnvIn is newEnvOn with a new account and its space in region.
func newEnvIn(t *testing.T, s *apptest.Server, endpoint string, inAccount bool, region string) *env {
	t.Helper()
	ctx := testCtx(t)
	acct := newAccount()
	role := "arn:aws:iam::" + acct + ":role/groundwork"
	var acc store.CloudAccount
	accReq := map[string]any{"name": "moto " + acct, "provider": "aws", "region": region, "authMethod": "assume_role",
		"credentials": map[string]string{"roleArn": role}}
	if inAccount {
		accReq["config"] = map[string]string{"endpoint": endpoint}
	}
	if err := s.Client.Do(ctx, http.MethodPost, "/api/cloud-accounts", accReq, &acc); err != nil {
		t.Fatalf("create cloud account: %v", err)
	}
	var sp store.Space
	if err := s.Client.Do(ctx, http.MethodPost, "/api/spaces", map[string]any{"name": "aws-" + acct, "provider": "aws",
		"region": region, "cloudAccountID": acc.ID}, &sp); err != nil {
		t.Fatalf("create space: %v", err)
	}
	p, err := awsp.Open(ctx, awsp.Account{AuthMethod: awsp.AuthAssumeRole, Region: region, Endpoint: endpoint, RoleARN: role})
	if err != nil {
		t.Fatal(err)
	}
	return &env{s: s, space: &sp, p: p, role: role}
}

func (e *env) create(t *testing.T, kind, config string) *job.Job {
	t.Helper()
	var j job.Job
	if err := e.s.Client.Do(testCtx(t), http.MethodPost, "/api/provisioning-jobs",
		map[string]any{"spaceID": e.space.ID, "kind": kind, "config": json.RawMessage(config)}, &j); err != nil {
		t.Fatalf("create %s job: %v", kind, err)
	}
	return &j
}

func getJob(t *testing.T, c *client.Client, id string) *job.Job {
	t.Helper()
	var j job.Job
	if err := c.Do(testCtx(t), http.MethodGet, "/api/provisioning-jobs/"+id, nil, &j); err != nil {
		t.Fatalf("get job %s: %v", id, err)
	}
	return &j
}

// waitStatus polls the job every 100ms until it reaches want; a failed job ends the test.
func waitStatus(t *testing.T, c *client.Client, id string, want job.Status) *job.Job {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		j := getJob(t, c, id)
		if j.Status == want {
			return j
		}
		if j.Status == job.StatusFailed || time.Now().After(deadline) {
			b, _ := json.MarshalIndent(j, "", " ")
			t.Fatalf("job %s is %s, want %s:\n%s", id, j.Status, want, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *env) teardown(t *testing.T, id string) {
	t.Helper()
	if err := e.s.Client.Do(testCtx(t), http.MethodDelete, "/api/provisioning-jobs/"+id, nil, nil); err != nil {
		t.Fatalf("delete %s: %v", id, err)
	}
	waitStatus(t, e.s.Client, id, job.StatusDeleted)
}

// leftovers counts what is left of the job in moto: EC2 by the job's tags, and the account's
// ECR repositories, load balancers, target groups, hosted zones, EKS clusters, RDS instances
// and subnet groups, ElastiCache clusters, replication groups and subnet groups, and Secrets
// Manager secrets not scheduled for deletion (the account is the test's own).
func (e *env) leftovers(t *testing.T, j *job.Job) map[string]int {
	t.Helper()
	ctx := testCtx(t)
	out, err := e.p.Leftovers(ctx, awsp.JobTags(j))
	if err != nil {
		t.Fatal(err)
	}
	repos, err := ecr.NewFromConfig(e.p.Config()).DescribeRepositories(ctx, &ecr.DescribeRepositoriesInput{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(repos.Repositories); n > 0 {
		out["ecr-repository"] = n
	}
	lbc := elbv2.NewFromConfig(e.p.Config())
	lbs, err := lbc.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(lbs.LoadBalancers); n > 0 {
		out["load-balancer"] = n
	}
	tgs, err := lbc.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tgs.TargetGroups); n > 0 {
		out["target-group"] = n
	}
	zones, err := route53.NewFromConfig(e.p.Config()).ListHostedZones(ctx, &route53.ListHostedZonesInput{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(zones.HostedZones); n > 0 {
		out["hosted-zone"] = n
	}
	clusters, err := eks.NewFromConfig(e.p.Config()).ListClusters(ctx, &eks.ListClustersInput{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(clusters.Clusters); n > 0 {
		out["eks-cluster"] = n
	}
	for kind, n := range e.datastoreLeftovers(t) {
		out[kind] = n
	}
	return out
}

// datastoreLeftovers counts the account's RDS and ElastiCache resources and its live secrets.
func (e *env) datastoreLeftovers(t *testing.T) map[string]int {
	t.Helper()
	ctx := testCtx(t)
	out := map[string]int{}
	add := func(kind string, n int, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("count %s: %v", kind, err)
		}
		if n > 0 {
			out[kind] = n
		}
	}
	rc := rds.NewFromConfig(e.p.Config())
	dbs, err := rc.DescribeDBInstances(ctx, &rds.DescribeDBInstancesInput{})
	add("rds-instance", lenOr(dbs, func(o *rds.DescribeDBInstancesOutput) int { return len(o.DBInstances) }), err)
	sgs, err := rc.DescribeDBSubnetGroups(ctx, &rds.DescribeDBSubnetGroupsInput{})
	add("db-subnet-group", lenOr(sgs, func(o *rds.DescribeDBSubnetGroupsOutput) int { return len(o.DBSubnetGroups) }), err)
	ec := elasticache.NewFromConfig(e.p.Config())
	ccs, err := ec.DescribeCacheClusters(ctx, &elasticache.DescribeCacheClustersInput{})
	add("cache-cluster", lenOr(ccs, func(o *elasticache.DescribeCacheClustersOutput) int { return len(o.CacheClusters) }), err)
	rgs, err := ec.DescribeReplicationGroups(ctx, &elasticache.DescribeReplicationGroupsInput{})
	add("replication-group", lenOr(rgs, func(o *elasticache.DescribeReplicationGroupsOutput) int { return len(o.ReplicationGroups) }), err)
	csg, err := ec.DescribeCacheSubnetGroups(ctx, &elasticache.DescribeCacheSubnetGroupsInput{})
	n := 0
	if err == nil {
		for _, g := range csg.CacheSubnetGroups {
			// Every account has a "default" cache subnet group nobody made.
			if awssdk.ToString(g.CacheSubnetGroupName) != "default" {
				n++
			}
		}
	}
	add("cache-subnet-group", n, err)
	// ListSecrets leaves out secrets scheduled for deletion unless asked; DeletedDate is checked
	// as well so a recoverable secret never counts as gone nor as left.
	secs, err := secretsmanager.NewFromConfig(e.p.Config()).ListSecrets(ctx, &secretsmanager.ListSecretsInput{})
	n = 0
	if err == nil {
		for _, s := range secs.SecretList {
			if s.DeletedDate == nil {
				n++
			}
		}
	}
	add("secret", n, err)
	return out
}

func lenOr[T any](out *T, n func(*T) int) int {
	if out == nil {
		return 0
	}
	return n(out)
}

func stepCounts(j *job.Job) (done, skipped int) {
	for _, s := range j.Steps {
		switch s.Status {
		case job.StepDone:
			done++
		case job.StepSkipped:
			skipped++
		}
	}
	return done, skipped
}

// TestFamiliesCreateAndTeardown: each job completes through the server, made something in
// moto, and DELETE leaves nothing of it.
func TestFamiliesCreateAndTeardown(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		kind, config string
		steps        int
		made         []string // leftovers kinds the job must have made
		// check, if set, judges the completed job further.
		check func(t *testing.T, e *env, j *job.Job)
		// teardown, if set, replaces DELETE-then-nothing-left: moto cannot finish every delete.
		teardown func(t *testing.T, e *env, j *job.Job)
	}{
		"registry":               {kind: "registry", config: `{"name":"team-images"}`, made: []string{"ecr-repository"}},
		"network":                {kind: "network", config: `{"cidr":"10.30.0.0/16"}`, made: []string{"vpc"}},
		"dns_zone":               {kind: "dns_zone", config: `{"domain":"shop.example.com"}`, made: []string{"hosted-zone"}},
		"kubernetes (reference)": {kind: "kubernetes", config: `{"name":"platform-prod","version":"1.30","nodeGroups":[{"name":"default","instanceType":"m5.large","min":2,"max":6}]}`, steps: 0, made: []string{"eks-cluster"}},
		"vm_pool without LB":     {kind: "vm_pool", config: `{"name":"web","instanceType":"t3.micro","min":1,"max":1}`, steps: 7, made: []string{"instance"}},
		"vm_pool with LB (ref.)": {kind: "vm_pool", config: `{"name":"web","instanceType":"t3.micro","min":1,"max":1,"createLoadBalancer":true,"listenerPorts":[80,443]}`, steps: 11, made: []string{"load-balancer"}},
		"datastore postgres (reference)": {kind: "datastore", steps: 7,
			config: `{"engine":"postgres","version":"16.3","instanceClass":"db.t3.medium","allocatedStorageGB":50,"multiAZ":true,"backupRetentionDays":7}`,
			made:   []string{"rds-instance", "db-subnet-group", "secret", "vpc", "subnet"},
			check:  checkDatastore(rdsWant{class: "db.t3.medium", storage: 50, multiAZ: true, backup: 7, version: "16.3"})},
		"datastore mysql": {kind: "datastore", steps: 7,
			config: `{"engine":"mysql","version":"8.0.35","instanceClass":"db.t3.small","allocatedStorageGB":20,"backupRetentionDays":3}`,
			made:   []string{"rds-instance", "db-subnet-group", "secret", "vpc", "subnet"},
			check:  checkDatastore(rdsWant{class: "db.t3.small", storage: 20, backup: 3, version: "8.0.35"})},
		"datastore redis": {kind: "datastore", steps: 7,
			config:   `{"engine":"redis","version":"7.1","instanceClass":"cache.t3.micro","multiAZ":true,"backupRetentionDays":1}`,
			made:     []string{"replication-group", "cache-subnet-group", "secret", "vpc", "subnet"},
			check:    checkDatastore(rdsWant{class: "cache.t3.micro", multiAZ: true, backup: 1, version: "7.1"}),
			teardown: redisTeardownWaits},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			j := e.create(t, tc.kind, tc.config)
			j = waitStatus(t, e.s.Client, j.ID, job.StatusCompleted)
			done, skipped := stepCounts(j)
			if tc.steps > 0 && (len(j.Steps) != tc.steps || done+skipped != tc.steps) {
				t.Fatalf("%d steps (%d done, %d skipped), want %d all completed", len(j.Steps), done, skipped, tc.steps)
			}
			left := e.leftovers(t, j)
			for _, kind := range tc.made {
				if left[kind] == 0 {
					t.Fatalf("after create, moto holds %v; want a %s", left, kind)
				}
			}
			if tc.check != nil {
				tc.check(t, e, j)
			}
			clusterSpace := ""
			if tc.kind == "kubernetes" {
				clusterSpace = checkClusterSpace(t, e, j)
			}
			if tc.teardown != nil {
				tc.teardown(t, e, j)
				return
			}
			e.teardown(t, j.ID)
			if left := e.leftovers(t, j); len(left) > 0 {
				t.Fatalf("after teardown, moto still holds %v", left)
			}
			if clusterSpace != "" {
				var out map[string]any
				err := e.s.Client.Do(t.Context(), "GET", "/api/spaces/"+clusterSpace, nil, &out)
				var apiErr *client.Error
				if !errors.As(err, &apiErr) || apiErr.Status != 404 {
					t.Fatalf("the cluster's space after teardown: %v", err)
				}
			}
		})
	}
}

// TestRefusedOffAWS: an AWS family on a local space is a 400 naming spaceID, not a run-time
// failure.
func TestRefusedOffAWS(t *testing.T) {
	t.Parallel()
	s := apptest.Start(t, app.Options{})
	sp := s.Space(t, "local")
	configs := map[string]string{
		"vm_pool":    `{"name":"web","instanceType":"t3.micro","min":1,"max":1}`,
		"network":    `{"cidr":"10.30.0.0/16"}`,
		"registry":   `{"name":"images"}`,
		"dns_zone":   `{"domain":"example.internal"}`,
		"kubernetes": `{"name":"k","version":"1.30","nodeGroups":[{"name":"default","instanceType":"m5.large","min":1,"max":1}]}`,
	}
	for kind, config := range configs {
		err := s.Client.Do(testCtx(t), http.MethodPost, "/api/provisioning-jobs",
			map[string]any{"spaceID": sp.ID, "kind": kind, "config": json.RawMessage(config)}, nil)
		var ae *client.Error
		if !asClientError(err, &ae) || ae.Status != http.StatusBadRequest || !hasField(ae, "spaceID") {
			t.Errorf("%s on a local space: %v; want 400 naming spaceID", kind, err)
		}
	}
}

func asClientError(err error, out **client.Error) bool { return errors.As(err, out) }

func hasField(e *client.Error, field string) bool {
	for _, f := range e.Errors {
		if f.Field == field {
			return true
		}
	}
	return false
}

// targets counts the instances registered in the pool's target group.
func (e *env) targets(t *testing.T, j *job.Job) int {
	t.Helper()
	var infra struct {
		LB struct {
			TargetGroupID string `json:"targetGroupID"`
		} `json:"loadBalancer"`
	}
	if err := json.Unmarshal(j.Infra, &infra); err != nil || infra.LB.TargetGroupID == "" {
		t.Fatalf("no target group in infra %s (%v)", j.Infra, err)
	}
	out, err := elbv2.NewFromConfig(e.p.Config()).DescribeTargetHealth(testCtx(t),
		&elbv2.DescribeTargetHealthInput{TargetGroupArn: &infra.LB.TargetGroupID})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.TargetHealthDescriptions)
}

func lbAttached(t *testing.T, j *job.Job) bool {
	t.Helper()
	var infra struct {
		Attached bool `json:"lbAttached"`
	}
	if err := json.Unmarshal(j.Infra, &infra); err != nil {
		t.Fatal(err)
	}
	return infra.Attached
}

// TestVMOpsOnLivePool: PATCH {"vmOp"} detaches and re-attaches a live pool's load balancer;
// the step count stays 11, the infra says where the pool stands, and moto's target group
// follows. A pool without a load balancer refuses the operation naming vmOp.
func TestVMOpsOnLivePool(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.create(t, "vm_pool", `{"name":"web","instanceType":"t3.micro","min":2,"max":2,"createLoadBalancer":true}`)
	j = waitStatus(t, e.s.Client, j.ID, job.StatusCompleted)
	if !lbAttached(t, j) || e.targets(t, j) != 2 {
		t.Fatalf("after create: lbAttached=%v, %d targets; want attached, 2", lbAttached(t, j), e.targets(t, j))
	}
	for _, step := range []struct {
		op       string
		attached bool
		targets  int
	}{{"detach_lb", false, 0}, {"attach_lb", true, 2}} {
		var patched job.Job
		if err := e.s.Client.Do(testCtx(t), http.MethodPatch, "/api/provisioning-jobs/"+j.ID,
			map[string]any{"version": j.Version, "vmOp": step.op}, &patched); err != nil {
			t.Fatalf("PATCH vmOp %s: %v", step.op, err)
		}
		// Wait for the engine to pick the operation up and finish it (a version past the PATCH).
		deadline := time.Now().Add(2 * time.Minute)
		for {
			j = getJob(t, e.s.Client, j.ID)
			if j.Status == job.StatusCompleted && j.Version > patched.Version {
				break
			}
			if j.Status == job.StatusFailed || time.Now().After(deadline) {
				t.Fatalf("vmOp %s: job %s (version %d)", step.op, j.Status, j.Version)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if len(j.Steps) != 11 || lbAttached(t, j) != step.attached || e.targets(t, j) != step.targets {
			t.Fatalf("after %s: %d steps, lbAttached=%v, %d targets; want 11, %v, %d",
				step.op, len(j.Steps), lbAttached(t, j), e.targets(t, j), step.attached, step.targets)
		}
	}
	if n := e.auditActions(t, j.ID)["provisioning-job.vm_op"]; n != 2 {
		t.Fatalf("audit: %d provisioning-job.vm_op entries, want 2", n)
	}
	e.teardown(t, j.ID)
	if left := e.leftovers(t, j); len(left) > 0 {
		t.Fatalf("after teardown, moto still holds %v", left)
	}

	bare := e.create(t, "vm_pool", `{"name":"bare","instanceType":"t3.micro","min":1,"max":1}`)
	bare = waitStatus(t, e.s.Client, bare.ID, job.StatusCompleted)
	err := e.s.Client.Do(testCtx(t), http.MethodPatch, "/api/provisioning-jobs/"+bare.ID,
		map[string]any{"version": bare.Version, "vmOp": "attach_lb"}, nil)
	var ae *client.Error
	if !asClientError(err, &ae) || ae.Status != http.StatusBadRequest || !hasField(ae, "vmOp") {
		t.Fatalf("attach_lb on a pool without LB: %v; want 400 naming vmOp", err)
	}
}

// TestResizeASGPool: PATCH {"min","max","desired"} patches a live ASG pool in place (the ASG in
// moto follows, the config records the sizes); a fixed pool and an out-of-range size are 400s.
func TestResizeASGPool(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.create(t, "vm_pool", `{"name":"web","instanceType":"t3.micro","mode":"asg","min":1,"max":2}`)
	j = waitStatus(t, e.s.Client, j.ID, job.StatusCompleted)

	bad := map[string]map[string]any{
		"desired above max": {"version": j.Version, "min": 1, "max": 2, "desired": 5},
		"min above max":     {"version": j.Version, "min": 3, "max": 2},
	}
	for name, body := range bad {
		err := e.s.Client.Do(testCtx(t), http.MethodPatch, "/api/provisioning-jobs/"+j.ID, body, nil)
		var ae *client.Error
		if !asClientError(err, &ae) || ae.Status != http.StatusBadRequest {
			t.Errorf("%s: %v; want 400", name, err)
		}
	}

	var patched job.Job
	if err := e.s.Client.Do(testCtx(t), http.MethodPatch, "/api/provisioning-jobs/"+j.ID,
		map[string]any{"version": j.Version, "min": 1, "max": 3, "desired": 2}, &patched); err != nil {
		t.Fatalf("PATCH resize: %v", err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		j = getJob(t, e.s.Client, j.ID)
		if j.Status == job.StatusCompleted && j.Version > patched.Version {
			break
		}
		if j.Status == job.StatusFailed || time.Now().After(deadline) {
			t.Fatalf("resize: job %s (version %d): %+v", j.Status, j.Version, j.Failure)
		}
		time.Sleep(100 * time.Millisecond)
	}
	out, err := autoscaling.NewFromConfig(e.p.Config()).DescribeAutoScalingGroups(testCtx(t), &autoscaling.DescribeAutoScalingGroupsInput{})
	if err != nil || len(out.AutoScalingGroups) != 1 {
		t.Fatalf("ASGs: %v (%v), want one", out, err)
	}
	g := out.AutoScalingGroups[0]
	if *g.MinSize != 1 || *g.MaxSize != 3 || *g.DesiredCapacity != 2 {
		t.Fatalf("ASG min/max/desired = %d/%d/%d, want 1/3/2", *g.MinSize, *g.MaxSize, *g.DesiredCapacity)
	}
	var cfg struct{ Min, Max, Desired int32 }
	if err := json.Unmarshal(j.Config, &cfg); err != nil || cfg.Min != 1 || cfg.Max != 3 || cfg.Desired != 2 {
		t.Fatalf("config after resize: %s", j.Config)
	}
	if n := e.auditActions(t, j.ID)["provisioning-job.resize"]; n != 1 {
		t.Fatalf("audit: %d provisioning-job.resize entries, want 1 (refused requests are not changes)", n)
	}
	e.teardown(t, j.ID)
	if left := e.leftovers(t, j); len(left) > 0 {
		t.Fatalf("after teardown, moto still holds %v", left)
	}

	fixed := e.create(t, "vm_pool", `{"name":"fixed","instanceType":"t3.micro","min":1,"max":1}`)
	fixed = waitStatus(t, e.s.Client, fixed.ID, job.StatusCompleted)
	err = e.s.Client.Do(testCtx(t), http.MethodPatch, "/api/provisioning-jobs/"+fixed.ID,
		map[string]any{"version": fixed.Version, "max": 2}, nil)
	var ae *client.Error
	if !asClientError(err, &ae) || ae.Status != http.StatusBadRequest || !hasField(ae, "min") {
		t.Fatalf("resize of a fixed pool: %v; want 400 naming min", err)
	}
}

// auditActions counts the audit log's actions on a job (the test's server is its own, so
// one page holds them all).
func (e *env) auditActions(t *testing.T, jobID string) map[string]int {
	t.Helper()
	var page struct {
		Data []struct {
			Action     string `json:"action"`
			ResourceID string `json:"resourceID"`
		} `json:"data"`
	}
	if err := e.s.Client.Do(testCtx(t), http.MethodGet, "/api/audit-logs?limit=100", nil, &page); err != nil {
		t.Fatalf("audit log: %v", err)
	}
	out := map[string]int{}
	for _, en := range page.Data {
		if en.ResourceID == jobID {
			out[en.Action]++
		}
	}
	return out
}

// checkClusterSpace: a created cluster is registered as a space through the same cluster
// record a registered cluster has, holding no credential (tokens are minted per use).
func checkClusterSpace(t *testing.T, e *env, j *job.Job) string {
	t.Helper()
	var infra struct {
		Space struct {
			ID string `json:"id"`
		} `json:"space"`
	}
	if err := json.Unmarshal(j.Infra, &infra); err != nil || infra.Space.ID == "" {
		t.Fatalf("the cluster job recorded no space: %s (%v)", j.Infra, err)
	}
	var sp store.Space
	if err := e.s.Client.Do(t.Context(), "GET", "/api/spaces/"+infra.Space.ID, nil, &sp); err != nil {
		t.Fatalf("the cluster's space: %v", err)
	}
	cl, ok, err := api.SpaceClusterOf(&sp)
	if err != nil || !ok || cl.Auth != kube.AuthCloudToken || cl.CredentialRef != "" || cl.Endpoint == "" ||
		len(cl.CAData) == 0 || sp.SpaceType != "kubernetes" || sp.Provider != "aws" {
		t.Fatalf("the cluster's space: %+v, cluster %+v (%v %v)", sp, cl, ok, err)
	}
	return sp.ID
}

// TestAccountsAndRegionsApart: two spaces on one server, in two accounts and two regions, each
// run a network job; each account's region holds its own job's network and nothing of the
// other's, an account's other region holds nothing, and tearing one down leaves the other.
func TestAccountsAndRegionsApart(t *testing.T) {
	t.Parallel()
	endpoint := motoEnv.Endpoint(t)
	s := apptest.Start(t, app.Options{PollInterval: 100 * time.Millisecond, AWS: app.AWSOptions{Poll: 100 * time.Millisecond}})
	a := newEnvIn(t, s, endpoint, true, "eu-west-1")
	b := newEnvIn(t, s, endpoint, true, "ap-southeast-2")
	ja := a.create(t, "network", `{"cidr":"10.40.0.0/16"}`)
	jb := b.create(t, "network", `{"cidr":"10.40.0.0/16"}`)
	ja = waitStatus(t, s.Client, ja.ID, job.StatusCompleted)
	jb = waitStatus(t, s.Client, jb.ID, job.StatusCompleted)
	if ja.SpaceID == jb.SpaceID {
		t.Fatal("both jobs ran in one space")
	}
	if got := a.leftovers(t, ja); got["vpc"] != 1 {
		t.Fatalf("account a in eu-west-1 holds %v; want its one VPC", got)
	}
	if got := b.leftovers(t, jb); got["vpc"] != 1 {
		t.Fatalf("account b in ap-southeast-2 holds %v; want its one VPC", got)
	}
	// The same account in the other space's region: the job went where its space said.
	other, err := awsp.Open(testCtx(t), awsp.Account{AuthMethod: awsp.AuthAssumeRole, Region: "ap-southeast-2", Endpoint: endpoint, RoleARN: a.role})
	if err != nil {
		t.Fatal(err)
	}
	if got := (&env{s: s, p: other}).leftovers(t, ja); len(got) > 0 {
		t.Fatalf("account a in ap-southeast-2 holds %v; want nothing", got)
	}
	a.teardown(t, ja.ID)
	if got := a.leftovers(t, ja); len(got) > 0 {
		t.Fatalf("after a's teardown, account a holds %v", got)
	}
	if got := b.leftovers(t, jb); got["vpc"] != 1 {
		t.Fatalf("a's teardown touched account b: it holds %v", got)
	}
	b.teardown(t, jb.ID)
	if got := b.leftovers(t, jb); len(got) > 0 {
		t.Fatalf("after b's teardown, account b holds %v", got)
	}
}
