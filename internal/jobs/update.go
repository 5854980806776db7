package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// Updater plans a configuration update of a live job of its family: it judges the new config
// against the job as it stands and answers the diff per resource, the new config and the
// step records that carry the change out. Refusals are field errors (validation.Fielder).
// The family pipelines implement it (the datastore family first).
type Updater interface {
	PlanUpdate(ctx context.Context, j *job.Job, req pipeline.UpdateRequest) (*pipeline.UpdatePlan, error)
}

// RevisionLister reads a job's configuration revisions (the store's JobRevisions).
type RevisionLister interface {
	ListRevisions(ctx context.Context, orgID, jobID string) ([]store.JobRevision, error)
}

// Update is a configuration update of a stored job.
type Update struct {
	// Version is the version the caller read; nil applies the update to the job as it is.
	Version *int64
	// Config is the whole new config.
	Config json.RawMessage
	// AllowDataLoss lets through a change that drops data (shorter backup retention).
	AllowDataLoss bool
	// ApplyImmediately false leaves a disruptive change to the cloud's maintenance window.
	ApplyImmediately *bool
}

// Revision reasons.
const (
	reasonCreate   = "create"
	reasonUpdate   = "update"
	reasonRollback = "rollback"
)

// updaterOf finds the Updater of p, looking through the wrappers the server puts around a
// family's pipeline (its lease tuning, the provider check).
func updaterOf(p pipeline.Pipeline) (Updater, bool) {
	for p != nil {
		if u, ok := p.(Updater); ok {
			return u, true
		}
		w, ok := p.(interface{ Unwrap() pipeline.Pipeline })
		if !ok {
			return nil, false
		}
		p = w.Unwrap()
	}
	return nil, false
}

// PlanUpdate answers what u would do to job id without changing anything: the dry run.
func (s *Service) PlanUpdate(ctx context.Context, c Caller, id string, u Update) (*pipeline.UpdatePlan, error) {
	j, err := s.Get(ctx, c.OrgID, id)
	if err != nil {
		return nil, err
	}
	revs, err := s.listRevisions(ctx, j)
	if err != nil {
		return nil, err
	}
	return s.planOrReapply(ctx, j, revs, u)
}

// planOrReapply plans u for j. A config that changes nothing on a job whose latest update
// failed is that update sent again: it is planned anew from the last applied revision's
// config, so that the steps the failed update left re-run (each from a fresh step record, so
// a cloud operation keyed by the step's start, such as an EKS version update, is started
// anew rather than answered by the one that failed).
func (s *Service) planOrReapply(ctx context.Context, j *job.Job, revs []store.JobRevision, u Update) (*pipeline.UpdatePlan, error) {
	pl, err := s.planUpdate(ctx, j, revs, u.Config, u)
	if err != nil || pl.Changed() || !failedUpdate(j, revs) {
		return pl, err
	}
	applied := lastApplied(revs)
	if applied == nil {
		return pl, nil
	}
	from := *j
	from.Config = applied.Config
	return s.planUpdate(ctx, &from, revs, u.Config, u)
}

// failedUpdate reports whether j failed while carrying out its latest config update.
func failedUpdate(j *job.Job, revs []store.JobRevision) bool {
	i := current(revs)
	return j.Phase == job.PhaseApply && j.Status == job.StatusFailed && i >= 0 && revs[i].Status == store.RevisionFailed
}

// current is the index of the latest revision the job was set to carry out (applying,
// applied or failed), -1 when there is none. A request that awaits (or awaited) approval is
// not one: the job never ran it. An applied revision is superseded only by a later applied
// one, so a superseded revision is never the current one either.
func current(revs []store.JobRevision) int {
	for i := len(revs) - 1; i >= 0; i-- {
		switch revs[i].Status {
		case store.RevisionApplying, store.RevisionApplied, store.RevisionFailed:
			return i
		}
	}
	return -1
}

// lastApplied is the latest revision whose config the job completed, nil when none.
func lastApplied(revs []store.JobRevision) *store.JobRevision {
	for i := len(revs) - 1; i >= 0; i-- {
		if revs[i].Status == store.RevisionApplied {
			return &revs[i]
		}
	}
	return nil
}

