package vmpool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// OpRoll replaces every instance of a live pool by one on its launch template's default
// version, one at a time, keeping the pool's capacity healthy (PATCH {"vmOp": "roll"}).
const OpRoll = "roll"

// RollStatus is where a roll stands after one RollStep.
type RollStatus struct {
	Version  int64 // the launch template version the pool is rolled to
	Total    int   // instances to replace in all
	Replaced int   // of them already on Version
	Done     bool
	// Waiting says what the roll waits for when not Done.
	Waiting string
	// VMs are the pool's instances once Done.
	VMs []VM
}

// Roller is what a Driver may also do: replace the pool's instances by ones on the launch
// template's default version. RollStep makes at most one cloud change per call and reads the
// roll's progress from the cloud each time (which instances are not on the version yet), so a
// roll interrupted anywhere resumes without a duplicate instance. targetGroup is the target
// group the pool is attached to, empty when none: a new instance then counts once running and
// bootstrapped rather than once healthy in the group.
type Roller interface {
	RollStep(ctx context.Context, j *job.Job, c Config, targetGroup string) (RollStatus, error)
}

// PlanRoll plans a roll of a completed pool onto newConfig (nil: the job's config as it is).
// With a new config the launch template step runs again first, adding a template version when
// the user data, image or instance type changed; finalize then replaces the instances. Only what
// a new template version carries may change: the mode and load balancer stay as they are.
func (p *Pipeline) PlanRoll(j *job.Job, newConfig json.RawMessage) (json.RawMessage, []job.StepRecord, error) {
	cur, err := DecodeConfig(j.Config)
	if err != nil {
		return nil, nil, validation.New("config", "type", err.Error())
	}
	reopen := []string{StepFinalize}
	raw := j.Config
	if newConfig != nil {
		next, err := DecodeConfig(newConfig)
		if err != nil {
			return nil, nil, validation.New("config", "type", err.Error())
		}
		if err := next.Validate(); err != nil {
			if _, ok := validation.Fields(err); ok {
				return nil, nil, err
			}
			return nil, nil, validation.New("config", "invalid", err.Error())
		}
		switch {
		case next.Mode != cur.Mode:
			return nil, nil, validation.New("config.mode", "immutable", "a roll keeps the pool's mode ("+cur.Mode+")")
		case next.CreateLoadBalancer != cur.CreateLoadBalancer:
			return nil, nil, validation.New("config.createLoadBalancer", "immutable", "a roll keeps the pool's load balancer as it is")
		}
		raw = newConfig
		reopen = []string{StepLaunchTemplate, StepFinalize}
	}
	out, err := withConfig(&job.Job{Config: raw}, func(cfg map[string]any) { cfg[configVMOp] = OpRoll })
	if err != nil {
		return nil, nil, err
	}
	steps, err := reopenFinalize(j, "vmOp", "vmOp "+OpRoll)
	if err != nil {
		return nil, nil, err
	}
	if len(reopen) == 2 {
		i := j.StepIndex(StepLaunchTemplate)
		if i < 0 {
			return nil, nil, validation.New("config", "steps", "the job has no launch template step")
		}
		steps[i] = job.StepRecord{Name: StepLaunchTemplate, Status: job.StepPending, Message: "new launch template version for a roll"}
	}
	return out, steps, nil
}

// driverAs decodes the job's config and resolves its driver as T, one of the optional things a
// Driver may also do; a driver that does not is a user_action failure with code and hint.
func driverAs[T any](ctx context.Context, p *Pipeline, r *pipeline.Run, code, why, hint string) (Config, T, error) {
	var zero T
	c, err := DecodeConfig(r.Job.Config)
	if err != nil {
		return c, zero, fault.UserAction(err, "InvalidConfig", err.Error(), "")
	}
	d, err := p.load.Resolve(ctx, r.Job)
	if err != nil {
		return c, zero, err
	}
	t, ok := d.(T)
	if !ok {
		return c, zero, fault.UserAction(errors.New(why), code, hint, "")
	}
	return c, t, nil
}

// roll is finalize's Do for vmOp roll: one RollStep per call, a wait while it goes on.
func (p *Pipeline) roll(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	c, roller, err := driverAs[Roller](ctx, p, r, "RollUnsupported", "this provider cannot roll a pool's instances",
		"Replace the pool's instances by recreating it.")
	if err != nil {
		return pipeline.Result{}, err
	}
	var lb LoadBalancer
	var attached bool
	_, _ = r.Infra(InfraLoadBalancer, &lb)
	_, _ = r.Infra(InfraLBAttached, &attached)
	tg := ""
	if attached {
		tg = lb.TargetGroupID
	}
	st, err := roller.RollStep(ctx, r.Job, c, tg)
	if err != nil {
		return pipeline.Result{}, err
	}
	progress := fmt.Sprintf("replaced %d of %d", st.Replaced, st.Total)
	if !st.Done {
		return pipeline.Wait(p.poll, progress+" (version "+fmt.Sprint(st.Version)+"): "+st.Waiting, nil), nil
	}
	infra := map[string]any{InfraVMs: st.VMs}
	if lt, err := pipeline.InfraOf[LaunchTemplate](r, InfraLaunchTemplate); err == nil {
		lt.Version = st.Version
		infra[InfraLaunchTemplate] = lt
	}
	res := pipeline.Done(infra)
	res.Message = fmt.Sprintf("rolled to launch template version %d: %s", st.Version, progress)
	return res, nil
}
