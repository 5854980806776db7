package remediation

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/groundworkhq/groundwork/internal/job"

	"github.com/groundworkhq/groundwork/internal/validation"
)

// CreateRequest starts a workflow for a recommendation.
type CreateRequest struct {
	RecommendationID string `json:"recommendationID" required:"true" description:"the recommendation being remediated"`
	SubjectType      string `json:"subjectType" required:"true" enum:"resource" description:"what subjectID names; resource is the one kind today"`
	SubjectID        string `json:"subjectID" required:"true" description:"the cloud resource's id (an instance id, a DB instance identifier, an ASG name)"`
	SpaceID          string `json:"spaceID" required:"true" description:"the space (cloud account and region) the resource lives in"`
	Action           string `json:"action" required:"true" enum:"stop,start,scale_to_zero,scale_back,pause"`
	ResourceType     string `json:"resourceType" required:"true" description:"ec2-instance, rds-instance, asg, or another cloud type (pause only)"`
	Capacity         *int32 `json:"capacity,omitempty" minimum:"1" description:"the desired capacity scale_back restores"`
}

// FieldError names a bad field of a request.
type FieldError = validation.FieldError

// NewJob validates req and lays out the job (not stored). provider is the space's.
func NewJob(req *CreateRequest, orgID, provider string, steps func(*job.Job) []job.StepRecord, leaseTTL time.Duration, now time.Time) (*job.Job, []FieldError) {
	var fields []FieldError
	req2 := func(name, v string) {
		if v == "" {
			fields = append(fields, FieldError{Field: name, Rule: "required", Message: "is required"})
		} else if len(v) > 256 {
			fields = append(fields, FieldError{Field: name, Rule: "maxLength", Message: "must be at most 256 characters"})
		}
	}
	req2("recommendationID", req.RecommendationID)
	req2("subjectType", req.SubjectType)
	req2("subjectID", req.SubjectID)
	req2("spaceID", req.SpaceID)
	req2("action", req.Action)
	req2("resourceType", req.ResourceType)
	if req.SubjectType != "" && req.SubjectType != "resource" {
		fields = append(fields, FieldError{Field: "subjectType", Rule: "enum", Message: "must be resource"})
	}
	var t Template
	if req.Action != "" && req.ResourceType != "" {
		var err error
		if t, err = TemplateFor(req.Action, req.ResourceType); err != nil {
			fields = append(fields, FieldError{Field: "action", Rule: "enum", Message: err.Error()})
		}
	}
	if req.Action == ActionScaleBack && (req.Capacity == nil || *req.Capacity < 1) {
		fields = append(fields, FieldError{Field: "capacity", Rule: "required", Message: "scale_back needs a capacity of 1 or more"})
	}
	if req.Action != ActionScaleBack && req.Capacity != nil {
		fields = append(fields, FieldError{Field: "capacity", Rule: "forbidden", Message: "only scale_back takes a capacity"})
	}
	if len(fields) > 0 {
		return nil, fields
	}
	cfg, err := json.Marshal(Config{RecommendationID: req.RecommendationID, Action: req.Action, ResourceType: req.ResourceType,
		ResourceID: req.SubjectID, Capacity: req.Capacity, Template: t.Name, Revision: t.Revision})
	if err != nil {
		return nil, []FieldError{{Field: "", Rule: "encode", Message: err.Error()}}
	}
	j := &job.Job{ID: "job_" + ulid.Make().String(), OrgID: orgID, SpaceID: req.SpaceID, Kind: job.KindRemediation,
		Family: Family, Provider: provider, Mode: job.ModeCreate, Name: req.Action + " " + req.ResourceType + " " + req.SubjectID,
		SubjectType: req.SubjectType, SubjectID: req.SubjectID, Config: cfg, Infra: json.RawMessage(`{}`),
		Status: job.StatusQueued, Phase: job.PhaseApply, LeaseTTL: leaseTTL, NextRunAt: now}
	j.Steps = steps(j)
	return j, nil
}

// Errors of Decide.
var (
	// ErrNoSuchStep: the job's template has no approval step by that id or name.
	ErrNoSuchStep = errors.New("no such approval step")
	// ErrNotAwaiting: the step is not the gate the job is parked at.
	ErrNotAwaiting = errors.New("the step is not awaiting a decision")
)

// Decide records a decision for the approval step named by id (or, if byName, by name) on a
// job parked at it, returning the new config and the step.
func Decide(j *job.Job, key string, byName bool, d Decision) (json.RawMessage, StepDef, error) {
	steps, err := StepsOf(j)
	if err != nil {
		return nil, StepDef{}, err
	}
	var step StepDef
	idx := -1
	for i, s := range steps {
		if s.Kind == KindApproval && ((byName && s.Name == key) || (!byName && s.ID == key)) {
			step, idx = s, i
		}
	}
	if idx < 0 {
		return nil, StepDef{}, ErrNoSuchStep
	}
	if j.Status != job.StatusAwaitingUser || j.CancelRequested || idx >= len(j.Steps) || j.Steps[idx].Status != job.StepWaiting {
		return nil, step, fmt.Errorf("%w: the job is %s and step %s is %s", ErrNotAwaiting, j.Status, step.Name, stepStatus(j, idx))
	}
	c, err := ConfigOf(j)
	if err != nil {
		return nil, step, err
	}
	if _, done := c.Decisions[step.ID]; done {
		return nil, step, fmt.Errorf("%w: step %s was already decided", ErrNotAwaiting, step.Name)
	}
	if c.Decisions == nil {
		c.Decisions = map[string]Decision{}
	}
	c.Decisions[step.ID] = d
	out, err := json.Marshal(c)
	return out, step, err
}

func stepStatus(j *job.Job, i int) job.StepStatus {
	if i < len(j.Steps) {
		return j.Steps[i].Status
	}
	return ""
}