// ApplyUpdate plans u and, if it changes anything, records it as the job's next revision and
// queues the job to carry it out (the engine runs the re-opened steps under the job's lease,
// like any pending steps). A config that changes nothing answers the job as it is and records
// nothing. An update that drops data (allowed by u.AllowDataLoss) is recorded awaiting
// approval instead, and the job is left as it is (see Approve): the pending revision is
// answered with the job. Refusals are *Refusal; the store's sentinels pass.
func (s *Service) ApplyUpdate(ctx context.Context, c Caller, id string, u Update) (*job.Job, *store.JobRevision, error) {
	var pending *store.JobRevision
	out, err := s.retryUnversioned(u.Version, func() (*job.Job, error) {
		pending = nil
		j, err := s.Get(ctx, c.OrgID, id)
		if err != nil {
			return nil, err
		}
		if err := checkVersion(j, u.Version); err != nil {
			return nil, err
		}
		revs, err := s.listRevisions(ctx, j)
		if err != nil {
			return nil, err
		}
		pl, err := s.planOrReapply(ctx, j, revs, u)
		if err != nil {
			return nil, err
		}
		if !pl.Changed() {
			return j, nil
		}
		meta := map[string]any{"resources": pl.Resources, "allowDataLoss": u.AllowDataLoss, "rerun": pl.Rerun}
		if u.ApplyImmediately != nil {
			meta["applyImmediately"] = *u.ApplyImmediately
		}
		if NeedsApproval(pl) {
			out, rev, err := s.recordPending(ctx, c, j, revs, pl, reasonUpdate, "provisioning-job.update-config", meta, u.Version == nil)
			pending = rev
			return out, err
		}
		return s.reopenWithRevision(ctx, c, j, revs, pl, reasonUpdate, "provisioning-job.update-config", meta, u.Version == nil, 0)
	})
	if err != nil {
		return nil, nil, err
	}
	return out, pending, nil
}

// Rollback re-opens job id with the config of its last applied revision; only a job whose
// latest update failed is rolled back. allowDataLoss is as for an update, and a rollback that
// drops data awaits approval as an update does (the pending revision is answered).
func (s *Service) Rollback(ctx context.Context, c Caller, id string, version *int64, allowDataLoss bool) (*job.Job, *store.JobRevision, error) {
	var pending *store.JobRevision
	out, err := s.retryUnversioned(version, func() (*job.Job, error) {
		pending = nil
		j, err := s.Get(ctx, c.OrgID, id)
		if err != nil {
			return nil, err
		}
		if err := checkVersion(j, version); err != nil {
			return nil, err
		}
		revs, err := s.listRevisions(ctx, j)
		if err != nil {
			return nil, err
		}
		if i := current(revs); i < 0 || revs[i].Status != store.RevisionFailed {
			return nil, &Refusal{Reason: Conflict, Detail: "only a job whose latest config update failed is rolled back; this one's did not"}
		}
		target := lastApplied(revs)
		if target == nil {
			return nil, &Refusal{Reason: Conflict, Detail: "the job has no applied revision to roll back to"}
		}
		pl, err := s.planUpdate(ctx, j, revs, target.Config, Update{AllowDataLoss: allowDataLoss})
		if err != nil {
			return nil, err
		}
		meta := map[string]any{"toRevision": target.Number, "resources": pl.Resources, "rerun": pl.Rerun}
		if NeedsApproval(pl) {
			out, rev, err := s.recordPending(ctx, c, j, revs, pl, reasonRollback, "provisioning-job.rollback-config", meta, version == nil)
			pending = rev
			return out, err
		}
		return s.reopenWithRevision(ctx, c, j, revs, pl, reasonRollback, "provisioning-job.rollback-config", meta, version == nil, 0)
	})
	if err != nil {
		return nil, nil, err
	}
	return out, pending, nil
}

// Revisions lists job id's revisions, oldest first, each with its status as the job now
// stands (see settle).
func (s *Service) Revisions(ctx context.Context, orgID, id string) ([]store.JobRevision, error) {
	j, err := s.Get(ctx, orgID, id)
	if err != nil {
		return nil, err
	}
	return s.listRevisions(ctx, j)
}

// retryUnversioned runs once, and again on a fresh read when a request without a version lost
// a race with the engine's own checkpoints (as Patch does).
func (s *Service) retryUnversioned(version *int64, once func() (*job.Job, error)) (*job.Job, error) {
	for attempt := 1; ; attempt++ {
		out, err := once()
		if errors.Is(err, store.ErrVersionConflict) && version == nil && attempt < unconditionalAttempts {
			continue
		}
		return out, err
	}
}

func checkVersion(j *job.Job, want *int64) error {
	if want != nil && j.Version != *want {
		return &Refusal{Reason: Conflict, Err: store.ErrVersionConflict,
			Detail: fmt.Sprintf("the job is at version %d, not %d; read it again and retry", j.Version, *want)}
	}
	return nil
}

