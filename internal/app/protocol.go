package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/groundworkhq/groundwork/internal/api"
	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/engine"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/remote"
	"github.com/groundworkhq/groundwork/internal/protocol"
	"github.com/groundworkhq/groundwork/internal/protocol/jobbackend"
	"github.com/groundworkhq/groundwork/internal/store"
)

// ProtocolOptions configure the provisioner protocol both ways: the server Groundwork mounts
// under /provisioner/ and the jobs it runs through remote provisioners.
type ProtocolOptions struct {
	// PollInterval is how long a job waits between two polls of a remote provisioner's
	// operation (default 5s).
	PollInterval time.Duration
	// CallTimeout bounds one call to a remote provisioner (default 30s).
	CallTimeout time.Duration
	// Observers read a built-in family's resources as they are, so that inspect reports drift.
	Observers map[job.Family]jobbackend.Observer
	// Health checks a remote before it is registered (default: GET healthz, 10s).
	Health protocol.HealthChecker
}

// protocolParts is what the protocol adds to a server: the registry of provisioners, shared by
// the API and the engine's remote pipelines.
type protocolParts struct {
	registry *protocol.Registry
	pipes    *pipeline.Registry
	store    store.Store
	catalog  *catalog.Catalog
	opts     ProtocolOptions
	logger   *slog.Logger
}

// requestKeys maps a protocol apply's idempotency key to the job serving it; the SQL stores
// implement it next to the job ledger.
type requestKeys interface {
	ClaimRequestKey(ctx context.Context, orgID, key, jobID string, now time.Time) (string, error)
	RequestKeyJob(ctx context.Context, orgID, key string) (string, error)
	ReplaceRequestKey(ctx context.Context, orgID, key, oldID, newID string) (string, error)
}

// wireProtocol builds the provisioner registry over the store and makes pipes resolve families
// spelled "category/type" to a remote pipeline, so that the engine and the jobs API find the
// pipeline of a pair held by a registered provisioner.
func wireProtocol(o Options, st store.Store, pipes *pipeline.Registry, cat *catalog.Catalog) (*protocolParts, error) {
	ps, ok := st.(protocol.ProvisionerStore)
	if !ok {
		return nil, fmt.Errorf("store %T cannot keep provisioner registrations", st)
	}
	if _, ok := st.(requestKeys); !ok {
		return nil, fmt.Errorf("store %T cannot keep provisioner-protocol request keys", st)
	}
	// Groundwork holds every built-in pair from start-up, also those this build has no pipeline
	// for: they are Groundwork's to serve, and a remote claiming one would be shadowed by the
	// built-in family of the same pair.
	reg := protocol.NewRegistry(ps, protocol.RegistryOptions{
		BuiltIn: protocol.Provisioner{Name: "groundwork", Pairs: catalog.BuiltinPairs()},
		Catalog: cat,
		Health:  o.Protocol.Health,
	})
	ropts := remote.Options{Holders: reg, Catalog: cat, PollInterval: o.Protocol.PollInterval, CallTimeout: o.Protocol.CallTimeout}
	pipes.SetFallback(func(f job.Family) (pipeline.Pipeline, bool) {
		pair, err := catalog.ParsePair(string(f))
		// A built-in pair spelled as a pair ("managed-resource/registry") is not remote: its
		// jobs are submitted under their family ("registry").
		if err != nil || catalog.FamilyForPair(pair) != f {
			return nil, false
		}
		return remote.New(pair, ropts), true
	})
	return &protocolParts{registry: reg, pipes: pipes, store: st, catalog: cat, opts: o.Protocol, logger: o.Logger}, nil
}

// mount serves the provisioner protocol for Groundwork's own pairs under /provisioner/: an
// apply becomes a job in the space the caller names, an operation is that job's status.
func (pp *protocolParts) mount(srv *api.Server) {
	var pairs []catalog.Pair
	for _, p := range catalog.BuiltinPairs() {
		if _, ok := pp.pipes.Get(catalog.FamilyForPair(p)); ok {
			pairs = append(pairs, p)
		}
	}
	if pairs == nil {
		pairs = []catalog.Pair{} // nil would mean "every built-in pair" to the backend
	}
	backend := jobbackend.New(jobbackend.Options{
		Jobs:      &protocolJobs{st: pp.store, keys: pp.store.(requestKeys), prep: srv, now: time.Now},
		Pipelines: pp.pipes,
		Pairs:     pairs,
		Observers: pp.opts.Observers,
	})
	ps := protocol.NewServer(backend, protocol.ServerOptions{Name: "groundwork", Catalog: pp.catalog, Logger: pp.logger})
	srv.Handle("/provisioner/", http.StripPrefix("/provisioner", srv.ProtocolAuth(ps)))
}

// jobPreparer validates and lays out a job as the jobs API does, and records the changes
// made to jobs in the audit log; *api.Server implements it.
type jobPreparer interface {
	PrepareJob(ctx context.Context, p *api.Principal, spaceID string, family job.Family, name string, config json.RawMessage) (*job.Job, error)
	AuditedJobChange(ctx context.Context, p *api.Principal, action, jobID string, meta map[string]any, fn func(tx store.Store) error) error
}

// via marks audit entries of changes made through the provisioner protocol.
const via = "provisioner-protocol"

// protocolJobs is jobbackend.Jobs over the job ledger. The caller and its space come from the
// request context (api.ProtocolAuth puts them there); the application is the job's name.
type protocolJobs struct {
	st   store.Store
	keys requestKeys
	prep jobPreparer
	now  func() time.Time
}

var _ jobbackend.Jobs = (*protocolJobs)(nil)

func caller(ctx context.Context) (api.ProtocolCall, error) {
	c, ok := api.ProtocolCallFrom(ctx)
	if !ok || c.Principal == nil {
		return api.ProtocolCall{}, fault.System(errors.New("provisioner call without an authenticated caller"))
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
		func(tx store.Store) (err error) {
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
func (pj *protocolJobs) settle(ctx context.Context, c api.ProtocolCall, j *job.Job) (*job.Job, error) {
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

func (pj *protocolJobs) settleOnce(ctx context.Context, c api.ProtocolCall, j *job.Job) (*job.Job, error) {
	switch j.Status {
	case job.StatusDraft:
		now := pj.now()
		queued := job.StatusQueued
		return pj.st.UpdateJob(ctx, &store.UpdateJobParams{OrgID: j.OrgID, ID: j.ID, Version: j.Version, Now: now,
			Status: &queued, NextRunAt: &now})
	case job.StatusFailed:
		var out *job.Job
		err := pj.prep.AuditedJobChange(ctx, c.Principal, "provisioning-job.retry", j.ID, map[string]any{"via": via},
			func(tx store.Store) (err error) {
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
func (pj *protocolJobs) teardown(ctx context.Context, c api.ProtocolCall, s jobbackend.Submission, keyed *job.Job) (*job.Job, error) {
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
		func(tx store.Store) (err error) {
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
	var pr *api.Problem
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
	switch {
	case slices.ContainsFunc(pr.Errors, func(f api.FieldError) bool { return f.Field == "spaceID" }):
		code, hint = "UnknownSpace", "name an existing space of your organisation in the "+api.SpaceHeader+" header"
	case slices.ContainsFunc(pr.Errors, func(f api.FieldError) bool { return strings.HasPrefix(f.Field, "config") }):
		code, hint = "InvalidSettings", "correct the settings named in the reason"
	}
	return fault.UserAction(errors.New(reason), code, hint, "")
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
