package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// Inspector reads back the resources a job made and reports every field whose value in the
// cloud differs from what the job applied. A family's driver implements it on the providers
// that can; it only reads.
type Inspector interface {
	Inspect(ctx context.Context, j *job.Job) ([]job.Drift, error)
}

// InspectorFor finds the inspector of j's family on j's provider; ok is false when that
// driver cannot inspect.
type InspectorFor func(ctx context.Context, j *job.Job) (in Inspector, ok bool, err error)

// InspectionLedger is what inspection reads of the store beside the jobs (store.Inspections);
// recording an inspection goes through the audited transaction.
type InspectionLedger interface {
	GetInspection(ctx context.Context, orgID, jobID string) (*job.Inspection, error)
	ClaimInspection(ctx context.Context, orgID, jobID string, now, next time.Time) (bool, error)
}

// DefaultInspectTimeout bounds one inspection: it runs inline in the request that asks for
// it (a handful of reads of one job's resources), so a cloud that does not answer must not
// hold the request for long.
const DefaultInspectTimeout = 30 * time.Second

// Inspections inspects completed jobs for drift and reconciles what drifted.
type Inspections struct {
	Jobs       *Service
	Ledger     InspectionLedger
	Inspectors InspectorFor
	// Timeout bounds one inspection (DefaultInspectTimeout when zero).
	Timeout time.Duration
}

// Inspect reads job id's resources back, records what drifted as the job's latest
// inspection with its audit entry (provisioning-job.inspect), and returns it.
func (s *Inspections) Inspect(ctx context.Context, c Caller, id string) (*job.Inspection, error) {
	j, err := s.Jobs.Get(ctx, c.OrgID, id)
	if err != nil {
		return nil, err
	}
	return s.inspect(ctx, c, j)
}

func (s *Inspections) inspect(ctx context.Context, c Caller, j *job.Job) (*job.Inspection, error) {
	if j.Status != job.StatusCompleted {
		return nil, &Refusal{Reason: Conflict, Detail: "inspection reads back a completed job's resources; this job is " + string(j.Status)}
	}
	in, err := s.inspector(ctx, j)
	if err != nil {
		return nil, err
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultInspectTimeout
	}
	ictx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	drift, err := in.Inspect(ictx, j)
	if err != nil {
		if ictx.Err() != nil && ctx.Err() == nil {
			return nil, fault.Transient(fmt.Errorf("inspect job %s: the cloud did not answer within %s: %w", j.ID, timeout, err))
		}
		return nil, fmt.Errorf("inspect job %s: %w", j.ID, err)
	}
	if drift == nil {
		drift = []job.Drift{}
	}
	out := &job.Inspection{JobID: j.ID, OrgID: j.OrgID, SpaceID: j.SpaceID, InspectedAt: s.Jobs.Now().UTC(), Drift: drift}
	err = s.Jobs.audited(ctx, c, "provisioning-job.inspect", j.ID, map[string]any{"driftCount": len(drift)},
		func(tx store.Tx) error { return tx.RecordInspection(ctx, out) })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// inspector is j's inspector, or the refusal that says its family cannot be inspected there.
func (s *Inspections) inspector(ctx context.Context, j *job.Job) (Inspector, error) {
	var in Inspector
	ok := false
	if s.Inspectors != nil {
		var err error
		if in, ok, err = s.Inspectors(ctx, j); err != nil {
			return nil, err
		}
	}
	if !ok {
		msg := fmt.Sprintf("inspection is not supported for %s on %s", j.Family, j.Provider)
		return nil, &Refusal{Reason: Invalid, Detail: msg,
			Fields: []validation.FieldError{{Field: "kind", Rule: "inspectable", Message: msg}}}
	}
	return in, nil
}

// Latest is job id's latest inspection; store.ErrNotFound when it was never inspected.
func (s *Inspections) Latest(ctx context.Context, orgID, id string) (*job.Inspection, error) {
	if _, err := s.Jobs.Get(ctx, orgID, id); err != nil {
		return nil, err
	}
	return s.Ledger.GetInspection(ctx, orgID, id)
}

// Reconcile puts job id's drifted resources back to its applied config through its own
// pipeline: the job is reopened with its config as it is, and the steps that own the drifted
// resources (as its latest inspection names them) run again, converging what they own. The
// engine runs them like any pending step: leased, checkpointed, retried, resumable.
func (s *Inspections) Reconcile(ctx context.Context, c Caller, id string) (*job.Job, error) {
	j, err := s.Jobs.Get(ctx, c.OrgID, id)
	if err != nil {
		return nil, err
	}
	if j.Status != job.StatusCompleted {
		return nil, &Refusal{Reason: Conflict, Detail: "reconcile runs on a completed job; this one is " + string(j.Status)}
	}
	last, err := s.Ledger.GetInspection(ctx, c.OrgID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &Refusal{Reason: Conflict, Detail: "the job has not been inspected: POST /api/provisioning-jobs/" + id + "/inspect first"}
	}
	if err != nil {
		return nil, err
	}
	steps, names, err := reopenSteps(j, last.Drift)
	if err != nil {
		return nil, err
	}
	// Reconcile writes to the cloud: a space whose account was made read-only is refused.
	sp, err := s.Jobs.space(ctx, j)
	if err != nil {
		return nil, err
	}
	if err := s.Jobs.checkAccount(ctx, j, sp); err != nil {
		return nil, err
	}
	up := &store.UpdateJobParams{OrgID: c.OrgID, ID: j.ID, Version: j.Version, Now: s.Jobs.Now()}
	if err := s.Jobs.reopen(up, json.RawMessage(j.Config), steps, nil); err != nil {
		return nil, err
	}
	var out *job.Job
	err = s.Jobs.audited(ctx, c, "provisioning-job.reconcile", j.ID,
		map[string]any{"driftCount": len(last.Drift), "steps": names, "inspectedAt": last.InspectedAt},
		func(tx store.Tx) (err error) {
			out, err = tx.UpdateJob(ctx, up)
			return err
		})
	if errors.Is(err, store.ErrVersionConflict) {
		return nil, &Refusal{Reason: Conflict, Err: err, Detail: "the job changed while reconcile was asked for; read it and try again"}
	}
	return out, err
}

// reopenSteps returns j's step records with the steps that own drifted resources pending
// again, and their names in pipeline order; no drift (or drift naming no step of j) is a
// Conflict: there is nothing to put back.
func reopenSteps(j *job.Job, drift []job.Drift) ([]job.StepRecord, []string, error) {
	if len(drift) == 0 {
		return nil, nil, &Refusal{Reason: Conflict, Detail: "the job's latest inspection found no drift; nothing to reconcile"}
	}
	steps := slices.Clone(j.Steps)
	var names []string
	for i, st := range steps {
		owns := slices.ContainsFunc(drift, func(d job.Drift) bool { return d.Step == st.Name })
		if !owns {
			continue
		}
		steps[i] = job.StepRecord{Name: st.Name, Status: job.StepPending, Message: "reconcile drift"}
		names = append(names, st.Name)
	}
	if len(names) == 0 {
		return nil, nil, &Refusal{Reason: Conflict, Detail: "the drift recorded names no step of this job; inspect it again"}
	}
	return steps, names, nil
}
