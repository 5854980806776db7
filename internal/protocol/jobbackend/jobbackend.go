// Package jobbackend serves the provisioner protocol for Groundwork's built-in pairs by way of
// the job system: an apply submits (or finds) a job, an operation is a job's status, an inspect
// reads the job that created the application's resource. It is the protocol.Backend that
// Groundwork mounts under /provisioner/.
package jobbackend

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/protocol"
)

// Submission asks the job system for the work of one apply.
type Submission struct {
	// Key is the protocol request's idempotency key (Request.Key): a second Submit with the
	// same key returns the same job.
	Key         string
	Pair        catalog.Pair
	Family      job.Family
	Application string
	Ensure      protocol.Ensure
	// Config is the validated config, with the catalog's defaults.
	Config json.RawMessage
}

// Jobs is the part of the job system this backend needs; the store and engine implement it.
type Jobs interface {
	// Submit returns the job for s.Key, creating and queueing it when there is none. A job for
	// the key that failed is retried and returned queued: a failed result is not kept under a
	// key, so repeating the apply is how a caller retries. For Ensure absent it starts the
	// teardown of the application's current job and returns that job, or returns nil when
	// there is nothing to delete.
	Submit(ctx context.Context, s Submission) (*job.Job, error)
	// Job reads one job; an error wrapping protocol.ErrUnknownOperation when there is none.
	Job(ctx context.Context, id string) (*job.Job, error)
	// Current returns the application's latest completed create job for family, or nil.
	Current(ctx context.Context, family job.Family, application string) (*job.Job, error)
	// Admit checks, without doing anything, that Submit would accept s: the space exists and
	// its provider serves the family, and, when s.Config is set, the settings are valid. Its
	// refusal is the one Submit would give (a user_action fault), so that plan, apply and
	// inspect answer alike.
	Admit(ctx context.Context, s Submission) error
}

// Observer reads a family's resources as they are in the cloud, to find drift. Families
// without one report the resource as recorded and no drift.
type Observer interface {
	Observe(ctx context.Context, j *job.Job) ([]protocol.Resource, []protocol.Drift, error)
}

// Options configure New.
type Options struct {
	Jobs      Jobs
	Pipelines *pipeline.Registry // to list the steps a plan would run
	// Pairs are the pairs served (default catalog.BuiltinPairs).
	Pairs     []catalog.Pair
	Observers map[job.Family]Observer
}

// Backend is the job-backed protocol.Backend.
type Backend struct {
	opts Options
}

var _ protocol.Backend = (*Backend)(nil)

// New returns the backend.
func New(opts Options) *Backend {
	if opts.Pairs == nil {
		opts.Pairs = catalog.BuiltinPairs()
	}
	return &Backend{opts: opts}
}

func (b *Backend) Pairs(context.Context) []catalog.Pair { return slices.Clone(b.opts.Pairs) }

func (b *Backend) Handler(_ context.Context, p catalog.Pair) (protocol.Handler, bool) {
	if !slices.Contains(b.opts.Pairs, p) {
		return nil, false
	}
	return &handler{b: b, pair: p, family: catalog.FamilyForPair(p)}, true
}

func (b *Backend) Operation(ctx context.Context, id string) (protocol.Operation, error) {
	j, err := b.opts.Jobs.Job(ctx, id)
	if err != nil {
		return protocol.Operation{}, err
	}
	p, _ := catalog.PairForJob(j.Family, j.Config)
	op := operationOf(j)
	op.Kind, op.Type, op.Application = p.Kind, p.Type, j.Name
	return op, nil
}

type handler struct {
	b      *Backend
	pair   catalog.Pair
	family job.Family
}

