// Package plan answers, before a job runs, what it will do: its steps, the resources each step
// creates or adopts, the cloud operations each step calls, the least-privilege policy that
// grants exactly those operations, and the estimated monthly cost.
package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/groundworkhq/groundwork/internal/job"
)

// Resource actions.
const (
	ActionCreate = "create"
	ActionAdopt  = "adopt"
)

// Policy formats.
const (
	FormatAWS   = "aws-iam-policy"
	FormatGCP   = "gcp-custom-role"
	FormatAzure = "azure-role-definition"
	FormatNone  = "none"
)

// Resource is one thing a step creates or adopts.
type Resource struct {
	Type   string `json:"type"`
	Action string `json:"action"`
	Name   string `json:"name"`
	// Count is how many of them; omitted when the request does not fix it (subnets and route
	// tables follow the region's zones).
	Count int `json:"count,omitempty"`
}

// Step is one step of the job's pipeline, in order.
type Step struct {
	Name      string     `json:"name"`
	Resources []Resource `json:"resources"`
	// Operations are the cloud operations the step's Do and its Undo call, sorted; the undo's
	// are included because the same credentials tear the job down.
	Operations []string `json:"operations"`
}

// NewStep is a step as a source reports it: its operations sorted, each once, and both lists
// empty rather than nil, so that a plan's JSON always holds both arrays.
func NewStep(name string, res []Resource, ops []string) Step {
	if res == nil {
		res = []Resource{}
	}
	return Step{Name: name, Resources: res, Operations: SortedUnique(ops)}
}

// SortedUnique returns ops sorted, each once (never nil).
func SortedUnique(ops []string) []string {
	out := slices.Clone(ops)
	slices.Sort(out)
	out = slices.Compact(out)
	if out == nil {
		out = []string{}
	}
	return out
}

// Policy is the least-privilege grant for a plan, in the cloud's own format.
type Policy struct {
	Format   string          `json:"format"`
	Document json.RawMessage `json:"document"`
}

// Plan is the answer of POST /api/provisioning-jobs/plan.
type Plan struct {
	Provider string `json:"provider"`
	Region   string `json:"region,omitempty"`
	Steps    []Step `json:"steps"`
	// OperationsKnown is false when the provider cannot say what a job of this family calls
	// (a family it has no table for): the steps then list no operations, which is not "none".
	OperationsKnown bool     `json:"operationsKnown"`
	Policy          Policy   `json:"policy"`
	Cost            Estimate `json:"cost"`
}

// Operations returns every operation of the plan, each once, in first-seen order.
func (p *Plan) Operations() []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range p.Steps {
		for _, op := range s.Operations {
			if !seen[op] {
				seen[op] = true
				out = append(out, op)
			}
		}
	}
	return out
}

// Source plans the jobs of one provider. stepNames are the job's pipeline steps, in order.
type Source interface {
	// Knows reports whether the source can list every operation of j's family.
	Knows(j *job.Job) bool
	Steps(ctx context.Context, j *job.Job, stepNames []string) ([]Step, error)
	Policy(j *job.Job, operations []string) (Policy, error)
}

// Coster prices a job's resources; region is the job's space's.
type Coster interface {
	Estimate(ctx context.Context, j *job.Job, region string) (Estimate, error)
}

// Planner plans a job with the source of its provider.
type Planner struct {
	Sources map[string]Source
	Cost    Coster
}

// Plan plans j, laid out but not stored, whose pipeline has stepNames; region is its space's.
func (p *Planner) Plan(ctx context.Context, j *job.Job, region string, stepNames []string) (*Plan, error) {
	src, ok := p.Sources[j.Provider]
	if !ok {
		src = noCloud{}
	}
	steps, err := src.Steps(ctx, j, stepNames)
	if err != nil {
		return nil, fmt.Errorf("plan steps of %s: %w", j.ID, err)
	}
	out := &Plan{Provider: j.Provider, Region: region, Steps: steps, OperationsKnown: src.Knows(j)}
	if out.Policy, err = src.Policy(j, out.Operations()); err != nil {
		return nil, fmt.Errorf("plan policy of %s: %w", j.ID, err)
	}
	if p.Cost != nil {
		if out.Cost, err = p.Cost.Estimate(ctx, j, region); err != nil {
			return nil, fmt.Errorf("estimate cost of %s: %w", j.ID, err)
		}
	}
	return out, nil
}

// noCloud plans a job on a provider with no cloud account (a cluster space, a remote
// provisioner): its steps, no cloud operations, no policy.
type noCloud struct{}

// Knows implements Source: what the job calls, if anything, is not known here.
func (noCloud) Knows(*job.Job) bool { return false }

func (noCloud) Steps(_ context.Context, _ *job.Job, names []string) ([]Step, error) {
	return BareSteps(names), nil
}

func (noCloud) Policy(*job.Job, []string) (Policy, error) { return NoPolicy(), nil }

// NoPolicy is the policy of a plan that calls no cloud.
func NoPolicy() Policy { return Policy{Format: FormatNone, Document: json.RawMessage(`{}`)} }

// BareSteps are steps with neither resources nor operations.
func BareSteps(names []string) []Step {
	out := make([]Step, len(names))
	for i, n := range names {
		out[i] = Step{Name: n, Resources: []Resource{}, Operations: []string{}}
	}
	return out
}

// ReadOnlyGrants reports whether a read-only grant covers op: the reads, but never a
// secret's value. AWS actions read with Describe*, List* and Get*; GCP permissions
// (service.resource.verb) with get, list and the get* verbs; Azure actions end in /read.
func ReadOnlyGrants(op string) bool {
	if _, name, ok := strings.Cut(op, ":"); ok {
		if op == "secretsmanager:GetSecretValue" {
			return false
		}
		return strings.HasPrefix(name, "Describe") || strings.HasPrefix(name, "List") || strings.HasPrefix(name, "Get")
	}
	if strings.HasPrefix(op, "Microsoft.") {
		return strings.HasSuffix(op, "/read") && !strings.Contains(op, "/secrets/")
	}
	if parts := strings.Split(op, "."); len(parts) >= 3 && !strings.Contains(op, "/") {
		verb := parts[len(parts)-1]
		secret := strings.HasPrefix(op, "secretmanager.versions.") || verb == "getAuthString" || verb == "getCredentials"
		return !secret && (verb == "get" || verb == "list" || strings.HasPrefix(verb, "get") && verb != "getIamPolicy" || strings.HasPrefix(verb, "list"))
	}
	return false
}

// NotGranted returns the operations of p a read-only grant does not cover, in plan order.
func (p *Plan) NotGranted() []string {
	var out []string
	for _, op := range p.Operations() {
		if !ReadOnlyGrants(op) {
			out = append(out, op)
		}
	}
	return out
}
