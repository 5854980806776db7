package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/groundworkhq/groundwork/internal/audit"
	"github.com/groundworkhq/groundwork/internal/engine"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// Caller is who asks for a change, as the audit log records it. Whether they may is decided
// before the service is called.
type Caller struct {
	OrgID string
	Actor string
}

// Get reads a provisioning job of the caller's org. Remediation workflows share the ledger
// but are not provisioning jobs: they are store.ErrNotFound here.
func (s *Service) Get(ctx context.Context, orgID, id string) (*job.Job, error) {
	j, err := s.Store.GetJob(ctx, &store.GetJobParams{OrgID: orgID, ID: id})
	if err != nil {
		return nil, err
	}
	if j.Kind == job.KindRemediation {
		return nil, fmt.Errorf("job %s is a remediation workflow: %w", id, store.ErrNotFound)
	}
	return j, nil
}

// Patch is a change of a stored job; nil fields are left as they are.
type Patch struct {
	// Version is the version the caller read; nil applies the change to the job as it is now.
	Version *int64
	Name    *string
	Tags    map[string]string
	// Status may only promote a draft to queued.
	Status *job.Status
	// VMOp is a VM operation on a completed vm_pool job (vmpool.CheckOp names them).
	VMOp *string
	// Min, Max and Desired resize a completed ASG pool in place.
	Min, Max, Desired *int32
	// Config is a whole new config for a live job (see ApplyUpdate); it is a request of its
	// own, with AllowDataLoss and ApplyImmediately.
	Config           json.RawMessage
	AllowDataLoss    bool
	ApplyImmediately *bool
}

// PatchConfig applies p, a patch with a config, as a config update (ApplyUpdate): the job,
// and the revision recorded awaiting approval when the update drops data. The config is a
// request of its own: with any other field of a patch it is refused.
func (s *Service) PatchConfig(ctx context.Context, c Caller, id string, p Patch) (*job.Job, *store.JobRevision, error) {
	if p.Name != nil || p.Tags != nil || p.Status != nil || p.VMOp != nil || p.Min != nil || p.Max != nil || p.Desired != nil {
		return nil, nil, &Refusal{Reason: Invalid, Detail: "a config update is a request of its own",
			Fields: []validation.FieldError{{Field: "config", Rule: "exclusive", Message: "send config (with allowDataLoss, applyImmediately) without name, tags, status, vmOp or min/max/desired"}}}
	}
	return s.ApplyUpdate(ctx, c, id, Update{Version: p.Version, Config: p.Config, AllowDataLoss: p.AllowDataLoss, ApplyImmediately: p.ApplyImmediately})
}

// unconditionalAttempts bounds how often a patch without a version re-reads the job after
// losing a race to the engine's own checkpoints before it gives up with the conflict.
const unconditionalAttempts = 5

// Patch applies p to job id. A refusal is a *Refusal (a stale p.Version is a Conflict that
// wraps store.ErrVersionConflict); the store's sentinel errors pass as they are.
func (s *Service) Patch(ctx context.Context, c Caller, id string, p Patch) (*job.Job, error) {
	if p.Name != nil && len(*p.Name) > 200 {
		return nil, &Refusal{Reason: Invalid, Detail: "bad name",
			Fields: []validation.FieldError{{Field: "name", Rule: "maxLength", Message: "must be at most 200 characters"}}}
	}
	if p.Config != nil {
		out, _, err := s.PatchConfig(ctx, c, id, p)
		return out, err
	}
	if p.AllowDataLoss || p.ApplyImmediately != nil {
		return nil, &Refusal{Reason: Invalid, Detail: "allowDataLoss and applyImmediately go with config",
			Fields: []validation.FieldError{{Field: "config", Rule: "required", Message: "allowDataLoss and applyImmediately qualify a config update"}}}
	}
	// Without a version the caller asks for the change to be applied to whatever the job is
	// now (the older clients' contract); the engine may commit in between, so a lost race is
	// retried on a fresh read rather than handed back as a conflict the caller did not ask for.
	for attempt := 1; ; attempt++ {
		out, err := s.patchOnce(ctx, c, id, &p)
		if errors.Is(err, store.ErrVersionConflict) && p.Version == nil && attempt < unconditionalAttempts {
			continue
		}
		return out, err
	}
}

