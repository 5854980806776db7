package jobbackend_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/protocol"
	"github.com/groundworkhq/groundwork/internal/protocol/jobbackend"
	"github.com/groundworkhq/groundwork/internal/protocol/protocoltest"
)

// fakeJobs stands in for the store and engine, which are written elsewhere: a job advances
// one status each time it is read (queued → running → completed), as the engine would move
// it between polls.
type fakeJobs struct {
	mu    sync.Mutex
	jobs  map[string]*job.Job
	byKey map[string]string
	seq   int
}

func (f *fakeJobs) Submit(_ context.Context, s jobbackend.Submission) (*job.Job, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id, ok := f.byKey[s.Key]; ok {
		j := f.jobs[id]
		if j.Status == job.StatusFailed {
			j.Status, j.Failure = job.StatusQueued, nil
		}
		return clone(j), nil
	}
	if s.Ensure == protocol.EnsureAbsent {
		cur := f.current(s.Family, s.Application)
		if cur == nil {
			return nil, nil
		}
		cur.Phase, cur.Status = job.PhaseTeardown, job.StatusRunning
		f.byKey[s.Key] = cur.ID
		return clone(cur), nil
	}
	f.seq++
	j := &job.Job{
		ID: fmt.Sprintf("job_%d", f.seq), Family: s.Family, Name: s.Application, Config: s.Config,
		Infra: json.RawMessage(`{}`), Status: job.StatusQueued, Phase: job.PhaseApply, Mode: job.ModeCreate,
		Steps: []job.StepRecord{{Name: "create", Status: job.StepPending}},
	}
	f.jobs[j.ID] = j
	f.byKey[s.Key] = j.ID
	return clone(j), nil
}

func (f *fakeJobs) Job(_ context.Context, id string) (*job.Job, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	if !ok {
		return nil, fmt.Errorf("job %s: %w", id, jobbackend.ErrNotFound)
	}
	switch {
	case j.Status == job.StatusQueued:
		j.Status = job.StatusRunning
	case j.Status == job.StatusRunning && j.Phase == job.PhaseTeardown:
		j.Status = job.StatusDeleted
	case j.Status == job.StatusRunning:
		j.Status, j.Steps[0].Status = job.StatusCompleted, job.StepDone
		j.Infra = json.RawMessage(`{"url":"registry.local/` + j.Name + `"}`)
	}
	return clone(j), nil
}

func (f *fakeJobs) current(family job.Family, app string) *job.Job {
	var cur *job.Job
	for _, j := range f.jobs {
		if j.Family == family && j.Name == app && j.Status == job.StatusCompleted && j.Phase == job.PhaseApply {
			cur = j
		}
	}
	return cur
}

func (f *fakeJobs) Current(_ context.Context, family job.Family, app string) (*job.Job, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cur := f.current(family, app); cur != nil {
		return clone(cur), nil
	}
	return nil, nil
}

func clone(j *job.Job) *job.Job { c := *j; return &c }

// observer reports drift for applications marked tampered, as a family's cloud driver would.
type observer struct {
	mu       sync.Mutex
	tampered map[string]bool
}

func (o *observer) Observe(_ context.Context, j *job.Job) ([]protocol.Resource, []protocol.Drift, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	res := []protocol.Resource{{Resource: j.Name, Type: "registry", ID: j.ID, Exists: true}}
	if o.tampered[j.Name] {
		return res, []protocol.Drift{{Resource: j.Name, Field: "scanOnPush", Applied: true, Actual: false}}, nil
	}
	return res, nil, nil
}

type registryPipeline struct{}

func (registryPipeline) Family() job.Family                       { return job.FamilyRegistry }
func (registryPipeline) LeaseTTL() time.Duration                  { return time.Minute }
func (registryPipeline) Validate(context.Context, *job.Job) error { return nil }
func (registryPipeline) Steps(*job.Job) []pipeline.Step {
	noop := func(context.Context, *pipeline.Run) (pipeline.Result, error) { return pipeline.Done(nil), nil }
	return []pipeline.Step{{Name: "validate", Do: noop}, {Name: "create-repository", Do: noop, Undo: noop}, {Name: "finalize", Do: noop}}
}

// TestJobBackendConforms runs the conformance suite against Groundwork's server shape: the
// protocol server over the job-backed backend, with catalog validation on.
func TestJobBackendConforms(t *testing.T) {
	t.Parallel()
	cat, err := catalog.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	pipes, err := pipeline.NewRegistry(registryPipeline{})
	if err != nil {
		t.Fatal(err)
	}
	obs := &observer{tampered: map[string]bool{}}
	b := jobbackend.New(jobbackend.Options{
		Jobs:      &fakeJobs{jobs: map[string]*job.Job{}, byKey: map[string]string{}},
		Pipelines: pipes,
		Observers: map[job.Family]jobbackend.Observer{job.FamilyRegistry: obs},
	})
	srv := httptest.NewServer(protocol.NewServer(b, protocol.ServerOptions{Name: "groundwork", Catalog: cat}))
	t.Cleanup(srv.Close)
	protocoltest.Run(t, protocoltest.Target{
		BaseURL:         srv.URL,
		Pair:            catalog.PairRegistry,
		Settings:        json.RawMessage(`{"name":"images"}`),
		FailingSettings: json.RawMessage(`{"name":"Not A Name"}`),
		Drift: func(_ testing.TB, app string) {
			obs.mu.Lock()
			obs.tampered[app] = true
			obs.mu.Unlock()
		},
	})
}
