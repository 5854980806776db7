package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/groundworkhq/groundwork/internal/engine"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/protocol"
	"github.com/groundworkhq/groundwork/internal/protocol/jobbackend"
	"github.com/groundworkhq/groundwork/internal/store"
)

// RequestKeys maps a protocol apply's idempotency key to the job serving it; the SQL stores
// implement it next to the job ledger.
type RequestKeys interface {
	ClaimRequestKey(ctx context.Context, orgID, key, jobID string, now time.Time) (string, error)
	RequestKeyJob(ctx context.Context, orgID, key string) (string, error)
	ReplaceRequestKey(ctx context.Context, orgID, key, oldID, newID string) (string, error)
}

// via marks audit entries of changes made through the provisioner protocol.
const via = "provisioner-protocol"

// protocolJobs is jobbackend.Jobs over the job ledger. The caller and its space come from the
// request context (ProtocolAuth puts them there); the application is the job's name.
type protocolJobs struct {
	st    store.Store
	pipes *pipeline.Registry
	keys  RequestKeys
	prep  *Server
	now   func() time.Time
}

var _ jobbackend.Jobs = (*protocolJobs)(nil)

// ProtocolJobs is the job ledger as the provisioner protocol's server side sees it: an apply
// becomes a job in the caller's space, admitted and audited as the jobs API does.
func (s *Server) ProtocolJobs(keys RequestKeys, pipes *pipeline.Registry) jobbackend.Jobs {
	return &protocolJobs{st: s.cfg.Store, pipes: pipes, keys: keys, prep: s, now: s.cfg.Now}
}

func caller(ctx context.Context) (ProtocolCall, error) {
	c, ok := ProtocolCallFrom(ctx)
	if !ok || c.Principal == nil {
		return ProtocolCall{}, fault.System(errors.New("provisioner call without an authenticated caller"))
	}
	return c, nil
}

