package jobs

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// A config update (or rollback) that drops data needs two things: the requester's explicit
// allowDataLoss, and the approval of another principal holding provisioning:approve. Until
// then it is a revision awaiting approval and the job is left as it is.

// NeedsApproval reports whether applying pl needs an approval: a resource of it loses data.
func NeedsApproval(pl *pipeline.UpdatePlan) bool {
	for _, r := range pl.Resources {
		if r.DataLoss {
			return true
		}
	}
	return false
}

// recordPending records pl as j's next revision awaiting approval, in one audited
// transaction with awaitingApproval in the entry. The job keeps its status, config and steps;
// only its version moves, so that a decision racing another change of the job loses cleanly
// (every decision is a versioned write of the job).
func (s *Service) recordPending(ctx context.Context, c Caller, j *job.Job, revs []store.JobRevision, pl *pipeline.UpdatePlan,
	reason, action string, meta map[string]any, unconditional bool) (*job.Job, *store.JobRevision, error) {
	now := s.Now()
	rev := store.JobRevision{OrgID: j.OrgID, JobID: j.ID, Number: nextRevision(revs), Config: pl.Config, Infra: j.Infra,
		Status: store.RevisionAwaitingApproval, Reason: reason, Actor: c.Actor, CreatedAt: now, UpdatedAt: now}
	meta["revision"] = rev.Number
	meta["awaitingApproval"] = true
	if unconditional {
		meta["unconditional"] = true
	}
	var out *job.Job
	err := s.audited(ctx, c, action, j.ID, meta, func(tx store.Tx) (err error) {
		if err := settleOnRecord(ctx, tx, j, revs, now, 0); err != nil {
			return err
		}
		if err := tx.AddRevision(ctx, rev); err != nil {
			return err
		}
		out, err = tx.UpdateJob(ctx, &store.UpdateJobParams{OrgID: j.OrgID, ID: j.ID, Version: j.Version, Now: now})
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return out, &rev, nil
}

// Decision is an approval or rejection of a revision awaiting approval.
type Decision struct {
	// Revision is the number of the revision decided.
	Revision int
	// Reason is why, kept in the audit entry.
	Reason string
}

// pendingRevision finds revision n of revs and checks that it still awaits approval and
// that c may decide it: the principal who asked for the change never approves it.
func pendingRevision(c Caller, revs []store.JobRevision, n int, approve bool) (*store.JobRevision, error) {
	if n < 1 || n > len(revs) || revs[n-1].Number != n {
		return nil, &Refusal{Reason: NotFound, Detail: fmt.Sprintf("the job has no revision %d", n),
			Fields: []validation.FieldError{{Field: "number", Rule: "exists", Message: "names no revision of the job"}}}
	}
	rev := &revs[n-1]
	if rev.Status != store.RevisionAwaitingApproval {
		return nil, &Refusal{Reason: Conflict, Detail: fmt.Sprintf("revision %d is %s, not awaiting approval", n, rev.Status)}
	}
	if n != len(revs) {
		return nil, &Refusal{Reason: Conflict, Detail: fmt.Sprintf("the job moved on: revision %d was recorded after revision %d", len(revs), n)}
	}
	if approve && rev.Actor == c.Actor {
		return nil, &Refusal{Reason: Forbidden, Detail: fmt.Sprintf("revision %d was asked for by %s, who cannot approve it: a change that drops data needs a second principal's approval", n, rev.Actor),
			FixHint: "ask another principal holding provisioning:approve to approve it"}
	}
	return rev, nil
}

// Approve approves job id's revision that awaits approval: it is planned again against the
// job as it is now (with allowDataLoss, which the request held), through every check of an
// update, and the job is queued to carry it out as ApplyUpdate does, the revision becoming
// applying. A job that moved on (not updatable, the revision no longer pending or no longer
// the latest) is a Conflict; the principal who asked for it is Forbidden.
func (s *Service) Approve(ctx context.Context, c Caller, id string, d Decision) (*job.Job, error) {
	return s.retryUnversioned(nil, func() (*job.Job, error) {
		j, err := s.Get(ctx, c.OrgID, id)
		if err != nil {
			return nil, err
		}
		revs, err := s.listRevisions(ctx, j)
		if err != nil {
			return nil, err
		}
		rev, err := pendingRevision(c, revs, d.Revision, true)
		if err != nil {
			return nil, err
		}
		u := Update{Config: rev.Config, AllowDataLoss: true, ApplyImmediately: applyImmediatelyOf(rev.Config)}
		var pl *pipeline.UpdatePlan
		if rev.Reason == reasonRollback {
			pl, err = s.planUpdate(ctx, j, revs, rev.Config, u)
		} else {
			pl, err = s.planOrReapply(ctx, j, revs, u)
		}
		if err != nil {
			return nil, err
		}
		if !pl.Changed() {
			return nil, &Refusal{Reason: Conflict, Detail: fmt.Sprintf("the job moved on: revision %d changes nothing on the job as it is now; reject it", d.Revision)}
		}
		meta := map[string]any{"resources": pl.Resources, "rerun": pl.Rerun, "requestedBy": rev.Actor, "requestReason": rev.Reason, "reason": d.Reason}
		return s.reopenWithRevision(ctx, c, j, revs, pl, rev.Reason, "provisioning-job.approve-config", meta, false, rev.Number)
	})
}

// Reject rejects job id's revision that awaits approval: it is marked rejected and nothing
// runs. The principal who asked for it may reject it (withdraw it): that needs no second pair
// of eyes.
func (s *Service) Reject(ctx context.Context, c Caller, id string, d Decision) (*store.JobRevision, error) {
	var out *store.JobRevision
	_, err := s.retryUnversioned(nil, func() (*job.Job, error) {
		j, err := s.Get(ctx, c.OrgID, id)
		if err != nil {
			return nil, err
		}
		revs, err := s.listRevisions(ctx, j)
		if err != nil {
			return nil, err
		}
		rev, err := pendingRevision(c, revs, d.Revision, false)
		if err != nil {
			return nil, err
		}
		now := s.Now()
		meta := map[string]any{"revision": rev.Number, "requestedBy": rev.Actor, "requestReason": rev.Reason, "reason": d.Reason}
		var updated *job.Job
		err = s.audited(ctx, c, "provisioning-job.reject-config", j.ID, meta, func(tx store.Tx) (err error) {
			if err := tx.SetRevisionStatus(ctx, j.OrgID, j.ID, rev.Number, store.RevisionRejected, now); err != nil {
				return err
			}
			// The job's version moves with the decision, so an approval racing it loses.
			updated, err = tx.UpdateJob(ctx, &store.UpdateJobParams{OrgID: j.OrgID, ID: j.ID, Version: j.Version, Now: now})
			return err
		})
		if err != nil {
			return nil, err
		}
		r := *rev
		r.Status, r.UpdatedAt = store.RevisionRejected, now
		out = &r
		return updated, nil
	})
	return out, err
}

// applyImmediatelyOf reads the applyImmediately a config records (a datastore's update writes
// it there), nil when it holds none.
func applyImmediatelyOf(config json.RawMessage) *bool {
	var c struct {
		ApplyImmediately *bool `json:"applyImmediately"`
	}
	if json.Unmarshal(config, &c) != nil {
		return nil
	}
	return c.ApplyImmediately
}
