// Package steps holds the steps that several driver-backed families (network, kubernetes,
// vm_pool, dns_zone, registry) run alike, written once: load config and driver, validate,
// create network, create IAM, finalize. Each family keeps its own Driver interface, step names
// and infra keys and passes them in, so stored jobs resume against the same names.
package steps

import (
	"context"
	"encoding/json"
	"time"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
)

// Func is a step's Do or Undo.
type Func = func(ctx context.Context, r *pipeline.Run) (pipeline.Result, error)

// invalidConfig classifies a config error as the user's to fix; every family reports it alike.
func invalidConfig(err error) error {
	return fault.UserAction(err, "InvalidConfig", err.Error(), "")
}

// Loader is what each step of a family starts with: its config C decoded from the job and the
// driver D that does the family's cloud work for the job.
type Loader[C, D any] struct {
	Decode  func(raw json.RawMessage) (C, error)
	Resolve func(ctx context.Context, j *job.Job) (D, error)
}

// Load decodes the job's config and resolves its driver. A config that no longer decodes is
// the user's to fix; a resolve error is passed through with the class its resolver gave it.
func (l Loader[C, D]) Load(ctx context.Context, r *pipeline.Run) (C, D, error) {
	var d D
	c, err := l.Decode(r.Job.Config)
	if err != nil {
		return c, d, invalidConfig(err)
	}
	d, err = l.Resolve(ctx, r.Job)
	return c, d, err
}

// Do makes a step function of body, which runs with the loaded config and driver.
func (l Loader[C, D]) Do(body func(ctx context.Context, r *pipeline.Run, c C, d D) (pipeline.Result, error)) Func {
	return func(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
		c, d, err := l.Load(ctx, r)
		if err != nil {
			return pipeline.Result{}, err
		}
		return body(ctx, r, c, d)
	}
}

// Validator is a config that checks itself, naming the field at fault.
type Validator interface{ Validate() error }

// CheckConfig is a pipeline's Validate for a family whose config validates itself after
// decoding.
func CheckConfig[C Validator](decode func(json.RawMessage) (C, error)) func(context.Context, *job.Job) error {
	return func(_ context.Context, j *job.Job) error {
		c, err := decode(j.Config)
		if err != nil {
			return err
		}
		return c.Validate()
	}
}

// Validate is the first step: check re-runs at execution what was checked at admission, so
// that a job stored under older rules fails as the user's to fix instead of half-building.
func Validate(name string, check func(context.Context, *job.Job) error) pipeline.Step {
	return pipeline.Step{Name: name, Do: func(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
		if err := check(ctx, r.Job); err != nil {
			return pipeline.Result{}, invalidConfig(err)
		}
		return pipeline.Done(nil), nil
	}}
}

// Finalize is the last step. It does nothing: it is kept so that the step lists match the
// reference's and a job that stopped before it resumes onto the same records.
func Finalize(name string) pipeline.Step {
	return pipeline.Step{Name: name, Do: func(context.Context, *pipeline.Run) (pipeline.Result, error) {
		return pipeline.Done(nil), nil
	}}
}

// Network is the create-network step of a family whose driver builds a network N from the
// family's config C (a NAT gateway takes minutes, so Ready may be false for a while).
type Network[C, D, N any] struct {
	Name string // the family's step name
	Key  string // the infra key N is recorded under
	Load Loader[C, D]
	Poll time.Duration // how long to wait between looks

	Ensure func(d D, ctx context.Context, j *job.Job, c C) (N, error)
	Ready  func(n N) bool
	Delete func(d D, ctx context.Context, j *job.Job) (done bool, err error)
}

// Step returns the step: Do ensures the network and waits while it is not ready, recording it
// under Key each time so that what exists is on record before the worker lets go; Undo deletes
// it, waits until it is gone, then clears Key.
func (s Network[C, D, N]) Step() pipeline.Step {
	return pipeline.Step{
		Name: s.Name,
		Do: s.Load.Do(func(ctx context.Context, r *pipeline.Run, c C, d D) (pipeline.Result, error) {
			n, err := s.Ensure(d, ctx, r.Job, c)
			if err != nil {
				return pipeline.Result{}, err
			}
			if !s.Ready(n) {
				return pipeline.Wait(s.Poll, "waiting for the NAT gateway", map[string]any{s.Key: n}), nil
			}
			return pipeline.Done(map[string]any{s.Key: n}), nil
		}),
		Undo: s.Load.Do(func(ctx context.Context, r *pipeline.Run, _ C, d D) (pipeline.Result, error) {
			done, err := s.Delete(d, ctx, r.Job)
			if err != nil {
				return pipeline.Result{}, err
			}
			if !done {
				return pipeline.Wait(s.Poll, "waiting for the NAT gateway to be deleted", nil), nil
			}
			return pipeline.Done(map[string]any{s.Key: nil}), nil
		}),
	}
}

// IAM is the create-IAM step of a family whose driver makes its roles (or instance profile)
// R for the job in one call.
type IAM[C, D, R any] struct {
	Name string // the family's step name
	Key  string // the infra key R is recorded under
	Load Loader[C, D]

	Ensure func(d D, ctx context.Context, j *job.Job) (R, error)
	Delete func(d D, ctx context.Context, j *job.Job) error
}

// Step returns the step: Do ensures the roles and records them under Key; Undo deletes them
// and clears Key. The config is loaded though unused so that a job whose config no longer
// decodes fails here as it does in every other step.
func (s IAM[C, D, R]) Step() pipeline.Step {
	return pipeline.Step{
		Name: s.Name,
		Do: s.Load.Do(func(ctx context.Context, r *pipeline.Run, _ C, d D) (pipeline.Result, error) {
			roles, err := s.Ensure(d, ctx, r.Job)
			if err != nil {
				return pipeline.Result{}, err
			}
			return pipeline.Done(map[string]any{s.Key: roles}), nil
		}),
		Undo: s.Load.Do(func(ctx context.Context, r *pipeline.Run, _ C, d D) (pipeline.Result, error) {
			return pipeline.Done(map[string]any{s.Key: nil}), s.Delete(d, ctx, r.Job)
		}),
	}
}