// listRevisions reads j's revisions and settles them against j.
func (s *Service) listRevisions(ctx context.Context, j *job.Job) ([]store.JobRevision, error) {
	rl, ok := s.Store.(RevisionLister)
	if !ok {
		return nil, errors.New("this store keeps no job revisions")
	}
	revs, err := rl.ListRevisions(ctx, j.OrgID, j.ID)
	if err != nil {
		return nil, err
	}
	settle(j, revs)
	return revs, nil
}

// settle gives the latest revision the status its job's outcome decides: applied once the
// job completed the update, failed once it failed; an applied one before it becomes
// superseded. The engine knows nothing of revisions: the job's own status is the record of
// how its last update went, so it is read from there (and written when the next update or
// rollback is accepted, in the same transaction).
func settle(j *job.Job, revs []store.JobRevision) {
	if len(revs) == 0 || j.Phase != job.PhaseApply {
		return
	}
	cur := current(revs)
	if cur < 0 {
		return
	}
	last := &revs[cur]
	if last.Status == store.RevisionApplying {
		switch j.Status {
		case job.StatusCompleted:
			last.Status = store.RevisionApplied
		case job.StatusFailed:
			last.Status = store.RevisionFailed
		}
	}
	if last.Status == store.RevisionApplied {
		for i := range revs[:cur] {
			if revs[i].Status == store.RevisionApplied {
				revs[i].Status = store.RevisionSuperseded
			}
		}
	}
}

// updatable refuses an update of j unless j is live: completed, or failed in an update (its
// latest revision failed). A job that failed while it was being created is retried instead.
func updatable(j *job.Job, revs []store.JobRevision) error {
	if j.Phase == job.PhaseApply && j.Status == job.StatusCompleted {
		return nil
	}
	if failedUpdate(j, revs) {
		return nil
	}
	return &Refusal{Reason: Conflict, Detail: fmt.Sprintf("a config update needs a completed job (or one whose last update failed); this one is %s", j.Status)}
}

// planUpdate checks config (the catalog's schema and defaults, then the family's updater)
// for j as it stands.
func (s *Service) planUpdate(ctx context.Context, j *job.Job, revs []store.JobRevision, config json.RawMessage, u Update) (*pipeline.UpdatePlan, error) {
	config = bytes.TrimSpace(config)
	if len(config) == 0 || config[0] != '{' {
		return nil, &Refusal{Reason: Invalid, Detail: "the config is invalid",
			Fields: []validation.FieldError{{Field: "config", Rule: "type", Message: "must be an object"}}}
	}
	if err := updatable(j, revs); err != nil {
		return nil, err
	}
	pl, _ := s.Pipelines.Get(j.Family)
	up, ok := updaterOf(pl)
	if !ok {
		return nil, &Refusal{Reason: Invalid, Detail: "kind " + string(j.Family) + " takes no config updates",
			Fields: []validation.FieldError{{Field: "config", Rule: "supported", Message: "this server cannot update a " + string(j.Family) + " job's config; make a new job"}}}
	}
	state, _ := up.(stateKeeper)
	if state != nil {
		// What the job keeps of its own in its config is not the caller's to set: a config
		// read back from the job and sent again must pass, and the steps laid out from that
		// state (a credential rotation's) must stay as they are.
		var err error
		if config, err = withoutKeys(config, state.ConfigState()); err != nil {
			return nil, &Refusal{Reason: Invalid, Detail: "the config is invalid",
				Fields: []validation.FieldError{{Field: "config", Rule: "type", Message: "must be an object"}}}
		}
	}
	if s.Catalog != nil && j.Mode == job.ModeCreate {
		_, withDefaults, err := s.Catalog.ValidateJob(j.Family, config)
		var ve *catalog.ValidationError
		switch {
		case errors.As(err, &ve):
			return nil, &Refusal{Reason: Invalid, Detail: "the config is invalid for kind " + string(j.Family), Fields: CatalogFields(ve)}
		case err == nil:
			config = withDefaults
		}
	}
	if state != nil {
		var err error
		if config, err = withKeysOf(config, j.Config, state.ConfigState()); err != nil {
			return nil, err
		}
	}
	plan, err := up.PlanUpdate(ctx, j, pipeline.UpdateRequest{Config: config, AllowDataLoss: u.AllowDataLoss, ApplyImmediately: u.ApplyImmediately})
	if err != nil {
		if _, ok := validation.Fields(err); ok {
			return nil, &Refusal{Reason: Invalid, Detail: "the config update is refused", Fields: prefixConfig(err)}
		}
		return nil, err
	}
	return plan, nil
}

