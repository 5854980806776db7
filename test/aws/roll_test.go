package aws

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"

	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/client"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
	awsp "github.com/groundworkhq/groundwork/internal/provider/aws"
	"github.com/groundworkhq/groundwork/internal/testenv/childserver"
)

// TestRollLivePoolThroughCrashes: a pool of 3 behind an ALB gets a new instance type through
// PATCH config, which makes a new launch template version and rolls the pool onto it. The
// server is SIGKILLed three times in the middle of the roll, right after a cloud call and before its
// checkpoint; restarted, it finishes the roll. At every poll of the target group while the roll
// runs, 3 instances are healthy; at the end the 3 instances are all new and of the new type,
// the template has exactly one new version, and nothing is left over after teardown.
func TestRollLivePoolThroughCrashes(t *testing.T) {
	t.Parallel()
	endpoint := motoEnv.Endpoint(t)
	markers := t.TempDir()
	addr := childserver.FreeAddr(t)
	// finalize#1 is the create's; the roll's calls follow, four per replacement (launch,
	// register, deregister, terminate): #2 and #6 launch the first and second new instance,
	// #9 terminates the second old one.
	c := childserver.Start(t, append(os.Environ(), envServe+"=1", envDataDir+"="+t.TempDir(), envAddr+"="+addr,
		envCrashCalls+"=finalize#2,finalize#6,finalize#9", envMarkers+"="+markers, "AWS_ENDPOINT_URL="+endpoint))
	if err := os.WriteFile(filepath.Join(markers, childserver.Armed), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cl := client.New("http://"+addr, childToken)
	c.WaitUp(cl)
	e := newEnvOn(t, &apptest.Server{URL: "http://" + addr, Token: childToken, Client: cl}, endpoint, false)
	ctx := testCtx(t)

	pool := e.create(t, "vm_pool", `{"name":"web","instanceType":"t3.micro","min":3,"max":3,"createLoadBalancer":true,"listenerPorts":[80]}`)
	c.WaitJobs(t, cl, map[string]string{"pool": pool.ID}, job.StatusCompleted, time.Now().Add(3*time.Minute))
	pool = getJob(t, cl, pool.ID)
	before := e.instanceTypes(t, pool)
	if len(before) != 3 || e.healthyTargets(t, pool) != 3 {
		t.Fatalf("after create: instances %v, %d healthy targets; want 3 and 3", before, e.healthyTargets(t, pool))
	}

	// The update: a new instance type, through PATCH config. Its plan answers first (a dry
	// run, nothing changed): a new template version and every instance replaced.
	var cfg map[string]any
	if err := json.Unmarshal(pool.Config, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["instanceType"] = "t3.small"
	var plan struct {
		Resources []struct {
			Resource string `json:"resource"`
			Action   string `json:"action"`
		} `json:"resources"`
		Rerun []string `json:"rerun"`
	}
	if err := cl.Do(ctx, http.MethodPost, "/api/provisioning-jobs/"+pool.ID+"/update-plan", map[string]any{"config": cfg}, &plan); err != nil {
		t.Fatalf("update plan: %v", err)
	}
	if len(plan.Resources) != 2 || plan.Resources[1].Action != "replace" || !slices.Equal(plan.Rerun, []string{vmpool.StepLaunchTemplate, vmpool.StepFinalize}) {
		t.Fatalf("update plan %+v; want the template changed in place and the instances replaced", plan)
	}
	if n := e.ltVersions(t); n != 1 {
		t.Fatalf("the dry run made a template version (%d)", n)
	}
	var patched job.Job
	if err := cl.Do(ctx, http.MethodPatch, "/api/provisioning-jobs/"+pool.ID, map[string]any{"version": pool.Version, "config": cfg}, &patched); err != nil {
		t.Fatalf("PATCH config: %v", err)
	}
	deadline := time.Now().Add(4 * time.Minute)
	minHealthy, polls, restarts := 3, 0, 0
	var progress []string
	for {
		if c.RestartIfDead() {
			restarts++
			c.WaitUp(cl)
		}
		// The target group, polled while the roll runs (and across the crashes).
		if n := e.healthyTargets(t, pool); n < minHealthy {
			minHealthy = n
		}
		polls++
		var j job.Job
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := cl.Do(pctx, http.MethodGet, "/api/provisioning-jobs/"+pool.ID, nil, &j)
		cancel()
		if err == nil {
			if msg := j.Steps[j.StepIndex(vmpool.StepFinalize)].Message; strings.HasPrefix(msg, "replaced ") &&
				(len(progress) == 0 || progress[len(progress)-1] != msg) {
				progress = append(progress, msg)
			}
			if j.Status == job.StatusCompleted && j.Version > patched.Version {
				pool = &j
				break
			}
			if j.Status == job.StatusFailed {
				t.Fatalf("roll failed: %+v", j.Failure)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("roll not done after %d restarts: %v %v", restarts, j.Status, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	crashes, _ := filepath.Glob(filepath.Join(markers, "*.finalize.*.crash"))
	t.Logf("%d polls, %d restarts, crashes %v; progress %v", polls, restarts, crashes, progress)
	if len(crashes) != 3 {
		t.Fatalf("%d crashes in the roll, want 3", len(crashes))
	}
	if minHealthy < 3 {
		t.Fatalf("the target group fell to %d healthy instances during the roll, want 3 at every poll", minHealthy)
	}
	if len(progress) == 0 {
		t.Fatal("no progress message (\"replaced n of 3\") seen on the finalize step")
	}
	if msg := pool.Steps[pool.StepIndex(vmpool.StepFinalize)].Message; !strings.Contains(msg, "replaced 3 of 3") {
		t.Fatalf("finalize message after the roll: %q", msg)
	}

	after := e.instanceTypes(t, pool)
	if len(after) != 3 {
		t.Fatalf("%d instances after the roll, want 3: %v", len(after), after)
	}
	for id, typ := range after {
		if _, old := before[id]; old || typ != "t3.small" {
			t.Fatalf("instance %s (%s) after the roll; want only new t3.small ones (before %v)", id, typ, before)
		}
	}
	if n := e.healthyTargets(t, pool); n != 3 || e.targets(t, pool) != 3 {
		t.Fatalf("target group after the roll: %d healthy of %d, want 3 of 3", n, e.targets(t, pool))
	}
	if n := e.ltVersions(t); n != 2 {
		t.Fatalf("launch template versions: %d, want 2 (exactly one new)", n)
	}
	var got struct {
		VMs []vmpool.VM `json:"vms"`
	}
	if err := json.Unmarshal(pool.Infra, &got); err != nil {
		t.Fatal(err)
	}
	vms := got.VMs
	for _, vm := range vms {
		if _, ok := after[vm.ID]; !ok {
			t.Fatalf("infra lists %s, which is not a live instance (%v)", vm.ID, after)
		}
	}
	if len(vms) != 3 {
		t.Fatalf("infra lists %d VMs, want 3", len(vms))
	}

	e.teardown(t, pool.ID)
	if left := e.leftovers(t, pool); len(left) > 0 {
		t.Fatalf("after teardown, moto still holds %v", left)
	}
}

// TestScalingPolicyResizeAndRollOfASGPool: an ASG pool's scalingPolicy is a target-tracking
// policy in moto's DescribePolicies, kept through a resize (which DescribeAutoScalingGroups
// shows); vmOp roll replaces its instances through the group; teardown removes the policy with
// the group. Bad policies are field errors.
func TestScalingPolicyResizeAndRollOfASGPool(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)

	for name, tc := range map[string]struct{ config, field string }{
		"policy on a fixed pool": {`{"name":"p","instanceType":"t3.micro","min":1,"max":2,"scalingPolicy":{"targetCPU":50}}`, "config.scalingPolicy"},
		"target above 100":       {`{"name":"p","instanceType":"t3.micro","mode":"asg","min":1,"max":2,"scalingPolicy":{"targetCPU":150}}`, "config.scalingPolicy.targetCPU"},
		"target below 1":         {`{"name":"p","instanceType":"t3.micro","mode":"asg","min":1,"max":2,"scalingPolicy":{"targetCPU":0.5}}`, "config.scalingPolicy.targetCPU"},
	} {
		err := e.s.Client.Do(ctx, http.MethodPost, "/api/provisioning-jobs",
			map[string]any{"spaceID": e.space.ID, "kind": "vm_pool", "config": json.RawMessage(tc.config)}, nil)
		var ae *client.Error
		if !asClientError(err, &ae) || ae.Status != http.StatusBadRequest || !hasField(ae, tc.field) {
			t.Errorf("%s: %v; want 400 naming %s", name, err, tc.field)
		}
	}

	j := e.create(t, "vm_pool", `{"name":"web","instanceType":"t3.micro","mode":"asg","min":2,"max":3,"createLoadBalancer":true,"listenerPorts":[80],"scalingPolicy":{"targetCPU":50}}`)
	j = waitStatus(t, e.s.Client, j.ID, job.StatusCompleted)
	e.checkPolicy(t, 50)

	j = e.patchAndWait(t, j, map[string]any{"min": 1, "max": 4, "desired": 3})
	g := e.group(t)
	if *g.MinSize != 1 || *g.MaxSize != 4 || *g.DesiredCapacity != 3 || len(g.Instances) != 3 {
		t.Fatalf("ASG after resize: %d/%d/%d with %d instances; want 1/4/3 with 3", *g.MinSize, *g.MaxSize, *g.DesiredCapacity, len(g.Instances))
	}
	e.checkPolicy(t, 50)

	// moto stores CreateLaunchTemplateVersion's user data unparsed and its groups then fail
	// every launch from that version: the new version here carries none.
	before := e.instanceTypes(t, j)
	e.versionWithoutUserData(t, "t3.small")
	j = e.patchAndWait(t, j, map[string]any{"vmOp": "roll"})
	after := e.instanceTypes(t, j)
	for id, typ := range after {
		if _, old := before[id]; old || typ != "t3.small" {
			t.Fatalf("instance %s (%s) after the roll; want only new t3.small ones (before %v)", id, typ, before)
		}
	}
	g = e.group(t)
	if len(after) != 3 || *g.DesiredCapacity != 3 || *g.MaxSize != 4 || e.healthyTargets(t, j) != 3 {
		t.Fatalf("after the roll: %d instances, ASG desired %d max %d, %d healthy targets; want 3, 3, 4, 3",
			len(after), *g.DesiredCapacity, *g.MaxSize, e.healthyTargets(t, j))
	}
	e.checkPolicy(t, 50)

	e.teardown(t, j.ID)
	if left := e.leftovers(t, j); len(left) > 0 {
		t.Fatalf("after teardown, moto still holds %v", left)
	}
	out, err := autoscaling.NewFromConfig(e.p.Config()).DescribePolicies(ctx, &autoscaling.DescribePoliciesInput{})
	if err != nil || len(out.ScalingPolicies) != 0 {
		t.Fatalf("scaling policies after teardown: %d (%v), want none", len(out.ScalingPolicies), err)
	}
}

// patchAndWait PATCHes the job and waits until the engine has finished what it planned.
func (e *env) patchAndWait(t *testing.T, j *job.Job, body map[string]any) *job.Job {
	t.Helper()
	body["version"] = j.Version
	var patched job.Job
	if err := e.s.Client.Do(testCtx(t), http.MethodPatch, "/api/provisioning-jobs/"+j.ID, body, &patched); err != nil {
		t.Fatalf("PATCH %v: %v", body, err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		j = getJob(t, e.s.Client, j.ID)
		if j.Status == job.StatusCompleted && j.Version > patched.Version {
			return j
		}
		if j.Status == job.StatusFailed || time.Now().After(deadline) {
			t.Fatalf("PATCH %v: job %s (version %d): %+v", body, j.Status, j.Version, j.Failure)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *env) group(t *testing.T) *struct {
	MinSize, MaxSize, DesiredCapacity *int32
	Instances                         []string
} {
	t.Helper()
	out, err := autoscaling.NewFromConfig(e.p.Config()).DescribeAutoScalingGroups(testCtx(t), &autoscaling.DescribeAutoScalingGroupsInput{})
	if err != nil || len(out.AutoScalingGroups) != 1 {
		t.Fatalf("ASGs: %v (%v), want one", out, err)
	}
	g := out.AutoScalingGroups[0]
	res := &struct {
		MinSize, MaxSize, DesiredCapacity *int32
		Instances                         []string
	}{MinSize: g.MinSize, MaxSize: g.MaxSize, DesiredCapacity: g.DesiredCapacity}
	for _, in := range g.Instances {
		res.Instances = append(res.Instances, *in.InstanceId)
	}
	return res
}

// checkPolicy wants exactly one policy in the account: target tracking on average CPU at target.
func (e *env) checkPolicy(t *testing.T, target float64) {
	t.Helper()
	out, err := autoscaling.NewFromConfig(e.p.Config()).DescribePolicies(testCtx(t), &autoscaling.DescribePoliciesInput{})
	if err != nil || len(out.ScalingPolicies) != 1 {
		t.Fatalf("scaling policies: %+v (%v), want one", out, err)
	}
	p := out.ScalingPolicies[0]
	tt := p.TargetTrackingConfiguration
	if *p.PolicyType != "TargetTrackingScaling" || tt == nil || *tt.TargetValue != target ||
		tt.PredefinedMetricSpecification == nil || tt.PredefinedMetricSpecification.PredefinedMetricType != "ASGAverageCPUUtilization" {
		t.Fatalf("scaling policy %+v; want target tracking of ASGAverageCPUUtilization at %v", p, target)
	}
}

// instanceTypes maps the job's live instances to their type.
func (e *env) instanceTypes(t *testing.T, j *job.Job) map[string]string {
	t.Helper()
	vms, err := e.p.ListVMs(testCtx(t), awsp.JobTags(j))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, vm := range vms {
		d, err := ec2.NewFromConfig(e.p.Config()).DescribeInstances(testCtx(t), &ec2.DescribeInstancesInput{InstanceIds: []string{vm.ID}})
		if err != nil {
			t.Fatal(err)
		}
		out[vm.ID] = string(d.Reservations[0].Instances[0].InstanceType)
	}
	return out
}

// healthyTargets counts the healthy targets of the pool's target group.
func (e *env) healthyTargets(t *testing.T, j *job.Job) int {
	t.Helper()
	var infra struct {
		LB struct {
			TargetGroupID string `json:"targetGroupID"`
		} `json:"loadBalancer"`
	}
	if err := json.Unmarshal(j.Infra, &infra); err != nil || infra.LB.TargetGroupID == "" {
		t.Fatalf("no target group in infra %s (%v)", j.Infra, err)
	}
	out, err := elbv2.NewFromConfig(e.p.Config()).DescribeTargetHealth(testCtx(t), &elbv2.DescribeTargetHealthInput{TargetGroupArn: &infra.LB.TargetGroupID})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range out.TargetHealthDescriptions {
		if d.TargetHealth != nil && d.TargetHealth.State == elbtypes.TargetHealthStateEnumHealthy {
			n++
		}
	}
	return n
}

// ltVersions counts the versions of the account's one launch template.
func (e *env) ltVersions(t *testing.T) int {
	t.Helper()
	c := ec2.NewFromConfig(e.p.Config())
	lts, err := c.DescribeLaunchTemplates(testCtx(t), &ec2.DescribeLaunchTemplatesInput{})
	if err != nil || len(lts.LaunchTemplates) != 1 {
		t.Fatalf("launch templates: %v (%v), want one", lts, err)
	}
	vs, err := c.DescribeLaunchTemplateVersions(testCtx(t), &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: lts.LaunchTemplates[0].LaunchTemplateId})
	if err != nil {
		t.Fatal(err)
	}
	return len(vs.LaunchTemplateVersions)
}

// versionWithoutUserData adds a version of typ to the account's launch template and makes it
// the default.
func (e *env) versionWithoutUserData(t *testing.T, typ string) {
	t.Helper()
	ctx := testCtx(t)
	c := ec2.NewFromConfig(e.p.Config())
	lts, err := c.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{})
	if err != nil || len(lts.LaunchTemplates) != 1 {
		t.Fatalf("launch templates: %v (%v), want one", lts, err)
	}
	id := lts.LaunchTemplates[0].LaunchTemplateId
	v1, err := c.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: id, Versions: []string{"$Default"}})
	if err != nil || len(v1.LaunchTemplateVersions) == 0 {
		t.Fatalf("default version: %v", err)
	}
	nv, err := c.CreateLaunchTemplateVersion(ctx, &ec2.CreateLaunchTemplateVersionInput{LaunchTemplateId: id,
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: v1.LaunchTemplateVersions[0].LaunchTemplateData.ImageId, InstanceType: ec2types.InstanceType(typ)}})
	if err != nil {
		t.Fatal(err)
	}
	v := fmt.Sprint(*nv.LaunchTemplateVersion.VersionNumber)
	if _, err := c.ModifyLaunchTemplate(ctx, &ec2.ModifyLaunchTemplateInput{LaunchTemplateId: id, DefaultVersion: &v}); err != nil {
		t.Fatal(err)
	}
}
