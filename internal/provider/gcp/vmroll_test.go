package gcp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
	"github.com/groundworkhq/groundwork/internal/provider/gcp/gcpfake"
)

// rollPipeline is the vm_pool pipeline on a client opened afresh on cloud, as a restarted
// server opens one.
func rollPipeline(t *testing.T, cloud *gcpfake.Cloud) *vmpool.Pipeline {
	c := clientOn(t, cloud)
	return vmpool.New(func(context.Context, *job.Job) (vmpool.Driver, error) { return VMPoolDriver{C: c}, nil }, time.Millisecond)
}

// createPool runs a pool's creation through the pipeline and marks its steps done.
func createPool(ctx context.Context, t *testing.T, cloud *gcpfake.Cloud, id, config string) *job.Job {
	t.Helper()
	j := &job.Job{ID: id, OrgID: "org_test", SpaceID: "spc_test", Kind: job.KindProvisioning, Family: job.FamilyVMPool,
		Provider: Name, Mode: job.ModeCreate, Config: json.RawMessage(config), Infra: json.RawMessage(`{}`)}
	pl := rollPipeline(t, cloud)
	if err := pl.Validate(ctx, j); err != nil {
		t.Fatal(err)
	}
	steps := pl.Steps(j)
	runSteps(ctx, t, j, steps, false, nil)
	for _, s := range steps {
		j.Steps = append(j.Steps, job.StepRecord{Name: s.Name, Status: job.StepDone})
	}
	return j
}

// applyUpdate plans next on j and takes the plan's config and steps, as an accepted PATCH does.
func applyUpdate(t *testing.T, cloud *gcpfake.Cloud, j *job.Job, next string) *pipeline.UpdatePlan {
	t.Helper()
	plan, err := rollPipeline(t, cloud).PlanUpdate(t.Context(), j, pipeline.UpdateRequest{Config: json.RawMessage(next)})
	if err != nil {
		t.Fatal(err)
	}
	j.Config, j.Steps = plan.Config, plan.Steps
	return plan
}

// runPending runs j's pending steps in order, each call on a pipeline opened afresh; a call
// whose result is thrown away first (every other one) plays a server killed before it
// recorded the call. between runs after every call.
func runPending(ctx context.Context, t *testing.T, cloud *gcpfake.Cloud, j *job.Job, between func()) {
	t.Helper()
	calls := 0
	for i, rec := range j.Steps {
		if rec.Status != job.StepPending {
			continue
		}
		for {
			pl := rollPipeline(t, cloud)
			step := pl.Steps(j)[i]
			run := &pipeline.Run{Job: j, Step: step.Name, Attempt: 1}
			calls++
			if calls%2 == 0 {
				if _, err := step.Do(ctx, run); err != nil {
					t.Fatalf("%s (lost call): %v", step.Name, err)
				}
			}
			res, err := step.Do(ctx, run)
			if err != nil {
				t.Fatalf("%s: %v", step.Name, err)
			}
			if j.Infra, err = pipeline.MergeInfra(j.Infra, res.Infra); err != nil {
				t.Fatal(err)
			}
			if between != nil {
				between()
			}
			if res.Outcome != pipeline.OutcomeWait {
				j.Steps[i].Status = job.StepDone
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("%s: still waiting at the deadline (%s)", step.Name, res.Message)
			}
		}
	}
}

// poolState is what the fake holds of a job's pool: its templates, and its instances with
// the template each was made from.
func poolState(cloud *gcpfake.Cloud, j *job.Job) (templates []string, instances map[string]string) {
	instances = map[string]string{}
	for _, r := range cloud.Resources() {
		n, _ := r.Body["name"].(string)
		switch r.Kind {
		case "compute#instanceTemplate":
			if strings.HasPrefix(n, name(j, roleTemplate)) {
				templates = append(templates, n)
			}
		case "compute#instance":
			if strings.HasPrefix(n, name(j, roleVMs)) {
				src, _ := r.Body["sourceInstanceTemplate"].(string)
				instances[n] = lastSegment(src)
			}
		}
	}
	slices.Sort(templates)
	return templates, instances
}

