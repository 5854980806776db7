package jobbackend_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/fault"
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
	// refuse, when set, is the refusal of every Submit and Admit (a space that is not there).
	refuse error
}

func (f *fakeJobs) Submit(_ context.Context, s jobbackend.Submission) (*job.Job, error) {
	if f.refuse != nil {
		return nil, f.refuse
	}
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

func (f *fakeJobs) Admit(context.Context, jobbackend.Submission) error { return f.refuse }

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

// A refusal of the job system (an unknown space, a provider that cannot serve the pair) is the
// same failure from plan, apply and inspect: none of them answers succeeded.
func TestRefusalAgreesAcrossCalls(t *testing.T) {
	t.Parallel()
	pipes, err := pipeline.NewRegistry(registryPipeline{})
	if err != nil {
		t.Fatal(err)
	}
	refusal := fault.UserAction(errors.New("registry is not available on the local provider"), "UnsupportedProvider", "use another space", "")
	b := jobbackend.New(jobbackend.Options{
		Jobs:      &fakeJobs{jobs: map[string]*job.Job{}, byKey: map[string]string{}, refuse: refusal},
		Pipelines: pipes,
	})
	srv := httptest.NewServer(protocol.NewServer(b, protocol.ServerOptions{Name: "groundwork"}))
	t.Cleanup(srv.Close)
	body := `{"kind":"managed-resource","type":"registry","application":"images","settings":{"name":"images"}}`
	for _, call := range []string{"plan", "apply", "inspect"} {
		t.Run(call, func(t *testing.T) {
			t.Parallel()
			resp, err := http.Post(srv.URL+"/"+call, "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var ans struct {
				Outcome protocol.Outcome `json:"outcome"`
				Code    string           `json:"code"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK || ans.Outcome != protocol.OutcomeFailed || ans.Code != "UnsupportedProvider" {
				t.Fatalf("%s: HTTP %d %+v, want failed UnsupportedProvider", call, resp.StatusCode, ans)
			}
		})
	}
}

// Plan and inspect name a datastore resource by its pair's type ("redis"), not by the job
// family that serves it ("datastore").
func TestResourceTypeIsThePairs(t *testing.T) {
	t.Parallel()
	fake := &fakeJobs{jobs: map[string]*job.Job{}, byKey: map[string]string{}}
	b := jobbackend.New(jobbackend.Options{Jobs: fake, Pairs: []catalog.Pair{catalog.PairRedis}})
	h, ok := b.Handler(context.Background(), catalog.PairRedis)
	if !ok {
		t.Fatal("no handler for redis")
	}
	ctx := context.Background()
	req := &protocol.Request{Kind: catalog.PairRedis.Kind, Type: catalog.PairRedis.Type, Application: "cache",
		Settings: json.RawMessage(`{"name":"cache"}`)}
	plan, err := h.Plan(ctx, req)
	if err != nil || len(plan.Changes) != 1 || plan.Changes[0].Type != "redis" {
		t.Fatalf("plan: %+v %v", plan, err)
	}
	ans, err := h.Apply(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // the fake moves a job one status per read: running, completed
		if _, err := b.Operation(ctx, ans.OperationID); err != nil {
			t.Fatal(err)
		}
	}
	in, err := h.Inspect(ctx, req)
	if err != nil || len(in.Resources) != 1 || in.Resources[0].Type != "redis" || !in.Resources[0].Exists {
		t.Fatalf("inspect: %+v %v", in, err)
	}
}
