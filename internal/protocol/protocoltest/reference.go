package protocoltest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"sort"
	"sync"

	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/protocol"
)

// Reference is an in-process provisioner that keeps its "resources" in memory: one item per
// application whose properties are the settings applied. It is the protocol's reference
// behaviour, small enough to read in one sitting: idempotent applies keyed by Request.Key,
// slow work (an apply finishes after PollsToFinish reads of its operation), failures as
// answers (settings {"fail": "reason"} make the work fail), drift between what was applied and
// what is (Tamper changes an item behind its back).
type Reference struct {
	pair          catalog.Pair
	pollsToFinish int

	mu      sync.Mutex
	applied map[string]map[string]any // application → settings last applied
	actual  map[string]map[string]any // application → the item as it is
	ops     map[string]*refOp
	byKey   map[string]string // Request.Key → operation id
	seq     int
}

type refOp struct {
	op        protocol.Operation
	req       protocol.Request
	remaining int
}

var (
	_ protocol.Handler         = (*Reference)(nil)
	_ protocol.OperationReader = (*Reference)(nil)
)

// NewReference returns a reference provisioner for pair whose applies finish after
// pollsToFinish reads of their operation (at least 1, so that every apply answers 202).
func NewReference(pair catalog.Pair, pollsToFinish int) *Reference {
	if pollsToFinish < 1 {
		pollsToFinish = 1
	}
	return &Reference{
		pair: pair, pollsToFinish: pollsToFinish,
		applied: map[string]map[string]any{}, actual: map[string]map[string]any{},
		ops: map[string]*refOp{}, byKey: map[string]string{},
	}
}

// Backend returns a protocol.Backend serving only this reference's pair.
func (r *Reference) Backend() protocol.Backend {
	m := protocol.NewMux()
	_ = m.Handle(r.pair, r) // a fresh Mux cannot hold the pair already
	return m
}

