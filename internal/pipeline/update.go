package pipeline

import (
	"encoding/json"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// Action is what a configuration update does to one resource.
type Action string

const (
	// ActionInPlace changes the resource where it stands; it keeps its identity and data.
	ActionInPlace Action = "in-place"
	// ActionReplace makes a new resource and removes the old one.
	ActionReplace Action = "replace"
	// ActionNoOp leaves the resource as it is.
	ActionNoOp Action = "no-op"
)

// FieldChange is one config field an update changes, with its value before and after.
type FieldChange struct {
	Field string `json:"field"`
	From  any    `json:"from"`
	To    any    `json:"to"`
}

// ResourceChange is what an update does to one resource of the job.
type ResourceChange struct {
	Resource string        `json:"resource"`
	Action   Action        `json:"action"`
	Changes  []FieldChange `json:"changes"`
	// Disruption says what the resource's users notice: "none", "brief restart", ...
	Disruption string `json:"disruption"`
	// DataLoss is set when the change drops data (backups, rows); such a change is refused
	// unless the request allows it.
	DataLoss bool `json:"dataLoss,omitempty"`
}

// UpdateRequest is a new configuration for a completed job.
type UpdateRequest struct {
	// Config is the whole new config, already checked against the catalog's schema.
	Config json.RawMessage
	// AllowDataLoss lets through a change that drops data.
	AllowDataLoss bool
	// ApplyImmediately, when false, asks the cloud to apply a disruptive change in its next
	// maintenance window instead of now; nil is true.
	ApplyImmediately *bool
}

// UpdatePlan is how a family would carry out an update: the diff per resource, and the job's
// new config and step records (the steps that re-run are pending again; the engine runs them
// like any pending steps, leased, fenced and resumable).
type UpdatePlan struct {
	Resources []ResourceChange `json:"resources"`
	Config    json.RawMessage  `json:"config"`
	Steps     []job.StepRecord `json:"-"`
	// Rerun names the steps that run again, in order.
	Rerun []string `json:"rerun"`
}

// Changed reports whether the plan changes any resource.
func (p *UpdatePlan) Changed() bool {
	for _, r := range p.Resources {
		if r.Action != ActionNoOp {
			return true
		}
	}
	return false
}

// Reopen sets the named steps of j pending again in p's step records, and with them every
// step after the first of them that an earlier update left unfinished (failed or cut short),
// so that this update runs through them in the job's order. Rerun lists the pending steps in
// that order. A name j has no step of is refused as a config error.
func (p *UpdatePlan) Reopen(j *job.Job, names ...string) error {
	first := len(p.Steps)
	for _, name := range names {
		i := j.StepIndex(name)
		if i < 0 || i >= len(p.Steps) {
			return validation.New("config", "steps", "the job has no "+name+" step")
		}
		p.Steps[i] = job.StepRecord{Name: name, Status: job.StepPending, Message: "config update"}
		first = min(first, i)
	}
	p.Rerun = []string{}
	for i := first; i < len(p.Steps); i++ {
		s := p.Steps[i]
		if !s.Status.Completed() && s.Status != job.StepPending {
			p.Steps[i] = job.StepRecord{Name: s.Name, Status: job.StepPending, Message: "config update"}
		}
		if p.Steps[i].Status == job.StepPending {
			p.Rerun = append(p.Rerun, s.Name)
		}
	}
	return nil
}
