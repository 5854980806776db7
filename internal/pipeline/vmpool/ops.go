package vmpool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/steps"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// VM operations on a completed pool (PATCH /api/provisioning-jobs/{id} {"vmOp": ...}).
const (
	OpAttachLB = "attach_lb"
	OpDetachLB = "detach_lb"
	// opResize is the config's vmOp while a resize is pending (PATCH {"min","max","desired"}).
	opResize = "resize"
	// configVMOp is the config key holding the last requested VM operation.
	configVMOp = "vmOp"
)

// CheckOp refuses a vmOp that is not one of the pool's operations. It is the one place the
// list of operations is judged; the API and the finalize step both ask it.
func CheckOp(op string) error {
	if op != OpAttachLB && op != OpDetachLB && op != OpRoll {
		return validation.New("vmOp", "enum", "must be "+OpAttachLB+", "+OpDetachLB+" or "+OpRoll)
	}
	return nil
}

// Operator plans the VM operations of a completed pool. A plan is the job's new config and
// step records, which the engine then runs like any pending steps: the operation is durable,
// leased and retried like any step, and survives a restart. Refusals are validation.Error.
type Operator interface {
	// PlanVMOp plans attach_lb, detach_lb or roll.
	PlanVMOp(j *job.Job, op string) (config json.RawMessage, steps []job.StepRecord, err error)
	// PlanResize plans an in-place resize of an ASG pool; a nil size keeps the current one.
	PlanResize(j *job.Job, min, max, desired *int32) (config json.RawMessage, steps []job.StepRecord, err error)
}

var _ Operator = (*Pipeline)(nil)

// PlanVMOp implements Operator: the operation goes into the config and finalize is re-opened;
// its Do then applies it (see finalize).
func (p *Pipeline) PlanVMOp(j *job.Job, op string) (json.RawMessage, []job.StepRecord, error) {
	if err := CheckOp(op); err != nil {
		return nil, nil, err
	}
	if op == OpRoll {
		return p.PlanRoll(j, nil)
	}
	var lb LoadBalancer
	if ok, err := (&pipeline.Run{Job: j}).Infra(InfraLoadBalancer, &lb); err != nil || !ok || lb.TargetGroupID == "" {
		return nil, nil, validation.New("vmOp", "loadBalancer", "the pool has no load balancer; create it with createLoadBalancer: true")
	}
	out, err := withConfig(j, func(cfg map[string]any) { cfg[configVMOp] = op })
	if err != nil {
		return nil, nil, err
	}
	steps, err := reopenFinalize(j, "vmOp", "vmOp "+op)
	return out, steps, err
}

// PlanResize implements Operator: the new sizes go into the config (an ASG pool only), and
// finalize, re-opened, patches the ASG in place.
func (p *Pipeline) PlanResize(j *job.Job, min, max, desired *int32) (json.RawMessage, []job.StepRecord, error) {
	c, err := DecodeConfig(j.Config)
	if err != nil {
		return nil, nil, validation.New("config", "type", err.Error())
	}
	if c.Mode != "asg" {
		return nil, nil, validation.New("min", "mode", "only an ASG pool (mode asg) resizes in place; this one is "+c.Mode)
	}
	if min != nil {
		c.Min = *min
	}
	if max != nil {
		c.Max = *max
	}
	if desired != nil {
		c.Desired = *desired
	}
	if err := c.Validate(); err != nil {
		return nil, nil, validation.New("desired", "range", err.Error())
	}
	out, err := withConfig(j, func(cfg map[string]any) {
		cfg["min"], cfg["max"], cfg["desired"], cfg[configVMOp] = c.Min, c.Max, c.Desired, opResize
	})
	if err != nil {
		return nil, nil, err
	}
	steps, err := reopenFinalize(j, "min", fmt.Sprintf("resize to min %d, max %d, desired %d", c.Min, c.Max, c.Desired))
	return out, steps, err
}

// withConfig returns j's config object changed by set.
func withConfig(j *job.Job, set func(map[string]any)) (json.RawMessage, error) {
	var cfg map[string]any
	if err := json.Unmarshal(j.Config, &cfg); err != nil || cfg == nil {
		return nil, validation.New("config", "type", "the job's config is not an object")
	}
	set(cfg)
	return json.Marshal(cfg)
}

