package gcp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
	"github.com/groundworkhq/groundwork/internal/provider/gcp/gcpfake"
)

// An asg pool's VMs step is done only once the group has its autoscaler, with the pool's
// bounds: the group's instances being ready before it is made does not end the step.
func TestVMPoolASGStepMakesTheAutoscaler(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c, cloud := testClient(t)
	j := &job.Job{ID: "job_asgscaler", OrgID: "org_test", SpaceID: "spc_test", Kind: job.KindProvisioning, Family: job.FamilyVMPool,
		Provider: Name, Mode: job.ModeCreate, Config: json.RawMessage(`{"name":"web","instanceType":"e2-small","mode":"asg","min":1,"max":3}`),
		Infra: json.RawMessage(`{}`)}
	pl := vmpool.New(func(context.Context, *job.Job) (vmpool.Driver, error) { return VMPoolDriver{C: c}, nil }, time.Millisecond)
	if err := pl.Validate(ctx, j); err != nil {
		t.Fatal(err)
	}
	all := pl.Steps(j)
	steps := all[:slices.IndexFunc(all, func(s pipeline.Step) bool { return s.Name == vmpool.StepVMs })+1]
	runSteps(ctx, t, j, steps, false, nil)
	as, ok := cloud.Lookup(gcpfake.HostCompute, "projects/"+gcpfake.Project+"/regions/"+c.Region+"/autoscalers/"+name(j, roleMIG))
	if !ok {
		t.Fatal("the VMs step is done and the group has no autoscaler")
	}
	pol, _ := as.Body["autoscalingPolicy"].(map[string]any)
	if pol["minNumReplicas"] != float64(1) || pol["maxNumReplicas"] != float64(3) {
		t.Fatalf("autoscaling policy %v", pol)
	}
	// A resize patches the autoscaler's bounds and the group's size in place.
	if _, err := pl.Resize(ctx, j, 2, 5, 4); err != nil {
		t.Fatal(err)
	}
	mig := "projects/" + gcpfake.Project + "/regions/" + c.Region + "/instanceGroupManagers/" + name(j, roleMIG)
	until(t, ctx, "resize", func() (bool, error) {
		cloud.Tick(gcpfake.HostCompute)
		as, _ := cloud.Lookup(gcpfake.HostCompute, as.Name)
		pol, _ := as.Body["autoscalingPolicy"].(map[string]any)
		m, _ := cloud.Lookup(gcpfake.HostCompute, mig)
		return pol["minNumReplicas"] == float64(2) && pol["maxNumReplicas"] == float64(5) && fmt.Sprint(m.Body["targetSize"]) == "4", nil
	})
	vms, err := (VMPoolDriver{C: c}).EnsureVMs(ctx, j, vmpool.Config{Mode: "asg"}, vmpool.Network{}, vmpool.LaunchTemplate{})
	if err != nil || len(vms) != 4 {
		t.Fatalf("after the resize the group has %d VMs (%v), want 4", len(vms), err)
	}
	runSteps(ctx, t, j, steps, true, nil)
	if _, ok := cloud.Lookup(gcpfake.HostCompute, as.Name); ok {
		t.Fatal("the autoscaler outlives the teardown")
	}
}
