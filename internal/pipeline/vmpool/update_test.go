package vmpool_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
	"github.com/groundworkhq/groundwork/internal/validation"
)

func TestPlanUpdate(t *testing.T) {
	t.Parallel()
	// An "aws" job's driver changes the health check's path and port in place; others none.
	pl := vmpool.New(func(_ context.Context, j *job.Job) (vmpool.Driver, error) {
		if j.Provider == "aws" {
			return checker{set: new(string), fields: []string{"healthCheckPath", "healthCheckPort"}}, nil
		}
		return nil, nil
	}, time.Millisecond)
	const (
		fixed = `{"name":"web","instanceType":"t3.micro","min":2,"max":2,"createLoadBalancer":true}`
		asg   = `{"name":"web","instanceType":"t3.micro","mode":"asg","min":1,"max":3,"desired":2}`
	)
	cases := []struct {
		name, config, next string
		provider           string   // the job's provider; "" is aws
		fields             []string // refused fields; nil plans
		rules              []string // the refusals' rules, when the case names them
		rerun              []string
		actions            []pipeline.Action
		vmOp               string
	}{
		{name: "same config", config: fixed, next: fixed, rerun: []string{}, actions: []pipeline.Action{pipeline.ActionNoOp}},
		{name: "instance type rolls the pool", config: fixed,
			next:  `{"name":"web","instanceType":"t3.small","min":2,"max":2,"createLoadBalancer":true}`,
			rerun: []string{vmpool.StepLaunchTemplate, vmpool.StepFinalize}, actions: []pipeline.Action{pipeline.ActionInPlace, pipeline.ActionReplace}, vmOp: vmpool.OpRoll},
		{name: "cloud-init rolls the pool", config: asg,
			next:  `{"name":"web","instanceType":"t3.micro","mode":"asg","min":1,"max":3,"desired":2,"bare":true}`,
			rerun: []string{vmpool.StepLaunchTemplate, vmpool.StepFinalize}, actions: []pipeline.Action{pipeline.ActionInPlace, pipeline.ActionReplace}, vmOp: vmpool.OpRoll},
		{name: "ASG sizes and policy in place", config: asg,
			next:  `{"name":"web","instanceType":"t3.micro","mode":"asg","min":2,"max":5,"desired":3,"scalingPolicy":{"targetCPU":60}}`,
			rerun: []string{vmpool.StepFinalize}, actions: []pipeline.Action{pipeline.ActionInPlace}, vmOp: "resize"},
		{name: "a fixed pool keeps its size", config: fixed,
			next: `{"name":"web","instanceType":"t3.micro","min":3,"max":3,"createLoadBalancer":true}`, fields: []string{"config.min", "config.max", "config.desired"}},
		{name: "template and size together", config: asg,
			next: `{"name":"web","instanceType":"t3.small","mode":"asg","min":1,"max":4,"desired":2}`, fields: []string{"config.max"}},
		{name: "fixed fields", config: fixed,
			next:   `{"name":"api","instanceType":"t3.micro","min":2,"max":2,"healthCheckPath":"/up"}`,
			fields: []string{"config.name", "config.createLoadBalancer", "config.listenerPorts"}},
		{name: "health check in place", config: fixed,
			next:  `{"name":"web","instanceType":"t3.micro","min":2,"max":2,"createLoadBalancer":true,"healthCheckPath":"/up","healthCheckPort":8080}`,
			rerun: []string{vmpool.StepFinalize}, actions: []pipeline.Action{pipeline.ActionInPlace}, vmOp: "health_check"},
		{name: "health check and template together", config: fixed,
			next:   `{"name":"web","instanceType":"t3.small","min":2,"max":2,"createLoadBalancer":true,"healthCheckPath":"/up"}`,
			fields: []string{"config.healthCheckPath"}, rules: []string{"separate"}},
		{name: "health check of a pool without a load balancer", config: asg,
			next:   `{"name":"web","instanceType":"t3.micro","mode":"asg","min":1,"max":3,"desired":2,"healthCheckPort":8080}`,
			fields: []string{"config.healthCheckPort"}, rules: []string{"immutable"}},
		{name: "health check where the driver cannot", config: fixed, provider: "local",
			next:   `{"name":"web","instanceType":"t3.micro","min":2,"max":2,"createLoadBalancer":true,"healthCheckPath":"/up"}`,
			fields: []string{"config.healthCheckPath"}, rules: []string{"provider"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			j := completedPool(t, pl, tc.config)
			j.Provider = "aws"
			if tc.provider != "" {
				j.Provider = tc.provider
			}
			plan, err := pl.PlanUpdate(t.Context(), j, pipeline.UpdateRequest{Config: json.RawMessage(tc.next)})
			if tc.fields != nil {
				fe, ok := validation.Fields(err)
				var got, rules []string
				for _, f := range fe {
					got, rules = append(got, f.Field), append(rules, f.Rule)
				}
				if !ok || !slices.Equal(got, tc.fields) || (tc.rules != nil && !slices.Equal(rules, tc.rules)) {
					t.Fatalf("refusal %v (rules %v); want field errors on %v (rules %v)", err, rules, tc.fields, tc.rules)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(plan.Rerun, tc.rerun) {
				t.Errorf("re-runs %v, want %v", plan.Rerun, tc.rerun)
			}
			var actions []pipeline.Action
			for _, r := range plan.Resources {
				actions = append(actions, r.Action)
			}
			if !slices.Equal(actions, tc.actions) {
				t.Errorf("actions %v, want %v (%+v)", actions, tc.actions, plan.Resources)
			}
			for _, name := range tc.rerun {
				if s := plan.Steps[j.StepIndex(name)]; s.Status != job.StepPending {
					t.Errorf("step %s is %s, want pending", name, s.Status)
				}
			}
			var cfg struct {
				VMOp string `json:"vmOp"`
			}
			_ = json.Unmarshal(plan.Config, &cfg)
			if cfg.VMOp != tc.vmOp {
				t.Errorf("the planned config's vmOp is %q, want %q", cfg.VMOp, tc.vmOp)
			}
		})
	}
}

// TestConfigReadsTheCatalogsCertificateSetting: the catalog's setting is certificateArn, and
// the pool reads it (it was once read under another spelling and silently ignored).
func TestConfigReadsTheCatalogsCertificateSetting(t *testing.T) {
	t.Parallel()
	c, err := vmpool.DecodeConfig(json.RawMessage(`{"name":"p","instanceType":"t3.micro","createLoadBalancer":true,"certificateArn":"arn:aws:acm:eu-west-1:1:certificate/x"}`))
	if err != nil || c.CertificateARN != "arn:aws:acm:eu-west-1:1:certificate/x" {
		t.Fatalf("DecodeConfig: %+v %v; want the certificate read", c, err)
	}
}