// reopenFinalize returns j's step records with finalize pending again; field names the
// request field a refusal is charged to.
func reopenFinalize(j *job.Job, field, message string) ([]job.StepRecord, error) {
	i := j.StepIndex(StepFinalize)
	if i < 0 {
		return nil, validation.New(field, "steps", "the job has no finalize step")
	}
	out := slices.Clone(j.Steps)
	out[i] = job.StepRecord{Name: StepFinalize, Status: job.StepPending, Message: message}
	return out, nil
}

// finalize is the last step: nothing to do at creation; after a planned operation it applies
// the operation the config names.
func (p *Pipeline) finalize(j *job.Job) pipeline.Step {
	var cfg struct {
		VMOp string `json:"vmOp"`
	}
	if json.Unmarshal(j.Config, &cfg) != nil || cfg.VMOp == "" {
		return steps.Finalize(StepFinalize)
	}
	if cfg.VMOp == OpRoll {
		return pipeline.Step{Name: StepFinalize, Do: p.roll}
	}
	if cfg.VMOp == opHealthCheck {
		return pipeline.Step{Name: StepFinalize, Do: p.healthCheck}
	}
	return pipeline.Step{Name: StepFinalize, Do: func(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
		if cfg.VMOp == opResize {
			c, err := DecodeConfig(r.Job.Config)
			if err != nil {
				return pipeline.Result{}, fault.UserAction(err, "InvalidConfig", err.Error(), "")
			}
			if _, err := p.Resize(ctx, r.Job, c.Min, c.Max, c.Desired); err != nil {
				return pipeline.Result{}, err
			}
			res := pipeline.Done(nil)
			res.Message = fmt.Sprintf("resized to min %d, max %d, desired %d", c.Min, c.Max, c.Desired)
			return res, nil
		}
		patch, err := p.VMOp(ctx, r.Job, cfg.VMOp)
		if err != nil {
			return pipeline.Result{}, err
		}
		res := pipeline.Done(patch)
		res.Message = "vmOp " + cfg.VMOp + " applied"
		return res, nil
	}}
}

// VMOp runs attach_lb or detach_lb on a live pool (a roll is a step of its own: see roll) and returns the infra patch to store.
func (p *Pipeline) VMOp(ctx context.Context, j *job.Job, op string) (map[string]any, error) {
	if err := CheckOp(op); err != nil || op == OpRoll {
		return nil, fault.UserAction(fmt.Errorf("vmOp %q is not attach_lb or detach_lb", op), "InvalidVMOp", "Use attach_lb or detach_lb.", "")
	}
	c, err := DecodeConfig(j.Config)
	if err != nil {
		return nil, fault.UserAction(err, "InvalidConfig", err.Error(), "")
	}
	r := &pipeline.Run{Job: j}
	var lb LoadBalancer
	if ok, err := r.Infra(InfraLoadBalancer, &lb); err != nil || !ok || lb.TargetGroupID == "" {
		return nil, fault.UserAction(errors.New("the pool has no load balancer"), "NoLoadBalancer", "Create the pool with createLoadBalancer: true to attach a load balancer.", "")
	}
	vms, err := pipeline.InfraOf[[]VM](r, InfraVMs)
	if err != nil {
		return nil, err
	}
	d, err := p.load.Resolve(ctx, j)
	if err != nil {
		return nil, err
	}
	if op == OpAttachLB {
		return map[string]any{InfraLBAttached: true}, d.AttachLB(ctx, j, c, lb.TargetGroupID, vms)
	}
	return map[string]any{InfraLBAttached: false}, d.DetachLB(ctx, j, c, lb.TargetGroupID, vms)
}

// Resize patches an ASG pool's sizes in place and returns the config to store.
func (p *Pipeline) Resize(ctx context.Context, j *job.Job, min, max, desired int32) (json.RawMessage, error) {
	c, err := DecodeConfig(j.Config)
	if err != nil {
		return nil, fault.UserAction(err, "InvalidConfig", err.Error(), "")
	}
	if c.Mode != "asg" {
		return nil, fault.UserAction(errors.New("resize needs mode asg"), "NotASG", "Only ASG pools resize in place; a fixed pool keeps its VMs.", "")
	}
	c.Min, c.Max, c.Desired = min, max, desired
	if err := c.Validate(); err != nil {
		return nil, fault.UserAction(err, "InvalidConfig", err.Error(), "")
	}
	d, err := p.load.Resolve(ctx, j)
	if err != nil {
		return nil, err
	}
	if err := d.Resize(ctx, j, min, max, desired); err != nil {
		return nil, err
	}
	return json.Marshal(c)
}