// A fixed pool of three behind the load balancer rolls onto a new machine type: the backend
// service never reports fewer than three healthy instances, one template is made, every
// instance ends on it, and the old template goes. Every call runs on a client opened afresh
// and every other call is made twice (a server killed before it recorded the first): no
// instance or template is made twice.
func TestVMPoolRollFixedBehindTheLoadBalancer(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c, cloud := testClient(t)
	const before = `{"name":"web","instanceType":"e2-small","min":3,"max":3,"createLoadBalancer":true,"listenerPorts":[80]}`
	j := createPool(ctx, t, cloud, "job_rollfixed", before)
	oldTemplates, oldInstances := poolState(cloud, j)
	if len(oldTemplates) != 1 || len(oldInstances) != 3 {
		t.Fatalf("the pool was made with templates %v and instances %v", oldTemplates, oldInstances)
	}
	mark := len(cloud.Made())
	plan := applyUpdate(t, cloud, j, strings.Replace(before, "e2-small", "e2-medium", 1))
	if !slices.Equal(plan.Rerun, []string{vmpool.StepLaunchTemplate, vmpool.StepFinalize}) {
		t.Fatalf("re-runs %v", plan.Rerun)
	}
	d := VMPoolDriver{C: c}
	s, err := c.computeService(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := vmpool.DecodeConfig(j.Config)
	group := d.poolGroup(j, cfg)
	templatesSeen, instancesSeen := map[string]bool{}, map[string]bool{}
	minHealthy, polls := 99, 0
	runPending(ctx, t, cloud, j, func() {
		h, err := d.groupHealth(ctx, s, j, group)
		if err != nil {
			t.Fatal(err)
		}
		healthy := 0
		for _, st := range h {
			if st == "HEALTHY" {
				healthy++
			}
		}
		minHealthy, polls = min(minHealthy, healthy), polls+1
		ts, ins := poolState(cloud, j)
		for _, n := range ts {
			templatesSeen[n] = true
		}
		for n := range ins {
			instancesSeen[n] = true
		}
		if len(ins) > 4 {
			t.Fatalf("the pool runs %d instances mid-roll: %v", len(ins), ins)
		}
	})
	if minHealthy < 3 {
		t.Fatalf("the backend service reported %d healthy instances at one of %d polls, want never fewer than 3", minHealthy, polls)
	}
	templates, instances := poolState(cloud, j)
	want, _ := templateName(j, cfg)
	if !slices.Equal(templates, []string{want}) {
		t.Fatalf("templates after the roll %v, want only %s", templates, want)
	}
	if len(templatesSeen) != 2 {
		t.Fatalf("templates seen during the roll %v, want the old and one new", templatesSeen)
	}
	if len(instances) != 3 {
		t.Fatalf("instances after the roll %v", instances)
	}
	for n, tmpl := range instances {
		if tmpl != want {
			t.Errorf("instance %s is on %s, want %s", n, tmpl, want)
		}
	}
	if len(instancesSeen) != 6 {
		t.Fatalf("instances seen during the roll %v, want the three old and three new", instancesSeen)
	}
	made := map[string]int{}
	for _, full := range cloud.Made()[mark:] {
		made[lastSegment(full)]++
	}
	if len(made) != 4 || made[want] != 1 {
		t.Fatalf("the roll made %v, want the template and three instances, each once", made)
	}
	for n, k := range made {
		if k != 1 || n != want && instances[n] != want {
			t.Errorf("the roll made %s %d times (or it is not the pool's now)", n, k)
		}
	}
	h, err := d.groupHealth(ctx, s, j, group)
	if err != nil {
		t.Fatal(err)
	}
	for n := range instances {
		if h[selfLink("projects/"+gcpfake.Project+"/zones/"+c.Zone()+"/instances/"+n)] != "HEALTHY" {
			t.Errorf("instance %s is not healthy in the backend service: %v", n, h)
		}
	}
	var vms []vmpool.VM
	if _, err := (&pipeline.Run{Job: j}).Infra(vmpool.InfraVMs, &vms); err != nil || len(vms) != 3 {
		t.Fatalf("the job records VMs %v (%v)", vms, err)
	}
	for _, v := range vms {
		if _, n, _ := parseVMID(v.ID); instances[n] == "" || v.State != "ready" {
			t.Errorf("recorded VM %+v is not a ready instance of the pool", v)
		}
	}

	// The teardown deletes every template and instance of the job.
	runSteps(ctx, t, j, rollPipeline(t, cloud).Steps(j), true, nil)
	if ts, ins := poolState(cloud, j); len(ts) != 0 || len(ins) != 0 {
		t.Fatalf("the teardown left templates %v and instances %v", ts, ins)
	}
}

// An asg pool rolls through its group: the group gets the new template with a proactive
// update policy (a surge, none unavailable), keeps its target size while Google replaces its
// instances, and the roll ends once the group reports its version reached and itself
// stable. A scalingPolicy then changes the autoscaler's CPU target in place.
func TestVMPoolRollManagedGroup(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	_, cloud := testClient(t)
	const before = `{"name":"api","instanceType":"e2-small","mode":"asg","min":2,"max":4,"desired":3,"createLoadBalancer":true,"listenerPorts":[80]}`
	j := createPool(ctx, t, cloud, "job_rollmig", before)
	applyUpdate(t, cloud, j, strings.Replace(before, `"e2-small"`, `"e2-standard-2","bare":true`, 1))
	cfg, _ := vmpool.DecodeConfig(j.Config)
	want, _ := templateName(j, cfg)
	migName := "projects/" + gcpfake.Project + "/regions/europe-west1/instanceGroupManagers/" + name(j, roleMIG)
	runPending(ctx, t, cloud, j, func() {
		if _, ins := poolState(cloud, j); len(ins) < 3 {
			t.Fatalf("the group runs %d instances mid-roll, want never fewer than its size 3: %v", len(ins), ins)
		}
	})
	mig, _ := cloud.Lookup(gcpfake.HostCompute, migName)
	pol, _ := mig.Body["updatePolicy"].(map[string]any)
	surge, _ := pol["maxSurge"].(map[string]any)
	unavailable, _ := pol["maxUnavailable"].(map[string]any)
	if _, sent := unavailable["fixed"]; pol["type"] != "PROACTIVE" || toFloat(surge["fixed"]) < 1 || !sent || toFloat(unavailable["fixed"]) != 0 {
		t.Fatalf("update policy %v", pol)
	}
	templates, instances := poolState(cloud, j)
	if !slices.Equal(templates, []string{want}) || len(instances) != 3 {
		t.Fatalf("after the roll: templates %v, instances %v", templates, instances)
	}
	for n, tmpl := range instances {
		if tmpl != want {
			t.Errorf("instance %s is on %s, want %s", n, tmpl, want)
		}
	}
	st, _ := mig.Body["status"].(map[string]any)
	if st["isStable"] != true {
		t.Fatalf("group status %v after the roll", st)
	}

	// The scaling policy and the size go through a config update too, in place.
	plan := applyUpdate(t, cloud, j, strings.Replace(string(j.Config), `"desired":3`, `"desired":4,"scalingPolicy":{"targetCPU":45}`, 1))
	if !slices.Equal(plan.Rerun, []string{vmpool.StepFinalize}) {
		t.Fatalf("re-runs %v", plan.Rerun)
	}
	runPending(ctx, t, cloud, j, nil)
	as := "projects/" + gcpfake.Project + "/regions/europe-west1/autoscalers/" + name(j, roleMIG)
	until(t, ctx, "the autoscaler's CPU target and the group's size", func() (bool, error) {
		cloud.Tick(gcpfake.HostCompute)
		a, _ := cloud.Lookup(gcpfake.HostCompute, as)
		p, _ := a.Body["autoscalingPolicy"].(map[string]any)
		cpu, _ := p["cpuUtilization"].(map[string]any)
		m, _ := cloud.Lookup(gcpfake.HostCompute, migName)
		return toFloat(cpu["utilizationTarget"]) == 0.45 && fmt.Sprint(m.Body["targetSize"]) == "4", nil
	})
}

func toFloat(v any) float64 {
	f, _ := v.(float64)
	return f
}

// What a roll and a resize call is in the plan of the steps they re-run, once the config
// names the operation (vmOp): the finalize step of a pool being created plans none of it.
func TestPlanListsPoolUpdates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, config, next string
	}{
		{"fixed roll", `{"name":"web","instanceType":"e2-small","min":2,"max":2,"createLoadBalancer":true,"listenerPorts":[80]}`,
			`{"name":"web","instanceType":"e2-medium","min":2,"max":2,"createLoadBalancer":true,"listenerPorts":[80]}`},
		{"asg roll", `{"name":"api","instanceType":"e2-small","mode":"asg","min":1,"max":3,"desired":2,"createLoadBalancer":true,"listenerPorts":[80]}`,
			`{"name":"api","instanceType":"e2-small","mode":"asg","min":1,"max":3,"desired":2,"createLoadBalancer":true,"listenerPorts":[80],"bare":true}`},
		{"health check path", `{"name":"web","instanceType":"e2-small","min":1,"max":1,"createLoadBalancer":true,"listenerPorts":[80]}`,
			`{"name":"web","instanceType":"e2-small","min":1,"max":1,"createLoadBalancer":true,"listenerPorts":[80],"healthCheckPath":"/ready"}`},
		{"asg resize", `{"name":"api","instanceType":"e2-small","mode":"asg","min":1,"max":3,"desired":2}`,
			`{"name":"api","instanceType":"e2-small","mode":"asg","min":1,"max":5,"desired":3,"scalingPolicy":{"targetCPU":70}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			_, cloud := testClient(t)
			j := createPool(ctx, t, cloud, "job_planupd"+strings.ReplaceAll(tc.name, " ", ""), tc.config)
			if ops := StepPlan(j, vmpool.StepFinalize, PlanAccount{}).Operations; len(ops) != 0 {
				t.Fatalf("the finalize step of a pool being made plans %v", ops)
			}
			plan := applyUpdate(t, cloud, j, tc.next)
			var planned []string
			for _, s := range plan.Rerun {
				planned = append(planned, StepPlan(j, s, PlanAccount{}).Operations...)
			}
			mark := cloud.Mark()
			runPending(ctx, t, cloud, j, nil)
			seen := cloud.PermissionsSince(mark)
			if len(seen) == 0 {
				t.Fatal("the update called nothing")
			}
			for _, pm := range seen {
				if !slices.Contains(planned, pm) {
					t.Errorf("%s needed by the update but not in the plan of %v", pm, plan.Rerun)
				}
			}
		})
	}
}

// A health check path changed by a config update is patched on the pool's health check, in
// place: the same check, its port kept, the new path.
func TestVMPoolHealthCheckPathInPlace(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	_, cloud := testClient(t)
	const before = `{"name":"web","instanceType":"e2-small","min":1,"max":1,"createLoadBalancer":true,"listenerPorts":[80],"healthCheckPort":8080}`
	j := createPool(ctx, t, cloud, "job_hcpath", before)
	hcName := "projects/" + gcpfake.Project + "/global/healthChecks/" + name(j, roleHealth)
	old, _ := cloud.Lookup(gcpfake.HostCompute, hcName)
	plan := applyUpdate(t, cloud, j, strings.Replace(before, `"healthCheckPort"`, `"healthCheckPath":"/ready","healthCheckPort"`, 1))
	if !slices.Equal(plan.Rerun, []string{vmpool.StepFinalize}) {
		t.Fatalf("re-runs %v", plan.Rerun)
	}
	runPending(ctx, t, cloud, j, nil)
	hc, ok := cloud.Lookup(gcpfake.HostCompute, hcName)
	check, _ := hc.Body["httpHealthCheck"].(map[string]any)
	if !ok || hc.Body["id"] != old.Body["id"] || check["requestPath"] != "/ready" || toFloat(check["port"]) != 8080 {
		t.Fatalf("health check after the update: %v (before: %v)", hc.Body, old.Body)
	}
}
