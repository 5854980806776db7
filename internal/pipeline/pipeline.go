// Package pipeline is the step framework: a pipeline is an ordered list of named steps, each
// with an idempotent Do and Undo. The engine runs them; families (datastore, vm_pool, ...) build
// them.
package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
)

// Outcome says what a step did.
type Outcome int

const (
	// OutcomeDone: the step's work is finished; Infra is merged into the job.
	OutcomeDone Outcome = iota
	// OutcomeWait: the work is under way in the cloud; come back after Result.After without
	// holding a worker. Infra is merged (a step records the ID it created before it waits).
	OutcomeWait
	// OutcomeSkip: nothing to do here (e.g. no DNS zone for a record); counts as completed.
	OutcomeSkip
	// OutcomeAwaitUser: the step needs a person's decision (an approval gate). The job parks in
	// awaiting_user with its lease released and is not claimed again until the API queues it.
	OutcomeAwaitUser
)

// Result is what a successful Do or Undo returns. Failures are returned as errors classified
// with package fault.
type Result struct {
	Outcome Outcome
	After   time.Duration
	Message string
	// Infra holds top-level keys to merge into the job's infra document. A nil value deletes
	// the key.
	Infra map[string]any
	// Backoff, for a wait, spaces the polls of a resource that takes long to be ready (see
	// Backoff); the zero value polls every After.
	Backoff Backoff
}

// Backoff is how a step's resource is best polled while it is not ready: the first wait in a
// row is Result.After, each following one Factor times the one before, none longer than Max.
// A database or a cluster takes many minutes to come up; polling it every few seconds all that
// time costs cloud API quota and engine work, and tells nothing sooner than a poll that slows
// down while the wait goes on. A Factor of 1 or less, or a Max below After, keeps polls fixed.
type Backoff struct {
	Factor float64
	Max    time.Duration
}

// Delay is the wait after the n-th wait in a row (n from 1) whose first is first.
func (b Backoff) Delay(first time.Duration, n int) time.Duration {
	if b.Factor <= 1 || n <= 1 || first <= 0 {
		return first
	}
	limit := b.Max
	if limit < first {
		return first
	}
	d := float64(first)
	for i := 1; i < n && d < float64(limit); i++ {
		d *= b.Factor
	}
	return min(time.Duration(d), limit)
}

// Slowing returns r with its waits growing by factor while they go on, up to max (see
// Backoff).
func (r Result) Slowing(factor float64, max time.Duration) Result {
	r.Backoff = Backoff{Factor: factor, Max: max}
	return r
}

// Done finishes the step, merging infra.
func Done(infra map[string]any) Result { return Result{Outcome: OutcomeDone, Infra: infra} }

// Wait asks to be called again after d; infra is merged now so that what was created is on
// record before the worker lets go.
func Wait(d time.Duration, message string, infra map[string]any) Result {
	return Result{Outcome: OutcomeWait, After: d, Message: message, Infra: infra}
}

// AwaitUser parks the job until a person decides; infra is merged now.
func AwaitUser(message string, infra map[string]any) Result {
	return Result{Outcome: OutcomeAwaitUser, Message: message, Infra: infra}
}

// Skip finishes the step without work, saying why.
func Skip(reason string) Result { return Result{Outcome: OutcomeSkip, Message: reason} }

// Run is what a step sees of its job: a snapshot plus helpers. Steps must not keep it.
type Run struct {
	Job     *job.Job
	Step    string
	Attempt int
	Logger  *slog.Logger
}

// Config decodes the job's user config into v.
func (r *Run) Config(v any) error {
	if len(r.Job.Config) == 0 {
		return nil
	}
	if err := json.Unmarshal(r.Job.Config, v); err != nil {
		return fmt.Errorf("decode config: %w", err)
	}
	return nil
}

