package vmpool_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// completedPool is a completed fixed pool's job laid out by the pipeline.
func completedPool(t *testing.T, pl *vmpool.Pipeline, config string) *job.Job {
	t.Helper()
	j := &job.Job{ID: "job_1", Family: job.FamilyVMPool, Config: json.RawMessage(config), Infra: json.RawMessage(`{}`)}
	for _, s := range pl.Steps(j) {
		j.Steps = append(j.Steps, job.StepRecord{Name: s.Name, Status: job.StepDone})
	}
	return j
}

func TestPlanRoll(t *testing.T) {
	t.Parallel()
	pl := vmpool.New(func(context.Context, *job.Job) (vmpool.Driver, error) { return nil, nil }, time.Millisecond)
	const fixed = `{"name":"web","instanceType":"t3.micro","min":2,"max":2}`
	cases := []struct {
		name      string
		config    string
		newConfig string // "" plans vmOp roll on the config as it is
		field     string // a refusal's field; "" plans
		reopened  []string
		wantType  string
	}{
		{name: "vmOp roll, no load balancer needed", config: fixed, reopened: []string{vmpool.StepFinalize}, wantType: "t3.micro"},
		{name: "new instance type", config: fixed, newConfig: `{"name":"web","instanceType":"t3.small","min":2,"max":2}`,
			reopened: []string{vmpool.StepLaunchTemplate, vmpool.StepFinalize}, wantType: "t3.small"},
		{name: "mode change", config: fixed, newConfig: `{"name":"web","instanceType":"t3.small","mode":"asg","min":2,"max":2}`, field: "config.mode"},
		{name: "load balancer change", config: fixed, newConfig: `{"name":"web","instanceType":"t3.small","min":2,"max":2,"createLoadBalancer":true}`, field: "config.createLoadBalancer"},
		{name: "scaling policy on a fixed pool", config: fixed, newConfig: `{"name":"web","instanceType":"t3.small","min":2,"max":2,"scalingPolicy":{"targetCPU":50}}`, field: "config.scalingPolicy"},
		{name: "bad target", config: `{"name":"web","instanceType":"t3.micro","mode":"asg","min":2,"max":2}`,
			newConfig: `{"name":"web","instanceType":"t3.small","mode":"asg","min":2,"max":2,"scalingPolicy":{"targetCPU":101}}`, field: "config.scalingPolicy.targetCPU"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			j := completedPool(t, pl, tc.config)
			var next json.RawMessage
			if tc.newConfig != "" {
				next = json.RawMessage(tc.newConfig)
			}
			var cfg json.RawMessage
			var steps []job.StepRecord
			var err error
			if next == nil {
				cfg, steps, err = pl.PlanVMOp(j, vmpool.OpRoll)
			} else {
				cfg, steps, err = pl.PlanRoll(j, next)
			}
			if tc.field != "" {
				f, ok := validation.Fields(err)
				if !ok || len(f) != 1 || f[0].Field != tc.field {
					t.Fatalf("refusal %v, want a field error on %s", err, tc.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				VMOp, InstanceType string
			}
			if err := json.Unmarshal(cfg, &got); err != nil || got.VMOp != vmpool.OpRoll || got.InstanceType != tc.wantType {
				t.Fatalf("planned config %s (%v)", cfg, err)
			}
			var pending []string
			for _, s := range steps {
				if s.Status == job.StepPending {
					pending = append(pending, s.Name)
				}
			}
			if len(pending) != len(tc.reopened) {
				t.Fatalf("reopened %v, want %v", pending, tc.reopened)
			}
			for i := range pending {
				if pending[i] != tc.reopened[i] {
					t.Fatalf("reopened %v, want %v", pending, tc.reopened)
				}
			}
		})
	}
}

func TestCheckOp(t *testing.T) {
	t.Parallel()
	for op, ok := range map[string]bool{vmpool.OpAttachLB: true, vmpool.OpDetachLB: true, vmpool.OpRoll: true, "reboot": false, "": false} {
		if err := vmpool.CheckOp(op); (err == nil) != ok {
			t.Errorf("CheckOp(%q) = %v", op, err)
		}
	}
}