func settingsOf(req *protocol.Request) (map[string]any, error) {
	m := map[string]any{}
	if len(req.Settings) == 0 {
		return m, nil
	}
	if err := json.Unmarshal(req.Settings, &m); err != nil {
		return nil, err
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}

func (r *Reference) resource(app string) protocol.Resource {
	cur, ok := r.actual[app]
	return protocol.Resource{Resource: app, Type: "reference-item", ID: "ref-" + app, Exists: ok, Properties: maps.Clone(cur)}
}

func (r *Reference) Plan(_ context.Context, req *protocol.Request) (protocol.PlanAnswer, error) {
	want, err := settingsOf(req)
	if err != nil {
		return protocol.PlanAnswer{Outcome: protocol.OutcomeFailed, Failure: protocol.Failed("InvalidSettings", err.Error())}, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, exists := r.actual[req.Application]
	ch := protocol.Change{Resource: req.Application, Type: "reference-item", Operations: []string{}}
	switch {
	case req.Desired() == protocol.EnsureAbsent && exists:
		ch.Action, ch.Before, ch.Operations = protocol.ActionDelete, maps.Clone(cur), []string{"reference.delete"}
	case req.Desired() == protocol.EnsureAbsent:
		ch.Action = protocol.ActionNone
	case !exists:
		ch.Action, ch.After, ch.Operations = protocol.ActionCreate, want, []string{"reference.create"}
	case !reflect.DeepEqual(cur, want):
		ch.Action, ch.Before, ch.After, ch.Operations = protocol.ActionUpdate, maps.Clone(cur), want, []string{"reference.update"}
	default:
		ch.Action, ch.Before = protocol.ActionNone, maps.Clone(cur)
	}
	return protocol.PlanAnswer{Outcome: protocol.OutcomeSucceeded, Changes: []protocol.Change{ch}}, nil
}

func (r *Reference) Apply(_ context.Context, req *protocol.Request) (protocol.ApplyAnswer, error) {
	if _, err := settingsOf(req); err != nil {
		return protocol.ApplyAnswer{Outcome: protocol.OutcomeFailed, Failure: protocol.Failed("InvalidSettings", err.Error())}, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	key := req.Key()
	// A failed apply is not remembered: repeating it is how a caller retries the work.
	if id, ok := r.byKey[key]; ok && r.ops[id].op.Outcome != protocol.OutcomeFailed {
		return applyAnswer(r.ops[id].op), nil
	}
	r.seq++
	id := fmt.Sprintf("refop-%d", r.seq)
	r.ops[id] = &refOp{
		req:       *req,
		remaining: r.pollsToFinish,
		op: protocol.Operation{
			OperationID: id, Outcome: protocol.OutcomeInProgress,
			Kind: req.Kind, Type: req.Type, Application: req.Application, Progress: "queued",
		},
	}
	r.byKey[key] = id
	return applyAnswer(r.ops[id].op), nil
}

// applyAnswer is what an apply answers for an operation: accepted while it runs, its result
// once final, so that a repeated apply gives the same result.
func applyAnswer(op protocol.Operation) protocol.ApplyAnswer {
	a := protocol.ApplyAnswer{OperationID: op.OperationID, Resources: op.Resources, Outputs: op.Outputs, Failure: op.Failure}
	if op.Outcome.Final() {
		a.Outcome = op.Outcome
	} else {
		a.Outcome = protocol.OutcomeAccepted
	}
	return a
}

func (r *Reference) Operation(_ context.Context, id string) (protocol.Operation, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o, ok := r.ops[id]
	if !ok {
		return protocol.Operation{}, protocol.ErrUnknownOperation
	}
	if !o.op.Outcome.Final() {
		o.remaining--
		o.op.Progress = "working"
		if o.remaining <= 0 {
			r.finish(o)
		}
	}
	return o.op, nil
}

// finish does the work of an operation; the caller holds r.mu.
func (r *Reference) finish(o *refOp) {
	app := o.req.Application
	want, _ := settingsOf(&o.req)
	if reason, ok := want["fail"].(string); ok && o.req.Desired() == protocol.EnsurePresent {
		o.op.Outcome, o.op.Failure = protocol.OutcomeFailed, protocol.Failed("WorkFailed", reason)
		return
	}
	if o.req.Desired() == protocol.EnsureAbsent {
		delete(r.actual, app)
		delete(r.applied, app)
	} else {
		r.actual[app] = maps.Clone(want)
		r.applied[app] = maps.Clone(want)
	}
	o.op.Outcome, o.op.Progress = protocol.OutcomeSucceeded, "done"
	o.op.Resources = []protocol.Resource{r.resource(app)}
	o.op.Outputs = map[string]any{"id": "ref-" + app}
}

func (r *Reference) Inspect(_ context.Context, req *protocol.Request) (protocol.InspectAnswer, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	app := req.Application
	ans := protocol.InspectAnswer{Outcome: protocol.OutcomeSucceeded, Resources: []protocol.Resource{r.resource(app)}}
	applied, wasApplied := r.applied[app]
	cur, exists := r.actual[app]
	switch {
	case wasApplied && !exists:
		ans.Drift = []protocol.Drift{{Resource: app, Field: "exists", Applied: true, Actual: false}}
	case wasApplied:
		keys := map[string]bool{}
		for k := range applied {
			keys[k] = true
		}
		for k := range cur {
			keys[k] = true
		}
		names := make([]string, 0, len(keys))
		for k := range keys {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			if !reflect.DeepEqual(applied[k], cur[k]) {
				ans.Drift = append(ans.Drift, protocol.Drift{Resource: app, Field: k, Applied: applied[k], Actual: cur[k]})
			}
		}
	}
	return ans, nil
}

// Tamper changes application's item behind the provisioner's back (as a person with cloud
// console access would), so that inspect must report drift.
func (r *Reference) Tamper(application string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.actual[application]; ok {
		cur["tamperedWith"] = true
	}
}