// Infra decodes one key of the infra document into v and reports whether it was present.
func (r *Run) Infra(key string, v any) (bool, error) {
	m, err := InfraMap(r.Job.Infra)
	if err != nil {
		return false, err
	}
	raw, ok := m[key]
	if !ok || string(raw) == "null" {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("decode infra %q: %w", key, err)
	}
	return true, nil
}

// InfraMap splits an infra document into its top-level keys.
func InfraMap(doc json.RawMessage) (map[string]json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if len(doc) == 0 || string(doc) == "null" {
		return m, nil
	}
	if err := json.Unmarshal(doc, &m); err != nil {
		return nil, fmt.Errorf("decode infra: %w", err)
	}
	return m, nil
}

// MergeInfra returns doc with patch's top-level keys set (a nil value removes the key).
func MergeInfra(doc json.RawMessage, patch map[string]any) (json.RawMessage, error) {
	if len(patch) == 0 {
		if len(doc) == 0 {
			return json.RawMessage(`{}`), nil
		}
		return doc, nil
	}
	m, err := InfraMap(doc)
	if err != nil {
		return nil, err
	}
	for k, v := range patch {
		if v == nil {
			delete(m, k)
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("encode infra %q: %w", k, err)
		}
		m[k] = b
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode infra: %w", err)
	}
	return out, nil
}

// Step is one named unit of work. Do and Undo must be idempotent: the engine re-runs a step
// whose checkpoint did not commit. A nil Undo means there is nothing to undo.
type Step struct {
	Name string
	Do   func(ctx context.Context, r *Run) (Result, error)
	Undo func(ctx context.Context, r *Run) (Result, error)
}

// Pipeline builds the steps of one resource family.
type Pipeline interface {
	// Family is the resource family this pipeline serves.
	Family() job.Family
	// LeaseTTL exceeds the worst-case duration of one step of this family.
	LeaseTTL() time.Duration
	// Validate checks a job's config before the job is accepted; errors name the field.
	Validate(ctx context.Context, j *job.Job) error
	// Steps returns the ordered steps for j. The list must depend only on j's config and mode,
	// so that it is the same on every replica and after every restart.
	Steps(j *job.Job) []Step
}

// Registry maps families (and, for tests, other keys) to pipelines. It is built once at start
// and read-only after.
type Registry struct {
	byFamily map[job.Family]Pipeline
	fallback func(job.Family) (Pipeline, bool)
}

// NewRegistry returns a registry holding ps; a family registered twice is a programming error.
func NewRegistry(ps ...Pipeline) (*Registry, error) {
	r := &Registry{byFamily: map[job.Family]Pipeline{}}
	for _, p := range ps {
		if _, dup := r.byFamily[p.Family()]; dup {
			return nil, fmt.Errorf("pipeline for family %q registered twice", p.Family())
		}
		r.byFamily[p.Family()] = p
	}
	return r, nil
}

// SetFallback makes Get ask resolve for families no registered pipeline serves: families
// spelled "category/type" name a pair a remote provisioner may hold, and those are only known
// at run time. Call it during assembly, before the registry is shared.
func (r *Registry) SetFallback(resolve func(job.Family) (Pipeline, bool)) { r.fallback = resolve }

// Get returns the pipeline for f: the registered one, or else the fallback's.
func (r *Registry) Get(f job.Family) (Pipeline, bool) {
	if p, ok := r.byFamily[f]; ok {
		return p, true
	}
	if r.fallback != nil {
		return r.fallback(f)
	}
	return nil, false
}

// Families lists the registered families.
func (r *Registry) Families() []job.Family {
	out := make([]job.Family, 0, len(r.byFamily))
	for f := range r.byFamily {
		out = append(out, f)
	}
	return out
}

// NewStepRecords lays out pending records for steps.
func NewStepRecords(steps []Step) []job.StepRecord {
	out := make([]job.StepRecord, len(steps))
	for i, s := range steps {
		out[i] = job.StepRecord{Name: s.Name, Status: job.StepPending}
	}
	return out
}