// patchOnce applies p to the job as it is now.
func (s *Service) patchOnce(ctx context.Context, c Caller, id string, p *Patch) (*job.Job, error) {
	j, err := s.Get(ctx, c.OrgID, id)
	if err != nil {
		return nil, err
	}
	if p.Version != nil && j.Version != *p.Version {
		return nil, &Refusal{Reason: Conflict, Err: store.ErrVersionConflict,
			Detail: fmt.Sprintf("the job is at version %d, not %d; read it again and retry", j.Version, *p.Version)}
	}
	up := &store.UpdateJobParams{OrgID: c.OrgID, ID: j.ID, Version: j.Version, Now: s.Now(), Name: p.Name, Tags: p.Tags}
	if p.Status != nil {
		if *p.Status != job.StatusQueued || j.Status != job.StatusDraft {
			return nil, &Refusal{Reason: Conflict, Detail: fmt.Sprintf("PATCH can only promote a draft to queued; this job is %s", j.Status),
				Fields: []validation.FieldError{{Field: "status", Rule: "transition", Message: "only draft → queued"}}}
		}
		// The account may have been made read-only since the draft was written.
		sp, err := s.space(ctx, j)
		if err != nil {
			return nil, err
		}
		if err := s.checkAccount(ctx, j, sp); err != nil {
			return nil, err
		}
		now := s.Now()
		up.Status, up.NextRunAt = p.Status, &now
	}
	if p.VMOp != nil {
		if err := s.planVMOp(j, *p.VMOp, up); err != nil {
			return nil, err
		}
	}
	resize := p.Min != nil || p.Max != nil || p.Desired != nil
	if resize {
		if err := s.planResize(j, p.Min, p.Max, p.Desired, up); err != nil {
			return nil, err
		}
	}
	action, meta := "provisioning-job.update", map[string]any{"name": p.Name, "tags": p.Tags}
	if p.Status != nil {
		meta["status"] = *p.Status
	}
	if p.VMOp != nil {
		action, meta["vmOp"] = "provisioning-job.vm_op", *p.VMOp
	}
	if resize {
		action, meta["min"], meta["max"], meta["desired"] = "provisioning-job.resize", p.Min, p.Max, p.Desired
	}
	if p.Version == nil {
		meta["unconditional"] = true
	}
	var out *job.Job
	err = s.audited(ctx, c, action, j.ID, meta, func(tx store.Tx) (err error) {
		out, err = tx.UpdateJob(ctx, up)
		return err
	})
	return out, err
}

// planVMOp lays the VM operation op out on up. Which operations exist is vmpool's rule.
func (s *Service) planVMOp(j *job.Job, op string, up *store.UpdateJobParams) error {
	if err := vmpool.CheckOp(op); err != nil {
		fields, _ := validation.Fields(err)
		return &Refusal{Reason: Invalid, Detail: "unknown vmOp", Fields: fields}
	}
	if err := s.vmPoolChange(j, vmChange{field: "vmOp", kind: "vmOp applies to vm_pool jobs",
		status: "vmOp needs a completed job", unsupported: "this server's vm_pool pipeline has no VM operations"}); err != nil {
		return err
	}
	config, steps, err := s.VMOps.PlanVMOp(j, op)
	return s.reopen(up, config, steps, err)
}

// planResize lays an in-place resize out on up; it is a request of its own, never with a vmOp.
func (s *Service) planResize(j *job.Job, min, max, desired *int32, up *store.UpdateJobParams) error {
	if up.Config != nil {
		return &Refusal{Reason: Invalid, Detail: "resize and vmOp are separate requests",
			Fields: []validation.FieldError{{Field: "vmOp", Rule: "exclusive", Message: "send vmOp or min/max/desired, not both"}}}
	}
	if err := s.vmPoolChange(j, vmChange{field: "min", kind: "min/max/desired resize vm_pool jobs",
		status: "a resize needs a completed job", unsupported: "this server's vm_pool pipeline does not resize"}); err != nil {
		return err
	}
	config, steps, err := s.VMOps.PlanResize(j, min, max, desired)
	return s.reopen(up, config, steps, err)
}

// vmChange names, for the refusals of one kind of change to a live VM pool, the field they
// point at and what each says.
type vmChange struct{ field, kind, status, unsupported string }

// vmPoolChange refuses a change c to j unless j is a completed vm_pool job and this server's
// pipeline plans VM changes.
func (s *Service) vmPoolChange(j *job.Job, c vmChange) error {
	switch {
	case j.Family != job.FamilyVMPool:
		return &Refusal{Reason: Invalid, Detail: c.kind,
			Fields: []validation.FieldError{{Field: c.field, Rule: "kind", Message: "this job is " + string(j.Family)}}}
	case j.Status != job.StatusCompleted:
		return &Refusal{Reason: Conflict, Detail: c.status + "; this one is " + string(j.Status)}
	case s.VMOps == nil:
		return &Refusal{Reason: Invalid, Detail: c.unsupported,
			Fields: []validation.FieldError{{Field: c.field, Rule: "supported", Message: "not supported"}}}
	}
	return nil
}

