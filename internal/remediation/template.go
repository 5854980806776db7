// Package remediation runs remediation workflows: a template of steps (precondition, approval,
// execute, pause_service, validate) that the engine drives as a job of kind remediation on the
// same ledger, lease and fencing as provisioning jobs. Approval gates park the job in
// awaiting_user without a worker; the steps write the workflow's timeline.
package remediation

import (
	"fmt"
	"slices"
	"strings"
)

// StepKind is what a template step does.
type StepKind string

const (
	KindPrecondition StepKind = "precondition"
	KindApproval     StepKind = "approval"
	KindExecute      StepKind = "execute"
	KindPauseService StepKind = "pause_service"
	KindValidate     StepKind = "validate"
)

// StepDef is one step of a template. ID never changes once released: a later revision that
// keeps the step keeps its ID, so approvals addressed by ID survive revisions.
type StepDef struct {
	ID   string   `json:"id"`
	Name string   `json:"name"`
	Kind StepKind `json:"kind"`
}

// Template is the ordered steps of one action.
type Template struct {
	Name     string    `json:"name"`
	Revision int       `json:"revision"`
	Action   string    `json:"action"`
	Types    []string  `json:"resourceTypes"`
	Steps    []StepDef `json:"steps"`
}

// Actions.
const (
	ActionStop        = "stop"
	ActionStart       = "start"
	ActionScaleToZero = "scale_to_zero"
	ActionScaleBack   = "scale_back"
	ActionPause       = "pause"
)

// Resource types the executors know.
const (
	TypeEC2Instance = "ec2-instance"
	TypeRDSInstance = "rds-instance"
	TypeASG         = "asg"
)

// templates are the released workflows. Stopping a VM or a database and scaling to zero take
// capacity away, and a pause may not be reversible: each has an approval gate. Starting and
// scaling back only restore capacity.
var templates = []Template{
	{Name: "stop-instance", Revision: 1, Action: ActionStop, Types: []string{TypeEC2Instance, TypeRDSInstance}, Steps: []StepDef{
		{ID: "5b0c2f1e-4d1a-4c59-9d0e-3f6a1c2b7e01", Name: "precondition", Kind: KindPrecondition},
		{ID: "5b0c2f1e-4d1a-4c59-9d0e-3f6a1c2b7e02", Name: "approval", Kind: KindApproval},
		{ID: "5b0c2f1e-4d1a-4c59-9d0e-3f6a1c2b7e03", Name: "execute", Kind: KindExecute},
		{ID: "5b0c2f1e-4d1a-4c59-9d0e-3f6a1c2b7e04", Name: "validate", Kind: KindValidate},
	}},
	{Name: "start-instance", Revision: 1, Action: ActionStart, Types: []string{TypeEC2Instance, TypeRDSInstance}, Steps: []StepDef{
		{ID: "8e41d7a2-0b6f-4f3e-a5c4-21d9b0e6f101", Name: "precondition", Kind: KindPrecondition},
		{ID: "8e41d7a2-0b6f-4f3e-a5c4-21d9b0e6f103", Name: "execute", Kind: KindExecute},
		{ID: "8e41d7a2-0b6f-4f3e-a5c4-21d9b0e6f104", Name: "validate", Kind: KindValidate},
	}},
	{Name: "scale-to-zero", Revision: 1, Action: ActionScaleToZero, Types: []string{TypeASG}, Steps: []StepDef{
		{ID: "c3a9e5b7-62d4-4a0f-8b1e-9f07d4c3a201", Name: "precondition", Kind: KindPrecondition},
		{ID: "c3a9e5b7-62d4-4a0f-8b1e-9f07d4c3a202", Name: "approval", Kind: KindApproval},
		{ID: "c3a9e5b7-62d4-4a0f-8b1e-9f07d4c3a203", Name: "execute", Kind: KindExecute},
		{ID: "c3a9e5b7-62d4-4a0f-8b1e-9f07d4c3a204", Name: "validate", Kind: KindValidate},
	}},
	{Name: "scale-back", Revision: 1, Action: ActionScaleBack, Types: []string{TypeASG}, Steps: []StepDef{
		{ID: "1f6d8b3c-9a2e-4e7b-b0d5-6c4e2a9f8301", Name: "precondition", Kind: KindPrecondition},
		{ID: "1f6d8b3c-9a2e-4e7b-b0d5-6c4e2a9f8303", Name: "execute", Kind: KindExecute},
		{ID: "1f6d8b3c-9a2e-4e7b-b0d5-6c4e2a9f8304", Name: "validate", Kind: KindValidate},
	}},
	// pause is for resources without a stop primitive; any type may ask, and pause_service
	// decides (it refuses datastores outright).
	{Name: "pause-service", Revision: 1, Action: ActionPause, Steps: []StepDef{
		{ID: "9d27c4e0-3b5a-4f81-a6e2-0c8b7d5f9401", Name: "precondition", Kind: KindPrecondition},
		{ID: "9d27c4e0-3b5a-4f81-a6e2-0c8b7d5f9402", Name: "approval", Kind: KindApproval},
		{ID: "9d27c4e0-3b5a-4f81-a6e2-0c8b7d5f9403", Name: "pause_service", Kind: KindPauseService},
		{ID: "9d27c4e0-3b5a-4f81-a6e2-0c8b7d5f9404", Name: "validate", Kind: KindValidate},
	}},
}

// Templates returns the released templates.
func Templates() []Template { return slices.Clone(templates) }

// TemplateFor picks the template of action for resourceType.
func TemplateFor(action, resourceType string) (Template, error) {
	var actions []string
	for _, t := range templates {
		actions = append(actions, t.Action)
		if t.Action != action {
			continue
		}
		if t.Types == nil || slices.Contains(t.Types, resourceType) {
			return t, nil
		}
		return Template{}, fmt.Errorf("action %s applies to %s, not %q", action, strings.Join(t.Types, ", "), resourceType)
	}
	return Template{}, fmt.Errorf("%q is not an action; one of %s", action, strings.Join(actions, ", "))
}

func templateNamed(name string, revision int) (Template, bool) {
	for _, t := range templates {
		if t.Name == name && t.Revision == revision {
			return t, true
		}
	}
	return Template{}, false
}

// datastorePrefixes name the resource types of customer databases and caches. A pause is
// never a safe way to stop one: they stop only through their own stop API, after approval.
var datastorePrefixes = []string{"rds", "aurora", "cloudsql", "elasticache", "azure-sql", "postgres", "mysql"}

// IsDatastore reports whether resourceType is a customer datastore.
func IsDatastore(resourceType string) bool {
	t := strings.ToLower(resourceType)
	for _, p := range datastorePrefixes {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}