// config is the request's settings as a job config. A datastore's pair is chosen by its
// engine, so the engine is filled in from the pair.
func (h *handler) config(req *protocol.Request) (json.RawMessage, error) {
	m := map[string]any{}
	if len(req.Settings) > 0 {
		if err := json.Unmarshal(req.Settings, &m); err != nil {
			return nil, err
		}
	}
	if h.family == job.FamilyDatastore {
		if _, ok := m["engine"]; !ok {
			m["engine"] = h.pair.Type
		}
	}
	return json.Marshal(m)
}

func (h *handler) steps(cfg json.RawMessage, undo bool) []string {
	out := []string{}
	if h.b.opts.Pipelines == nil {
		return out
	}
	pl, ok := h.b.opts.Pipelines.Get(h.family)
	if !ok {
		return out
	}
	for _, s := range pl.Steps(&job.Job{Family: h.family, Mode: job.ModeCreate, Config: cfg}) {
		if !undo {
			out = append(out, s.Name)
		} else if s.Undo != nil {
			out = append([]string{"undo " + s.Name}, out...)
		}
	}
	return out
}

func (h *handler) Plan(ctx context.Context, req *protocol.Request) (protocol.PlanAnswer, error) {
	cfg, err := h.config(req)
	if err != nil {
		return protocol.PlanAnswer{Outcome: protocol.OutcomeFailed, Failure: protocol.Failed("InvalidSettings", err.Error())}, nil
	}
	sub := Submission{Key: req.Key(), Pair: h.pair, Family: h.family, Application: req.Application, Ensure: req.Desired()}
	if req.Desired() != protocol.EnsureAbsent {
		sub.Config = cfg
	}
	if err := h.b.opts.Jobs.Admit(ctx, sub); err != nil {
		return protocol.PlanAnswer{}, err
	}
	cur, err := h.b.opts.Jobs.Current(ctx, h.family, req.Application)
	if err != nil {
		return protocol.PlanAnswer{}, err
	}
	ch := protocol.Change{Resource: req.Application, Type: h.pair.Type, Operations: []string{}}
	switch {
	case req.Desired() == protocol.EnsureAbsent && cur != nil:
		ch.Action, ch.Before, ch.Operations = protocol.ActionDelete, cur.Infra, h.steps(cur.Config, true)
	case req.Desired() == protocol.EnsureAbsent:
		ch.Action = protocol.ActionNone
	case cur == nil:
		ch.Action, ch.After, ch.Operations = protocol.ActionCreate, cfg, h.steps(cfg, false)
	case sameJSON(cur.Config, cfg):
		ch.Action, ch.Before = protocol.ActionNone, cur.Infra
	default:
		ch.Action, ch.Before, ch.After, ch.Operations = protocol.ActionUpdate, cur.Infra, cfg, h.steps(cfg, false)
	}
	return protocol.PlanAnswer{Outcome: protocol.OutcomeSucceeded, Changes: []protocol.Change{ch}}, nil
}

func (h *handler) Apply(ctx context.Context, req *protocol.Request) (protocol.ApplyAnswer, error) {
	cfg, err := h.config(req)
	if err != nil {
		return protocol.ApplyAnswer{Outcome: protocol.OutcomeFailed, Failure: protocol.Failed("InvalidSettings", err.Error())}, nil
	}
	j, err := h.b.opts.Jobs.Submit(ctx, Submission{
		Key: req.Key(), Pair: h.pair, Family: h.family, Application: req.Application,
		Ensure: req.Desired(), Config: cfg,
	})
	if err != nil {
		return protocol.ApplyAnswer{}, err
	}
	if j == nil { // ensure absent with nothing there
		return protocol.ApplyAnswer{Outcome: protocol.OutcomeSucceeded, Resources: []protocol.Resource{{Resource: req.Application, Type: h.pair.Type}}}, nil
	}
	op := operationOf(j)
	a := protocol.ApplyAnswer{OperationID: op.OperationID, Resources: op.Resources, Outputs: op.Outputs, Failure: op.Failure, Outcome: op.Outcome}
	if !op.Outcome.Final() {
		a.Outcome = protocol.OutcomeAccepted
	}
	return a, nil
}