// reopen lays a planned VM change out on up: the new config and step records, queued now.
func (s *Service) reopen(up *store.UpdateJobParams, config json.RawMessage, steps []job.StepRecord, err error) error {
	if err != nil {
		return ConfigRefusal(err)
	}
	queued := job.StatusQueued
	now := s.Now()
	up.Config, up.Steps, up.Status, up.NextRunAt = config, steps, &queued, &now
	return nil
}

// errNoChange rolls an audited transaction back when the request turned out to change
// nothing (cancelling a job that already ended): only mutations are on the record.
var errNoChange = errors.New("no change")

// Cancel stops job id, or tears it down if it completed (engine.Cancel); cancelling a job
// that already ended, or is already tearing down, changes nothing and returns it as it is.
// A job cancelled before any step ran loses the secrets stored for it at admission (an
// adopted server's password, secret component values), since no undo will run to do it.
func (s *Service) Cancel(ctx context.Context, c Caller, id string) (*job.Job, error) {
	j, err := s.Get(ctx, c.OrgID, id)
	if err != nil {
		return nil, err
	}
	out := j
	err = s.audited(ctx, c, "provisioning-job.delete", j.ID, map[string]any{"statusBefore": j.Status},
		func(tx store.Tx) error {
			o, err := engine.Cancel(ctx, tx, j, s.Now())
			if err != nil {
				return err
			}
			out = o
			if o.Version == j.Version {
				return errNoChange // already ended or tearing down
			}
			return nil
		})
	if err != nil && !errors.Is(err, errNoChange) {
		return nil, TransitionRefusal(err)
	}
	if out.Status == job.StatusCancelled && !out.AnyStepCompleted() {
		s.forget(ctx, out, "cancelled before any step ran")
	}
	return out, nil
}

// Retry queues failed job id again (engine.Retry); a job that has not failed is a Conflict.
func (s *Service) Retry(ctx context.Context, c Caller, id string) (*job.Job, error) {
	j, err := s.Get(ctx, c.OrgID, id)
	if err != nil {
		return nil, err
	}
	var out *job.Job
	err = s.audited(ctx, c, "provisioning-job.retry", j.ID, nil, func(tx store.Tx) (err error) {
		out, err = engine.Retry(ctx, tx, j, s.Now())
		return err
	})
	if err != nil {
		return nil, TransitionRefusal(err)
	}
	return out, nil
}

// TransitionRefusal is a *job.TransitionError as a Conflict refusal; other errors pass.
func TransitionRefusal(err error) error {
	var te *job.TransitionError
	if errors.As(err, &te) {
		return &Refusal{Reason: Conflict, Detail: te.Error(), Err: err}
	}
	return err
}

// Create admits req for c (see Admit) and stores the job with the audit entry of its
// creation, in one transaction.
func (s *Service) Create(ctx context.Context, c Caller, req Request, authorize Authorize) (*job.Job, error) {
	j, err := s.Admit(ctx, c.OrgID, req, authorize)
	if err != nil {
		return nil, err
	}
	var created *job.Job
	err = s.audited(ctx, c, "provisioning-job.create", j.ID,
		map[string]any{"kind": j.Family, "spaceID": j.SpaceID, "mode": j.Mode, "status": j.Status},
		func(tx store.Tx) (err error) {
			created, err = tx.CreateJob(ctx, &store.CreateJobParams{Job: j, Now: s.Now()})
			return err
		})
	if err != nil {
		s.forget(ctx, j, "not stored")
		return nil, err
	}
	return created, nil
}

// forget deletes the secrets kept for j (an adopted server's password, secret component
// values) when no undo will: the job was never stored, or no step of it ran.
func (s *Service) forget(ctx context.Context, j *job.Job, why string) {
	if s.Secrets == nil {
		return
	}
	if err := s.Secrets.Forget(ctx, secrets.JobOwner(j.OrgID, j.ID)); err != nil {
		s.log().Warn("a job's secrets were not deleted", "job", j.ID, "why", why, "error", err)
	}
}

// audited runs fn in one transaction with the audit entry of c's action on job id.
func (s *Service) audited(ctx context.Context, c Caller, action, id string, meta any, fn func(tx store.Tx) error) error {
	e := audit.New(c.OrgID, audit.ScopeProvisioning, action, c.Actor, "provisioning-job", id, meta)
	e.CreatedAt = s.Now()
	return s.Store.Audited(ctx, e, fn)
}

func (s *Service) log() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}
