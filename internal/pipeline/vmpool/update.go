package vmpool

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// poolField is one vm_pool config field as a configuration update sees it: how to read it,
// and which of the pool's changes carries it (none: it cannot change in place, and fixed
// says why).
type poolField struct {
	field string
	get   func(Config) any
	// template fields reach the instances through a new launch template version and a roll;
	// size fields through an in-place resize of the ASG; health fields through the driver's
	// HealthChecker, where it has one.
	template, size, health bool
	fixed                  string
}

var poolFields = []poolField{
	{field: "instanceType", get: func(c Config) any { return c.InstanceType }, template: true},
	{field: "imageID", get: func(c Config) any { return c.ImageID }, template: true},
	{field: "bare", get: func(c Config) any { return c.Bare }, template: true},
	{field: "min", get: func(c Config) any { return c.Min }, size: true},
	{field: "max", get: func(c Config) any { return c.Max }, size: true},
	{field: "desired", get: func(c Config) any { return c.Desired }, size: true},
	{field: "scalingPolicy", get: func(c Config) any { return c.ScalingPolicy.CPU() }, size: true},
	{field: "name", get: func(c Config) any { return c.Name }, fixed: "the pool's name is its identity in the cloud"},
	{field: "mode", get: func(c Config) any { return c.Mode }, fixed: "a pool keeps its mode; make a new pool in the other mode"},
	{field: "createLoadBalancer", get: func(c Config) any { return c.CreateLoadBalancer },
		fixed: "attach or detach the load balancer with vmOp attach_lb or detach_lb"},
	{field: "listenerPorts", get: func(c Config) any { return fmt.Sprint(c.ListenerPorts) }, fixed: "the listeners are set when the pool is made"},
	{field: "vpcID", get: func(c Config) any { return c.VPCID }, fixed: "a pool stays in its network"},
	{field: "subnetIDs", get: func(c Config) any { return fmt.Sprint(c.SubnetIDs) }, fixed: "a pool stays in its subnets"},
	{field: "domain", get: func(c Config) any { return c.Domain }, fixed: "the pool's DNS name is set when it is made"},
	{field: "zoneID", get: func(c Config) any { return c.ZoneID }, fixed: "the pool's DNS zone is set when it is made"},
	{field: "certificateArn", get: func(c Config) any { return c.CertificateARN }, fixed: "the listener's certificate is set when the pool is made"},
	{field: "healthCheckPath", get: func(c Config) any { return c.HealthCheckPath }, health: true},
	{field: "healthCheckPort", get: func(c Config) any { return c.HealthCheckPort }, health: true},
	{field: "bootstrapTimeoutMinutes", get: func(c Config) any { return c.BootstrapTimeoutMinutes },
		fixed: "it applies to the pool's first bootstrap; a roll waits for each new instance as the pool did"},
	{field: "waitForBootstrap", get: func(c Config) any { return c.WaitForBootstrap == nil || *c.WaitForBootstrap },
		fixed: "it applies to the pool's first bootstrap; a roll waits for each new instance as the pool did"},
}

// ConfigState implements the config updates' state keys: the pool's last VM operation is its
// own record, not a setting.
func (p *Pipeline) ConfigState() []string { return []string{configVMOp} }

