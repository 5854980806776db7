// Package jobs admits and changes provisioning jobs: the checks and layout every entry point
// shares (the HTTP API, install-component, the provisioner protocol), and the changes a
// client asks of a stored job (rename, promote a draft, VM operations, resize, retry,
// cancel). It decides nothing about who the caller is: the authorisation decision is passed
// in or made before, and refusals come back as a Refusal that each entry point renders its
// own way (the API as an RFC 9457 problem); the store's sentinel errors pass as they are.
package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/groundworkhq/groundwork/internal/audit"
	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
	"github.com/groundworkhq/groundwork/internal/plan"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// Store is what the service reads and changes of the store.
type Store interface {
	GetSpace(ctx context.Context, orgID, id string) (*store.Space, error)
	GetCloudAccount(ctx context.Context, orgID, id string) (*store.CloudAccount, error)
	GetJob(ctx context.Context, p *store.GetJobParams) (*job.Job, error)
	// Audited runs fn in one transaction and records e with it if fn succeeds.
	Audited(ctx context.Context, e *audit.Entry, fn func(tx store.Tx) error) error
}

// Planner answers what a job will do before it runs (internal/plan); the read-only account
// check compares its operations with what a read-only grant covers.
type Planner interface {
	Plan(ctx context.Context, j *job.Job, region string, steps []string) (*plan.Plan, error)
}

// Forgetter deletes the secrets an owner stored.
type Forgetter interface {
	Forget(ctx context.Context, owner secrets.Owner) error
}

// Service admits and changes jobs.
type Service struct {
	Store     Store
	Pipelines *pipeline.Registry
	// Catalog, if set, checks a create's config against its type's schema and fills defaults.
	Catalog *catalog.Catalog
	// Planner plans jobs (nil: steps only, no cloud operations).
	Planner Planner
	// VMOps plans the VM operations and resizes of completed vm_pool jobs (nil: refused as
	// not supported).
	VMOps vmpool.Operator
	// Secrets, if set, loses a job's secrets when it is cancelled before any step ran.
	Secrets Forgetter
	Log     *slog.Logger
	Now     func() time.Time
}

// Request is a job as asked for.
type Request struct {
	SpaceID string
	Kind    string
	Mode    string
	Draft   bool
	Name    string
	Tags    map[string]string
	Config  json.RawMessage
	// PlanOnly lays the job out to be planned, not run: a read-only cloud account is not
	// refused, since the plan is how its owner learns what to grant.
	PlanOnly bool
}

// Reason says why a request was refused.
type Reason int

const (
	// Invalid: the request is wrong as sent (the API's 400).
	Invalid Reason = iota
	// NotFound: it names a space that does not exist for the caller (404).
	NotFound
	// Conflict: the request is sound but the job is not in a state that allows it (409).
	Conflict
	// Forbidden: the space's cloud account does not grant what the job needs (403).
	Forbidden
)

// Refusal is a request refused before anything was stored: what is wrong, per field.
type Refusal struct {
	Reason Reason
	Detail string
	Fields []validation.FieldError
	// FixHint says what to change for the request to succeed (the policy a read-only
	// account needs).
	FixHint string
	// Err is the condition behind the refusal, if it has a name (store.ErrVersionConflict for
	// a stale version, *job.TransitionError).
	Err error
}

func (r *Refusal) Unwrap() error { return r.Err }

func (r *Refusal) Error() string {
	if len(r.Fields) == 0 {
		return r.Detail
	}
	return r.Detail + ": " + validation.Error(r.Fields).Error()
}

// ConfigRefusal is a pipeline's or the catalog's refusal of a config, as a Refusal; err
// without fields is refused with its text.
func ConfigRefusal(err error) *Refusal {
	if f, ok := validation.Fields(err); ok {
		return &Refusal{Reason: Invalid, Detail: "the config is invalid", Fields: f}
	}
	var ve *catalog.ValidationError
	if errors.As(err, &ve) {
		return &Refusal{Reason: Invalid, Detail: "the config is invalid", Fields: CatalogFields(ve)}
	}
	return &Refusal{Reason: Invalid, Detail: err.Error()}
}

// CatalogFields names the catalog's refusals as fields of the request's config.
func CatalogFields(ve *catalog.ValidationError) []validation.FieldError {
	out := make([]validation.FieldError, len(ve.Fields))
	for i, f := range ve.Fields {
		name := "config"
		if f.Field != "" {
			name = "config." + f.Field
		}
		out[i] = validation.FieldError{Field: name, Rule: f.Rule, Message: f.Message}
	}
	return out
}

// Authorize decides whether the caller may create a job in sp; its error is returned as is.
type Authorize func(ctx context.Context, sp *store.Space) error

