// Package steps holds the steps that several driver-backed families (network, kubernetes,
// vm_pool, dns_zone, registry) run alike, written once: load config and driver, validate,
// create network, create IAM or another one-call resource, finalize, and the results of
// ensure/delete calls that take a while. Each family keeps its own Driver interface, step
// names and infra keys and passes them in, so stored jobs resume against the same names.
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

// CloudWait is a wait on a cloud resource that may take minutes (a cluster, a database
// server, a load balancer, a deletion): polled after poll at first, then each time 1.5 times
// later, up to four times poll, so that a long wait costs a fraction of the cloud calls and
// claims while a short one is still seen at once.
func CloudWait(poll time.Duration, waiting string, infra map[string]any) pipeline.Result {
	return pipeline.Wait(poll, waiting, infra).Slowing(1.5, 4*poll)
}

// Ensured is the result of an ensure call for a thing that takes a while to come up: done with
// v under key once ready, else a wait that records v so far, so that what exists is on record
// before the worker lets go.
func Ensured(key string, v any, ready bool, poll time.Duration, waiting string) pipeline.Result {
	if !ready {
		return CloudWait(poll, waiting, map[string]any{key: v})
	}
	return pipeline.Done(map[string]any{key: v})
}

// Gone is the result of a delete call that may still be under way: a wait while it is not
// done, then done with key cleared.
func Gone(key string, done bool, poll time.Duration, waiting string) pipeline.Result {
	if !done {
		return CloudWait(poll, waiting, nil)
	}
	return pipeline.Done(map[string]any{key: nil})
}

// NetworkDriver is the part of a family's driver that the network step calls: it builds the
// family's network N from its config C (a NAT gateway takes minutes, so N may not be ready
// yet) and deletes it, reporting when it is gone.
type NetworkDriver[C, N any] interface {
	EnsureNetwork(ctx context.Context, j *job.Job, c C) (N, error)
	DeleteNetwork(ctx context.Context, j *job.Job) (done bool, err error)
}

// Network is the create-network step, under the family's step name and infra key: Do ensures
// the network and waits, polling, while ready says it is not; Undo deletes it and waits until it
// is gone, then clears key.
func Network[C, N any, D NetworkDriver[C, N]](name, key string, load Loader[C, D], poll time.Duration, ready func(N) bool) pipeline.Step {
	return pipeline.Step{
		Name: name,
		Do: load.Do(func(ctx context.Context, r *pipeline.Run, c C, d D) (pipeline.Result, error) {
			n, err := d.EnsureNetwork(ctx, r.Job, c)
			if err != nil {
				return pipeline.Result{}, err
			}
			return Ensured(key, n, ready(n), poll, "waiting for the NAT gateway"), nil
		}),
		Undo: load.Do(func(ctx context.Context, r *pipeline.Run, _ C, d D) (pipeline.Result, error) {
			done, err := d.DeleteNetwork(ctx, r.Job)
			if err != nil {
				return pipeline.Result{}, err
			}
			return Gone(key, done, poll, "waiting for the NAT gateway to be deleted"), nil
		}),
	}
}

// Resource is a step that makes one thing T in a single driver call and records it under Key;
// Undo deletes it and clears Key.
type Resource[C, D, T any] struct {
	Name string // the family's step name
	Key  string // the infra key T is recorded under
	Load Loader[C, D]

	Ensure func(d D, ctx context.Context, j *job.Job, c C) (T, error)
	Delete func(d D, ctx context.Context, j *job.Job, c C) error
}

// Step returns the step. Undo returns Key cleared together with the delete's error: the engine
// drops the result of a step that errs, so Key stays on record until a delete succeeds.
func (s Resource[C, D, T]) Step() pipeline.Step {
	return pipeline.Step{
		Name: s.Name,
		Do: s.Load.Do(func(ctx context.Context, r *pipeline.Run, c C, d D) (pipeline.Result, error) {
			v, err := s.Ensure(d, ctx, r.Job, c)
			if err != nil {
				return pipeline.Result{}, err
			}
			return pipeline.Done(map[string]any{s.Key: v}), nil
		}),
		Undo: s.Load.Do(func(ctx context.Context, r *pipeline.Run, c C, d D) (pipeline.Result, error) {
			return pipeline.Done(map[string]any{s.Key: nil}), s.Delete(d, ctx, r.Job, c)
		}),
	}
}

// IAM is the create-IAM step: the family's roles (or instance profile) R, made for the job
// alone, so the config is loaded but not passed; loading it still fails a job whose config no
// longer decodes, as every other step does.
func IAM[C, D, R any](name, key string, load Loader[C, D],
	ensure func(d D, ctx context.Context, j *job.Job) (R, error),
	remove func(d D, ctx context.Context, j *job.Job) error,
) pipeline.Step {
	return Resource[C, D, R]{
		Name: name, Key: key, Load: load,
		Ensure: func(d D, ctx context.Context, j *job.Job, _ C) (R, error) { return ensure(d, ctx, j) },
		Delete: func(d D, ctx context.Context, j *job.Job, _ C) error { return remove(d, ctx, j) },
	}.Step()
}
