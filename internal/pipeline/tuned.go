package pipeline

import (
	"context"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
)

// Tuned is a pipeline with its lease and a hook after each step's Do set by the server's
// options. Crash tests use both: a short lease so that a restarted server claims a dead one's
// job promptly, and the hook to kill the process after the cloud calls were made and before
// the engine records them.
type Tuned struct {
	Pipeline
	// TTL, if positive, replaces the pipeline's lease.
	TTL time.Duration
	// AfterDo, if set, is called after each forward step's Do returns.
	AfterDo func(ctx context.Context, j *job.Job, step string)
}

// Unwrap returns the pipeline Tuned wraps, so that a caller can ask it for abilities beyond
// Pipeline (a config updater).
func (p Tuned) Unwrap() Pipeline { return p.Pipeline }

// LeaseTTL implements Pipeline.
func (p Tuned) LeaseTTL() time.Duration {
	if p.TTL > 0 {
		return p.TTL
	}
	return p.Pipeline.LeaseTTL()
}

// Steps implements Pipeline.
func (p Tuned) Steps(j *job.Job) []Step {
	steps := p.Pipeline.Steps(j)
	if p.AfterDo == nil {
		return steps
	}
	for i := range steps {
		do, name := steps[i].Do, steps[i].Name
		if do == nil {
			continue
		}
		steps[i].Do = func(ctx context.Context, r *Run) (Result, error) {
			res, err := do(ctx, r)
			p.AfterDo(ctx, r.Job, name)
			return res, err
		}
	}
	return steps
}