// Admit checks req for org and lays out the job it asks for, with its step records, without
// storing it: the request's own fields, the space, the caller's right to create there
// (authorize), the catalog's schema and defaults (create only), the family's pipeline
// (which refuses a provider it cannot serve), and unless req.PlanOnly the space's cloud
// account (see checkAccount). A refusal is a *Refusal, or authorize's error.
func (s *Service) Admit(ctx context.Context, orgID string, req Request, authorize Authorize) (*job.Job, error) {
	var fields []validation.FieldError
	if req.SpaceID == "" {
		fields = append(fields, validation.FieldError{Field: "spaceID", Rule: "required", Message: "is required"})
	}
	family := job.Family(req.Kind)
	if req.Kind == "" {
		fields = append(fields, validation.FieldError{Field: "kind", Rule: "required", Message: "is required"})
	} else if _, ok := s.Pipelines.Get(family); !ok {
		fields = append(fields, validation.FieldError{Field: "kind", Rule: "enum",
			Message: fmt.Sprintf("%q is not a kind this server provisions; one of %s", req.Kind, s.kinds())})
	}
	mode := job.Mode(req.Mode)
	if mode == "" {
		mode = job.ModeCreate
	}
	if mode != job.ModeCreate && mode != job.ModeAdopt {
		fields = append(fields, validation.FieldError{Field: "mode", Rule: "enum", Message: "must be create or adopt"})
	}
	config := bytes.TrimSpace(req.Config)
	if len(config) == 0 || string(config) == "null" {
		config = []byte(`{}`)
	}
	if config[0] != '{' {
		fields = append(fields, validation.FieldError{Field: "config", Rule: "type", Message: "must be an object"})
	}
	if len(req.Name) > 200 {
		fields = append(fields, validation.FieldError{Field: "name", Rule: "maxLength", Message: "must be at most 200 characters"})
	}
	if len(fields) > 0 {
		return nil, &Refusal{Reason: Invalid, Detail: "the job request is invalid", Fields: fields}
	}
	space, err := s.Store.GetSpace(ctx, orgID, req.SpaceID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &Refusal{Reason: NotFound, Detail: "space not found",
			Fields: []validation.FieldError{{Field: "spaceID", Rule: "exists", Message: "no space " + req.SpaceID + " in your organisation"}}}
	}
	if err != nil {
		return nil, err
	}
	if authorize != nil {
		if err := authorize(ctx, space); err != nil {
			return nil, err
		}
	}
	if s.Catalog != nil && mode == job.ModeCreate {
		_, withDefaults, err := s.Catalog.ValidateJob(family, config)
		var ve *catalog.ValidationError
		switch {
		case errors.As(err, &ve):
			return nil, &Refusal{Reason: Invalid, Detail: "the config is invalid for kind " + req.Kind, Fields: CatalogFields(ve)}
		case err == nil:
			config = withDefaults
		}
		// A family the catalog has no type for is validated by its pipeline alone.
	}
	name := req.Name
	if name == "" {
		// Most configs name their resource; the job shows that name unless told otherwise.
		var c struct {
			Name any `json:"name"`
		}
		if json.Unmarshal(config, &c) == nil {
			if n, ok := c.Name.(string); ok && len(n) <= 200 {
				name = n
			}
		}
	}
	pl, _ := s.Pipelines.Get(family)
	status := job.StatusQueued
	if req.Draft {
		status = job.StatusDraft
	}
	now := s.Now()
	j := &job.Job{
		ID: "job_" + ulid.Make().String(), OrgID: orgID, SpaceID: space.ID, Kind: job.KindProvisioning,
		Family: family, Provider: space.Provider, Mode: mode, Name: name, Tags: req.Tags,
		Config: json.RawMessage(config), Infra: json.RawMessage(`{}`), Status: status, Phase: job.PhaseApply,
		LeaseTTL: pl.LeaseTTL(), NextRunAt: now,
	}
	if err := pl.Validate(ctx, j); err != nil {
		return nil, ConfigRefusal(err)
	}
	j.Steps = pipeline.NewStepRecords(pl.Steps(j))
	if req.PlanOnly {
		// A plan stores nothing: what validation kept for the job in the secret store goes
		// (the plan reads no secret).
		s.forget(ctx, j, "planned only")
		return j, nil
	}
	if err := s.checkAccount(ctx, j, space); err != nil {
		s.forget(ctx, j, "refused")
		return nil, err
	}
	return j, nil
}

// kinds lists the families this server provisions.
func (s *Service) kinds() string {
	var names []string
	for _, f := range job.Families {
		if _, ok := s.Pipelines.Get(f); ok {
			names = append(names, string(f))
		}
	}
	return strings.Join(names, ", ")
}
