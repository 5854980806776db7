// Package testfamily is a pipeline for tests and benchmarks of the engine: N steps whose
// behaviour a hook decides, and which report each execution. It is never registered by the
// product binary.
package testfamily

import (
	"context"
	"fmt"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
)

// Family is the family name test jobs use.
const Family job.Family = "test"

// Call describes one execution of a step.
type Call struct {
	JobID   string
	Step    string
	Index   int
	Undo    bool
	Attempt int
}

// Pipeline runs N steps. Hook, if set, decides each execution's result; the default
// finishes the step and records {"<step>": attempt} in infra.
type Pipeline struct {
	N    int
	TTL  time.Duration
	Hook func(ctx context.Context, c Call, r *pipeline.Run) (pipeline.Result, error)
}

var _ pipeline.Pipeline = (*Pipeline)(nil)

func (p *Pipeline) Family() job.Family { return Family }

func (p *Pipeline) LeaseTTL() time.Duration {
	if p.TTL <= 0 {
		return time.Minute
	}
	return p.TTL
}

func (p *Pipeline) Validate(context.Context, *job.Job) error { return nil }

// StepName is the name of step i.
func StepName(i int) string { return fmt.Sprintf("step%d", i+1) }

func (p *Pipeline) Steps(*job.Job) []pipeline.Step {
	out := make([]pipeline.Step, p.N)
	for i := range out {
		i := i
		name := StepName(i)
		call := func(undo bool) func(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
			return func(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
				c := Call{JobID: r.Job.ID, Step: name, Index: i, Undo: undo, Attempt: r.Attempt}
				if p.Hook != nil {
					return p.Hook(ctx, c, r)
				}
				if undo {
					return pipeline.Done(map[string]any{name: nil}), nil
				}
				return pipeline.Done(map[string]any{name: r.Attempt}), nil
			}
		}
		out[i] = pipeline.Step{Name: name, Do: call(false), Undo: call(true)}
	}
	return out
}

// NewJob returns a queued job of this family with p's step records, due at now.
func (p *Pipeline) NewJob(id string, now time.Time) *job.Job {
	return &job.Job{
		ID: id, OrgID: "org_test", SpaceID: "spc_test", Kind: job.KindProvisioning, Family: Family,
		Provider: "local", Mode: job.ModeCreate, Config: []byte(`{}`), Infra: []byte(`{}`),
		Steps: pipeline.NewStepRecords(p.Steps(nil)), Status: job.StatusQueued, Phase: job.PhaseApply,
		LeaseTTL: p.LeaseTTL(), NextRunAt: now,
	}
}