// Submit finds or starts the job of one apply. A new job is stored as a draft, then the key is
// claimed, then the draft is queued: a crash or a racing replica at any point leaves at most
// a stray draft, never two running jobs for one key, and the next Submit finishes the work.
func (pj *protocolJobs) Submit(ctx context.Context, s jobbackend.Submission) (*job.Job, error) {
	c, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	org := c.Principal.OrgID
	id, err := pj.keys.RequestKeyJob(ctx, org, s.Key)
	if err != nil {
		return nil, err
	}
	var keyed *job.Job
	if id != "" {
		if keyed, err = pj.st.GetJob(ctx, &store.GetJobParams{OrgID: org, ID: id}); err != nil {
			return nil, fmt.Errorf("job %s of request %s: %w", id, s.Key, err)
		}
		if s.Ensure == protocol.EnsureAbsent && !finished(keyed) || s.Ensure != protocol.EnsureAbsent && !gone(keyed) {
			// The work of this key goes on, is done, or failed and is retried.
			return pj.settle(ctx, c, keyed)
		}
		// What this key made was deleted since (present), or what it deleted was made again
		// since (absent, the key being the content's hash): the same apply does its work anew.
	}
	if s.Ensure == protocol.EnsureAbsent {
		return pj.teardown(ctx, c, s, keyed)
	}
	draft, err := pj.prep.PrepareJob(ctx, c.Principal, c.SpaceID, s.Family, s.Application, s.Config)
	if err != nil {
		return nil, refusal(err)
	}
	draft.Status = job.StatusDraft
	if draft.Tags == nil {
		draft.Tags = map[string]string{}
	}
	draft.Tags["groundwork.io/submitted-by"] = "provisioner-protocol"
	var created *job.Job
	err = pj.prep.AuditedJobChange(ctx, c.Principal, "provisioning-job.create", draft.ID,
		map[string]any{"kind": draft.Family, "spaceID": draft.SpaceID, "mode": draft.Mode, "via": via},
		func(tx store.Tx) (err error) {
			created, err = tx.CreateJob(ctx, &store.CreateJobParams{Job: draft, Now: pj.now()})
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("store the job of request %s: %w", s.Key, err)
	}
	winner, err := pj.pointKey(ctx, org, s.Key, keyed, created.ID)
	if err != nil {
		return nil, err
	}
	j := created
	if winner != created.ID {
		// Another call for the same key won: drop our draft and answer with its job.
		cancelled := job.StatusCancelled
		if _, err := pj.st.UpdateJob(ctx, &store.UpdateJobParams{OrgID: org, ID: created.ID, Version: created.Version,
			Now: pj.now(), Status: &cancelled}); err != nil {
			return nil, fmt.Errorf("drop the duplicate draft %s: %w", created.ID, err)
		}
		if j, err = pj.st.GetJob(ctx, &store.GetJobParams{OrgID: org, ID: winner}); err != nil {
			return nil, fmt.Errorf("job %s of request %s: %w", winner, s.Key, err)
		}
	}
	return pj.settle(ctx, c, j)
}

// pointKey makes key name job id: a new claim, or a move away from the job it named before
// (keyed). It returns the job the key names afterwards, which is another one when a racing
// call got there first.
func (pj *protocolJobs) pointKey(ctx context.Context, org, key string, keyed *job.Job, id string) (string, error) {
	if keyed != nil {
		return pj.keys.ReplaceRequestKey(ctx, org, key, keyed.ID, id)
	}
	return pj.keys.ClaimRequestKey(ctx, org, key, id, pj.now())
}

// gone reports whether j's resource no longer exists (torn down or never made).
func gone(j *job.Job) bool {
	return finished(j) || j.Phase == job.PhaseTeardown
}

// finished reports whether j has ended for good (its teardown done, or cancelled).
func finished(j *job.Job) bool {
	return j.Status == job.StatusDeleted || j.Status == job.StatusCancelled
}

// settle moves the job of a key along: a draft (left by a crash between claim and queue, or
// just claimed) is queued; a failed job is retried, since a provisioner keeps no failed result
// under a key. Racing calls for one key may both try; the loser re-reads what the winner wrote.
func (pj *protocolJobs) settle(ctx context.Context, c ProtocolCall, j *job.Job) (*job.Job, error) {
	for attempt := 0; ; attempt++ {
		out, err := pj.settleOnce(ctx, c, j)
		if !errors.Is(err, store.ErrVersionConflict) {
			return out, err
		}
		if attempt == 4 {
			return nil, fault.Transient(fmt.Errorf("job %s keeps changing: %w", j.ID, err))
		}
		if j, err = pj.st.GetJob(ctx, &store.GetJobParams{OrgID: j.OrgID, ID: j.ID}); err != nil {
			return nil, err
		}
	}
}

func (pj *protocolJobs) settleOnce(ctx context.Context, c ProtocolCall, j *job.Job) (*job.Job, error) {
	switch j.Status {
	case job.StatusDraft:
		now := pj.now()
		queued := job.StatusQueued
		return pj.st.UpdateJob(ctx, &store.UpdateJobParams{OrgID: j.OrgID, ID: j.ID, Version: j.Version, Now: now,
			Status: &queued, NextRunAt: &now})
	case job.StatusFailed:
		var out *job.Job
		err := pj.prep.AuditedJobChange(ctx, c.Principal, "provisioning-job.retry", j.ID, map[string]any{"via": via},
			func(tx store.Tx) (err error) {
				out, err = engine.Retry(ctx, tx, j, pj.now())
				return err
			})
		return out, err
	}
	return j, nil
}

// teardown starts deleting the application's resource: the teardown of its current job. With
// nothing there it answers keyed, the job of an earlier deletion under the same key (if any),
// so that the same apply gives the same result.
func (pj *protocolJobs) teardown(ctx context.Context, c ProtocolCall, s jobbackend.Submission, keyed *job.Job) (*job.Job, error) {
	cur, err := pj.Current(ctx, s.Family, s.Application)
	if err != nil {
		return nil, err
	}
	if cur == nil {
		return keyed, nil
	}
	var out *job.Job
	err = pj.prep.AuditedJobChange(ctx, c.Principal, "provisioning-job.delete", cur.ID,
		map[string]any{"statusBefore": cur.Status, "via": via},
		func(tx store.Tx) (err error) {
			out, err = engine.Cancel(ctx, tx, cur, pj.now())
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("tear down %s: %w", cur.ID, err)
	}
	if _, err := pj.pointKey(ctx, c.Principal.OrgID, s.Key, keyed, cur.ID); err != nil {
		return nil, err
	}
	return out, nil
}

// refusal turns the jobs API's refusal of a job into a failure of the work, which the protocol
// answers as outcome failed with the fields named in the reason.
func refusal(err error) error {
	var pr *Problem
	if !errors.As(err, &pr) {
		return err
	}
	if pr.Status >= 500 {
		return err
	}
	parts := make([]string, 0, len(pr.Errors))
	for _, f := range pr.Errors {
		parts = append(parts, f.Field+": "+f.Message)
	}
	reason := pr.Detail
	if len(parts) > 0 {
		reason += ": " + strings.Join(parts, "; ")
	}
	code, hint := "Refused", "correct the request as the reason says"
	space := func(rules ...string) bool {
		return slices.ContainsFunc(pr.Errors, func(f FieldError) bool { return f.Field == "spaceID" && slices.Contains(rules, f.Rule) })
	}
	switch {
	case space("exists", "required"):
		code, hint = "UnknownSpace", "name an existing space of your organisation in the "+SpaceHeader+" header"
	case space("provider", "cluster"):
		code, hint = "UnsupportedProvider", "use a space whose provider serves this pair"
	case space("permissionLevel"):
		code, hint = "ReadOnlyAccount", pr.FixHint
	case slices.ContainsFunc(pr.Errors, func(f FieldError) bool { return strings.HasPrefix(f.Field, "config") }):
		code, hint = "InvalidSettings", "correct the settings named in the reason"
	}
	return fault.UserAction(errors.New(reason), code, hint, "")
}

// Admit lays out the job an apply of s would submit, as Submit does, and keeps nothing. Without
// settings (inspect, ensure absent) only the space and the provider are judged: the settings'
// refusal is dropped. A caller who may view but not create is not refused here: plan and
// inspect need only provisioning:view, and apply checks provisioning:create itself.
func (pj *protocolJobs) Admit(ctx context.Context, s jobbackend.Submission) error {
	c, err := caller(ctx)
	if err != nil {
		return err
	}
	cfg := s.Config
	if cfg == nil {
		cfg = json.RawMessage(`{}`)
	}
	_, err = pj.prep.PrepareJob(ctx, c.Principal, c.SpaceID, s.Family, s.Application, cfg)
	if err == nil {
		return nil
	}
	var pr *Problem
	if errors.As(err, &pr) && pr.Status == http.StatusForbidden && len(pr.Errors) == 0 {
		return nil
	}
	err = refusal(err)
	if s.Config == nil && fault.As(err).Code == "InvalidSettings" {
		// The catalog refused the empty settings before the pipeline saw the space; ask the
		// pipeline alone whether the space's provider serves the family.
		return pj.admitPlace(ctx, c, s.Family)
	}
	return err
}

// admitPlace is the pipeline's judgement of where a job of family would run, leaving its
// settings out: only its refusals naming the space count.
func (pj *protocolJobs) admitPlace(ctx context.Context, c ProtocolCall, family job.Family) error {
	space, err := pj.st.GetSpace(ctx, c.Principal.OrgID, c.SpaceID)
	if err != nil {
		return fmt.Errorf("space %s: %w", c.SpaceID, err)
	}
	pl, ok := pj.pipes.Get(family)
	if !ok {
		return nil
	}
	err = pl.Validate(ctx, &job.Job{OrgID: c.Principal.OrgID, SpaceID: space.ID, Family: family, Provider: space.Provider,
		Mode: job.ModeCreate, Config: json.RawMessage(`{}`), Infra: json.RawMessage(`{}`)})
	var fe FieldErrorer
	if !errors.As(err, &fe) {
		return nil
	}
	var placed []FieldError
	for _, f := range fe.FieldErrors() {
		if f.Field == "spaceID" {
			placed = append(placed, f)
		}
	}
	if len(placed) == 0 {
		return nil
	}
	return refusal(&Problem{Type: "about:blank", Title: http.StatusText(http.StatusBadRequest), Status: http.StatusBadRequest,
		Detail: "the space cannot hold this job", Errors: placed})
}

// Job reads the job behind an operation id, in the caller's organisation only.
func (pj *protocolJobs) Job(ctx context.Context, id string) (*job.Job, error) {
	c, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	j, err := pj.st.GetJob(ctx, &store.GetJobParams{OrgID: c.Principal.OrgID, ID: id})
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("job %s: %w", id, jobbackend.ErrNotFound)
	}
	return j, err
}

// Current returns the newest completed create job of family named application in the caller's
// space, or nil.
func (pj *protocolJobs) Current(ctx context.Context, family job.Family, application string) (*job.Job, error) {
	c, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	p := &store.ListJobsParams{OrgID: c.Principal.OrgID, Family: family, SpaceID: c.SpaceID,
		Status: job.StatusCompleted, Limit: 500}
	for {
		page, err := pj.st.ListJobs(ctx, p)
		if err != nil {
			return nil, err
		}
		for _, j := range page.Jobs { // newest first
			if j.Name == application && j.Mode == job.ModeCreate && j.Phase == job.PhaseApply {
				return j, nil
			}
		}
		if page.Next == "" {
			return nil, nil
		}
		p.After = page.Next
	}
}