// prefixConfig names every refused field as a field of the request's config.
func prefixConfig(err error) []validation.FieldError {
	f, _ := validation.Fields(err)
	out := make([]validation.FieldError, len(f))
	for i, e := range f {
		if e.Field != "config" && !bytes.HasPrefix([]byte(e.Field), []byte("config.")) {
			e.Field = "config." + e.Field
		}
		out[i] = e
	}
	return out
}

// reopenWithRevision records pl as j's next revision (and, at the first update, the config j
// was created with as revision 1, with no actor: the job's creation is in the audit log),
// settles the revisions before it, and queues j with pl's
// config and steps, all in one audited transaction. approved names a revision that awaited
// approval: it becomes applying instead of a new revision being added.
func (s *Service) reopenWithRevision(ctx context.Context, c Caller, j *job.Job, revs []store.JobRevision, pl *pipeline.UpdatePlan,
	reason, action string, meta map[string]any, unconditional bool, approved int) (*job.Job, error) {
	now := s.Now()
	next := nextRevision(revs)
	if approved > 0 {
		next = approved
	}
	meta["revision"] = next
	if unconditional {
		meta["unconditional"] = true
	}
	queued := job.StatusQueued
	up := &store.UpdateJobParams{OrgID: j.OrgID, ID: j.ID, Version: j.Version, Now: now, Config: pl.Config, Steps: pl.Steps,
		Status: &queued, NextRunAt: &now, ClearFailure: j.Status == job.StatusFailed}
	var out *job.Job
	err := s.audited(ctx, c, action, j.ID, meta, func(tx store.Tx) (err error) {
		if err := settleOnRecord(ctx, tx, j, revs, now, approved); err != nil {
			return err
		}
		if approved > 0 {
			if err := tx.SetRevisionStatus(ctx, j.OrgID, j.ID, approved, store.RevisionApplying, now); err != nil {
				return err
			}
		} else if err := tx.AddRevision(ctx, store.JobRevision{OrgID: j.OrgID, JobID: j.ID, Number: next, Config: pl.Config, Infra: j.Infra,
			Status: store.RevisionApplying, Reason: reason, Actor: c.Actor, CreatedAt: now}); err != nil {
			return err
		}
		out, err = tx.UpdateJob(ctx, up)
		return err
	})
	return out, err
}

// nextRevision is the number the next revision of a job with revs takes: 2 at the first
// update (revision 1 is the config the job was created with).
func nextRevision(revs []store.JobRevision) int {
	if len(revs) == 0 {
		return 2
	}
	return len(revs) + 1
}

// settleOnRecord writes, in tx, what settle decided from j's status now that the job moves
// on (and, at the first update, records the config j was created with as revision 1, with no
// actor: the job's creation is in the audit log). A revision that still awaits approval is
// superseded by the change being recorded, unless it is that change (approved).
func settleOnRecord(ctx context.Context, tx store.Tx, j *job.Job, revs []store.JobRevision, now time.Time, approved int) error {
	if len(revs) == 0 {
		return tx.AddRevision(ctx, store.JobRevision{OrgID: j.OrgID, JobID: j.ID, Number: 1, Config: j.Config, Infra: j.Infra,
			Status: store.RevisionApplied, Reason: reasonCreate, CreatedAt: j.CreatedAt})
	}
	for _, r := range revs {
		if r.Number == approved {
			continue
		}
		if r.Status == store.RevisionAwaitingApproval {
			r.Status = store.RevisionSuperseded
		}
		if err := tx.SetRevisionStatus(ctx, j.OrgID, j.ID, r.Number, r.Status, now); err != nil {
			return err
		}
	}
	return nil
}

// stateKeeper is what an Updater may also say: the keys of its jobs' configs that hold the
// job's own state (the last VM operation, a credential rotation under way) rather than
// settings. An update keeps them as the job has them, whatever the request says.
type stateKeeper interface {
	ConfigState() []string
}

// withoutKeys is the object config without keys.
func withoutKeys(config json.RawMessage, keys []string) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(config, &m); err != nil || m == nil {
		return nil, errors.New("config is not an object")
	}
	for _, k := range keys {
		delete(m, k)
	}
	return json.Marshal(m)
}

// withKeysOf is the object config with keys set as stored has them (absent if it has not).
func withKeysOf(config, stored json.RawMessage, keys []string) (json.RawMessage, error) {
	var m, old map[string]json.RawMessage
	if err := json.Unmarshal(config, &m); err != nil || m == nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := json.Unmarshal(stored, &old); err != nil {
		return nil, fmt.Errorf("stored config: %w", err)
	}
	for _, k := range keys {
		if v, ok := old[k]; ok {
			m[k] = v
		} else {
			delete(m, k)
		}
	}
	return json.Marshal(m)
}