func (h *handler) Inspect(ctx context.Context, req *protocol.Request) (protocol.InspectAnswer, error) {
	if err := h.b.opts.Jobs.Admit(ctx, Submission{Key: req.Key(), Pair: h.pair, Family: h.family,
		Application: req.Application, Ensure: req.Desired()}); err != nil {
		return protocol.InspectAnswer{}, err
	}
	cur, err := h.b.opts.Jobs.Current(ctx, h.family, req.Application)
	if err != nil {
		return protocol.InspectAnswer{}, err
	}
	if cur == nil {
		return protocol.InspectAnswer{Outcome: protocol.OutcomeSucceeded, Resources: []protocol.Resource{{Resource: req.Application, Type: h.pair.Type}}}, nil
	}
	if o, ok := h.b.opts.Observers[h.family]; ok {
		res, drift, err := o.Observe(ctx, cur)
		if err != nil {
			return protocol.InspectAnswer{}, fmt.Errorf("observe %s: %w", cur.ID, err)
		}
		return protocol.InspectAnswer{Outcome: protocol.OutcomeSucceeded, Resources: res, Drift: drift}, nil
	}
	return protocol.InspectAnswer{Outcome: protocol.OutcomeSucceeded, Resources: []protocol.Resource{recorded(cur)}}, nil
}

// recorded is the resource as the job recorded it: its infra document.
func recorded(j *job.Job) protocol.Resource {
	props := map[string]any{}
	_ = json.Unmarshal(j.Infra, &props) // an unreadable infra shows as no properties
	return protocol.Resource{Resource: j.Name, Type: resourceType(j), ID: j.ID, Exists: j.Status == job.StatusCompleted, Properties: props}
}

// resourceType is the type of the pair that made j, as plan and the request name it
// ("postgres", not the family "datastore").
func resourceType(j *job.Job) string {
	if p, err := catalog.PairForJob(j.Family, j.Config); err == nil {
		return p.Type
	}
	return string(j.Family)
}

// operationOf maps a job's status onto the protocol's outcomes.
func operationOf(j *job.Job) protocol.Operation {
	op := protocol.Operation{OperationID: j.ID}
	switch {
	case j.Status == job.StatusCompleted && j.Phase != job.PhaseTeardown:
		op.Outcome, op.Progress = protocol.OutcomeSucceeded, "completed"
		op.Resources = []protocol.Resource{recorded(j)}
		op.Outputs = map[string]any{}
		_ = json.Unmarshal(j.Infra, &op.Outputs)
	case j.Status == job.StatusDeleted:
		op.Outcome, op.Progress = protocol.OutcomeSucceeded, "deleted"
		op.Resources = []protocol.Resource{{Resource: j.Name, Type: resourceType(j), ID: j.ID}}
	case j.Status == job.StatusFailed:
		op.Outcome = protocol.OutcomeFailed
		op.Failure = protocol.Failure{Reason: "job failed"}
		if f := j.Failure; f != nil {
			op.Failure = protocol.Failure{Reason: f.Message, Code: f.Code, FixHint: f.FixHint, Retryable: f.Class == job.ClassTransient}
		}
	case j.Status == job.StatusCancelled:
		op.Outcome, op.Failure = protocol.OutcomeFailed, protocol.Failed("Cancelled", "the job was cancelled")
	default:
		op.Outcome, op.Progress = protocol.OutcomeInProgress, progress(j)
	}
	return op
}

func progress(j *job.Job) string {
	for _, s := range j.Steps {
		if !s.Status.Completed() && s.Status != job.StepUndone {
			msg := string(j.Status) + ": step " + s.Name
			if s.Message != "" {
				msg += ": " + s.Message
			}
			return msg
		}
	}
	return string(j.Status)
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// ErrNotFound may be wrapped by Jobs.Job; it is protocol.ErrUnknownOperation so the server
// answers 404.
var ErrNotFound = protocol.ErrUnknownOperation