// PlanUpdate plans a configuration update of a live pool (jobs.Updater). An instance type,
// image or cloud-init change is a new launch template version and a rolling replacement of
// every instance, capacity kept healthy (PlanRoll); a size or scaling policy change of an ASG
// pool is patched in place (PlanResize). The two go as separate updates, so that a roll
// never races its group's sizes. Other fields are refused by name.
func (p *Pipeline) PlanUpdate(ctx context.Context, j *job.Job, req pipeline.UpdateRequest) (*pipeline.UpdatePlan, error) {
	cur, err := DecodeConfig(j.Config)
	if err != nil {
		return nil, validation.New("config", "stored", "the job's stored config cannot be read: "+err.Error())
	}
	next, err := DecodeConfig(req.Config)
	if err != nil {
		return nil, validation.New("config", "type", err.Error())
	}
	if next.Mode == "" {
		next.Mode = cur.Mode
	}
	var (
		refused                  validation.Error
		template, size, health   []pipeline.FieldChange
		templateField, sizeField string
	)
	for _, f := range poolFields {
		from, to := f.get(cur), f.get(next)
		if reflect.DeepEqual(from, to) {
			continue
		}
		c := pipeline.FieldChange{Field: f.field, From: from, To: to}
		switch {
		case f.fixed != "":
			refused = append(refused, validation.FieldError{Field: "config." + f.field, Rule: "immutable", Message: f.fixed})
		case f.template:
			template, templateField = append(template, c), f.field
		case f.health:
			health = append(health, c)
		case f.size:
			if cur.Mode != "asg" {
				refused = append(refused, validation.FieldError{Field: "config." + f.field, Rule: "mode",
					Message: "only an ASG pool (mode asg) changes its size in place; a fixed pool keeps its VMs"})
				continue
			}
			size, sizeField = append(size, c), f.field
		}
	}
	if len(template) > 0 && len(size) > 0 {
		refused = append(refused, validation.FieldError{Field: "config." + sizeField, Rule: "separate",
			Message: "change " + templateField + " and the pool's size in separate updates: a roll keeps the size it starts with"})
	}
	if len(health) > 0 {
		fes, err := p.healthRefusals(ctx, j, cur, health, len(template)+len(size) > 0)
		if err != nil {
			return nil, err
		}
		refused = append(refused, fes...)
	}
	if len(refused) > 0 {
		return nil, refused
	}
	out := &pipeline.UpdatePlan{Config: req.Config, Steps: slices.Clone(j.Steps), Rerun: []string{},
		Resources: []pipeline.ResourceChange{{Resource: "vm_pool/" + cur.Name, Action: pipeline.ActionNoOp, Changes: []pipeline.FieldChange{}, Disruption: "none"}}}
	switch {
	case len(template) > 0:
		config, steps, err := p.PlanRoll(j, req.Config)
		if err != nil {
			return nil, err
		}
		out.Config, out.Steps, out.Rerun = config, steps, []string{StepLaunchTemplate, StepFinalize}
		out.Resources = []pipeline.ResourceChange{
			{Resource: "launch-template/" + cur.Name, Action: pipeline.ActionInPlace, Changes: template, Disruption: "none: a new version"},
			{Resource: "instances/" + cur.Name, Action: pipeline.ActionReplace, Changes: template,
				Disruption: "rolling: one instance at a time, a new one healthy before an old one goes"},
		}
	case len(health) > 0:
		config, err := withConfig(&job.Job{Config: req.Config}, func(cfg map[string]any) { cfg[configVMOp] = opHealthCheck })
		if err != nil {
			return nil, err
		}
		steps, err := reopenFinalize(j, "config", fmt.Sprintf("health check %s on port %d", next.HealthCheckPath, next.HealthCheckPort))
		if err != nil {
			return nil, err
		}
		out.Config, out.Steps, out.Rerun = config, steps, []string{StepFinalize}
		out.Resources = []pipeline.ResourceChange{{Resource: "health-check/" + cur.Name, Action: pipeline.ActionInPlace, Changes: health,
			Disruption: "none: instances failing the new path leave the load balancer's rotation"}}
	case len(size) > 0:
		raw, err := withConfig(&job.Job{Config: req.Config}, func(cfg map[string]any) { cfg["mode"] = cur.Mode })
		if err != nil {
			return nil, err
		}
		config, steps, err := p.PlanResize(&job.Job{Config: raw, Steps: j.Steps}, &next.Min, &next.Max, &next.Desired)
		if err != nil {
			return nil, err
		}
		out.Config, out.Steps, out.Rerun = config, steps, []string{StepFinalize}
		out.Resources = []pipeline.ResourceChange{{Resource: "autoscaling-group/" + cur.Name, Action: pipeline.ActionInPlace, Changes: size,
			Disruption: "none; a smaller size ends instances"}}
	}
	return out, nil
}

// healthRefusals are why a health check change cannot go (none when it can): the pool has no
// load balancer, the job's driver cannot change that field of its check in place, or the
// update changes more than the check.
func (p *Pipeline) healthRefusals(ctx context.Context, j *job.Job, cur Config, health []pipeline.FieldChange, more bool) ([]validation.FieldError, error) {
	var out []validation.FieldError
	if !cur.CreateLoadBalancer {
		for _, c := range health {
			out = append(out, validation.FieldError{Field: "config." + c.Field, Rule: "immutable", Message: "the pool has no load balancer, so no health check to change"})
		}
		return out, nil
	}
	d, err := p.load.Resolve(ctx, j)
	if err != nil {
		return nil, err
	}
	var can []string
	if hc, ok := d.(HealthChecker); ok {
		can = hc.HealthCheckFields()
	}
	for _, c := range health {
		if !slices.Contains(can, c.Field) {
			out = append(out, validation.FieldError{Field: "config." + c.Field, Rule: "provider",
				Message: "provider " + j.Provider + " cannot change " + c.Field + " of a live pool's health check in place; the check keeps what the pool was made with"})
		}
	}
	if more && len(out) == 0 {
		out = append(out, validation.FieldError{Field: "config." + health[0].Field, Rule: "separate", Message: "change the health check in an update of its own"})
	}
	return out, nil
}
