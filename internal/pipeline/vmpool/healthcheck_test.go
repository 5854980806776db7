package vmpool_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// checker is a driver that can change a live pool's health check; it notes the path set.
type checker struct {
	vmpool.Driver
	set    *string
	fields []string
}

func (c checker) HealthCheckFields() []string { return c.fields }

func (c checker) SetHealthCheck(_ context.Context, _ *job.Job, cfg vmpool.Config) error {
	*c.set = cfg.HealthCheckPath
	return nil
}

// A health check path change is planned on a driver that can patch the check (finalize
// re-runs and patches it), and refused by field otherwise: rule provider on a driver that
// cannot, immutable on a pool without a load balancer, separate alongside a roll.
func TestPlanUpdateHealthCheckPath(t *testing.T) {
	t.Parallel()
	var set string
	can := vmpool.New(func(context.Context, *job.Job) (vmpool.Driver, error) {
		return checker{set: &set, fields: []string{"healthCheckPath"}}, nil
	}, time.Millisecond)
	cannot := vmpool.New(func(context.Context, *job.Job) (vmpool.Driver, error) { return nil, nil }, time.Millisecond)
	const (
		lb   = `{"name":"web","instanceType":"e2-small","min":2,"max":2,"createLoadBalancer":true}`
		noLB = `{"name":"web","instanceType":"e2-small","min":2,"max":2}`
	)
	for _, tc := range []struct {
		name       string
		pl         *vmpool.Pipeline
		config     string
		next       string
		field, why string
	}{
		{name: "provider", pl: cannot, config: lb, next: `{"name":"web","instanceType":"e2-small","min":2,"max":2,"createLoadBalancer":true,"healthCheckPath":"/up"}`,
			field: "config.healthCheckPath", why: "provider"},
		{name: "no load balancer", pl: can, config: noLB, next: `{"name":"web","instanceType":"e2-small","min":2,"max":2,"healthCheckPath":"/up"}`,
			field: "config.healthCheckPath", why: "immutable"},
		{name: "with a roll", pl: can, config: lb, next: `{"name":"web","instanceType":"e2-medium","min":2,"max":2,"createLoadBalancer":true,"healthCheckPath":"/up"}`,
			field: "config.healthCheckPath", why: "separate"},
		{name: "port", pl: can, config: lb, next: `{"name":"web","instanceType":"e2-small","min":2,"max":2,"createLoadBalancer":true,"healthCheckPort":8080}`,
			field: "config.healthCheckPort", why: "provider"},
	} {
		j := completedPool(t, tc.pl, tc.config)
		_, err := tc.pl.PlanUpdate(t.Context(), j, pipeline.UpdateRequest{Config: json.RawMessage(tc.next)})
		fe, ok := validation.Fields(err)
		if !ok || len(fe) != 1 || fe[0].Field != tc.field || fe[0].Rule != tc.why {
			t.Errorf("%s: %v, want one field error on %s (%s)", tc.name, err, tc.field, tc.why)
		}
	}

	j := completedPool(t, can, lb)
	plan, err := can.PlanUpdate(t.Context(), j, pipeline.UpdateRequest{Config: json.RawMessage(`{"name":"web","instanceType":"e2-small","min":2,"max":2,"createLoadBalancer":true,"healthCheckPath":"/up"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Rerun) != 1 || plan.Rerun[0] != vmpool.StepFinalize || len(plan.Resources) != 1 || plan.Resources[0].Action != pipeline.ActionInPlace {
		t.Fatalf("plan %+v", plan)
	}
	j.Config, j.Steps = plan.Config, plan.Steps
	steps := can.Steps(j)
	fin := steps[len(steps)-1]
	res, err := fin.Do(t.Context(), &pipeline.Run{Job: j, Step: fin.Name, Attempt: 1})
	if err != nil || res.Outcome != pipeline.OutcomeDone || set != "/up" {
		t.Fatalf("finalize: %+v %v; the driver was given path %q, want /up", res, err, set)
	}
}
