package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/groundworkhq/groundwork/internal/audit"
	"github.com/groundworkhq/groundwork/internal/engine"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/jobs"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/validation"
)

type createJobRequest struct {
	SpaceID string            `json:"spaceID"`
	Kind    string            `json:"kind"`
	Mode    string            `json:"mode"`
	Draft   bool              `json:"draft"`
	Name    string            `json:"name"`
	Tags    map[string]string `json:"tags"`
	Config  json.RawMessage   `json:"config"`
}

// FieldErrorer is implemented by validation errors that know which fields are wrong (a
// pipeline's Validate returns a validation.Error).
type FieldErrorer = validation.Fielder

func (s *Server) createJob(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var req createJobRequest
	if pr := decode(r, &req); pr != nil {
		return pr
	}
	j, err := s.NewJob(r.Context(), p, &req)
	if err != nil {
		return err
	}
	var created *job.Job
	err = s.audited(r.Context(), p, entry(audit.ScopeProvisioning, "provisioning-job.create", "provisioning-job", j.ID,
		map[string]any{"kind": j.Family, "spaceID": j.SpaceID, "mode": j.Mode, "status": j.Status}),
		func(tx store.Tx) (err error) {
			created, err = tx.CreateJob(r.Context(), &store.CreateJobParams{Job: j, Now: s.cfg.Now()})
			return err
		})
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/provisioning-jobs/"+created.ID)
	writeJSON(w, http.StatusCreated, created)
	return nil
}

// NewJob validates a create request and lays out the job (not yet stored). Other entry points
// that create jobs (install-component, the provisioner protocol) go through it too.
func (s *Server) NewJob(ctx context.Context, p *Principal, req *createJobRequest) (*job.Job, error) {
	return s.newJob(ctx, p, req, true)
}

// newJob is NewJob; checkAccount refuses a create on a read-only cloud account (a plan is
// answered for one).
func (s *Server) newJob(ctx context.Context, p *Principal, req *createJobRequest, checkAccount bool) (*job.Job, error) {
	j, err := s.jobs.Admit(ctx, p.OrgID, jobs.Request{SpaceID: req.SpaceID, Kind: req.Kind, Mode: req.Mode, Draft: req.Draft,
		Name: req.Name, Tags: req.Tags, Config: req.Config}, func(ctx context.Context, space *store.Space) error {
		if p.Perms == nil || p.Perms.OrgWide("provisioning:create") {
			return nil
		}
		chain, err := newScopes(s.cfg.Store, p.OrgID).space(ctx, space.ID)
		if err != nil {
			return err
		}
		if !p.Can("provisioning:create", chain...) {
			return problem(http.StatusForbidden, "this needs the provisioning:create permission on space "+space.ID)
		}
		return nil
	})
	if err != nil {
		return nil, refusalProblem(err)
	}
	if checkAccount {
		if err := s.checkAccount(ctx, j); err != nil {
			return nil, err
		}
	}
	return j, nil
}

// refusalProblem renders the jobs service's refusal as a problem; other errors pass.
func refusalProblem(err error) error {
	var rf *jobs.Refusal
	if !errors.As(err, &rf) {
		return err
	}
	status := http.StatusBadRequest
	if rf.Reason == jobs.NotFound {
		status = http.StatusNotFound
	}
	return problem(status, rf.Detail, rf.Fields...)
}

func validationProblem(err error) error { return refusalProblem(jobs.ConfigRefusal(err)) }

type jobList struct {
	Data       []*job.Job `json:"data"`
	NextCursor string     `json:"nextCursor,omitempty"`
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request, p *Principal) error {
	q := r.URL.Query()
	params := &store.ListJobsParams{OrgID: p.OrgID, Status: job.Status(q.Get("status")),
		Family: job.Family(q.Get("kind")), SpaceID: q.Get("spaceID"), After: q.Get("cursor")}
	if params.Status != "" && !params.Status.Valid() {
		return badRequest("unknown status", FieldError{Field: "status", Rule: "enum", Message: "not a job status"})
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 500 {
			return badRequest("bad limit", FieldError{Field: "limit", Rule: "range", Message: "must be a whole number from 1 to 500"})
		}
		params.Limit = n
	}
	page, err := s.cfg.Store.ListJobs(r.Context(), params)
	if err != nil {
		return err
	}
	// Remediation workflows are listed by /api/remediation-jobs; the cursor still walks the
	// whole ledger, so a page may hold fewer than limit.
	page.Jobs = slices.DeleteFunc(page.Jobs, func(j *job.Job) bool { return j.Kind == job.KindRemediation })
	if p.Perms != nil && !p.Perms.OrgWide("provisioning:view") {
		// A caller who may view only some spaces sees only their jobs; the cursor still walks
		// the whole org, so a page may hold fewer than limit.
		sc := newScopes(s.cfg.Store, p.OrgID)
		visible := []*job.Job{}
		for _, j := range page.Jobs {
			chain, err := sc.space(r.Context(), j.SpaceID)
			if err != nil {
				return err
			}
			if p.Can("provisioning:view", append(chain, "provisioning:"+j.ID)...) {
				visible = append(visible, j)
			}
		}
		page.Jobs = visible
	}
	if page.Jobs == nil {
		page.Jobs = []*job.Job{}
	}
	writeJSON(w, http.StatusOK, jobList{Data: page.Jobs, NextCursor: page.Next})
	return nil
}

func (s *Server) loadJob(ctx context.Context, p *Principal, id string) (*job.Job, error) {
	j, err := s.cfg.Store.GetJob(ctx, &store.GetJobParams{OrgID: p.OrgID, ID: id})
	if err != nil {
		return nil, storeErr(err, "job")
	}
	if j.Kind == job.KindRemediation {
		// Remediation workflows share the ledger but are served by /api/remediation-jobs.
		return nil, notFound("job")
	}
	return j, nil
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request, p *Principal) error {
	j, err := s.loadJob(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, j)
	return nil
}

type patchJobRequest struct {
	Version *int64            `json:"version"`
	Name    *string           `json:"name"`
	Tags    map[string]string `json:"tags"`
	Status  *job.Status       `json:"status"`
	VMOp    *string           `json:"vmOp" description:"a VM operation on a completed vm_pool job: attach_lb or detach_lb"`
	// Min, Max and Desired resize an ASG pool in place.
	Min     *int32 `json:"min" description:"resize: the pool's new minimum (an ASG pool)"`
	Max     *int32 `json:"max" description:"resize: the pool's new maximum"`
	Desired *int32 `json:"desired" description:"resize: the pool's new desired size"`
}

// unconditionalAttempts bounds how often a PATCH without a version re-reads the job after
// losing a race to the engine's own checkpoints before it answers 409.
const unconditionalAttempts = 5

func (s *Server) patchJob(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var req patchJobRequest
	if pr := decode(r, &req); pr != nil {
		return pr
	}
	want, err := requestVersion(r, req.Version)
	if err != nil {
		return err
	}
	if req.Name != nil && len(*req.Name) > 200 {
		return badRequest("bad name", FieldError{Field: "name", Rule: "maxLength", Message: "must be at most 200 characters"})
	}
	// Without a version the client asks for the change to be applied to whatever the job is
	// now (the older clients' contract); the engine may commit in between, so a lost race is
	// retried on a fresh read rather than handed back as a conflict the client did not ask for.
	for attempt := 1; ; attempt++ {
		out, err := s.patchOnce(r, p, &req, want)
		if errors.Is(err, store.ErrVersionConflict) && want == nil && attempt < unconditionalAttempts {
			continue
		}
		if err != nil {
			return storeErr(err, "job")
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	}
}

// patchOnce applies req to the job as it is now; want, when set, is the version the client read.
func (s *Server) patchOnce(r *http.Request, p *Principal, req *patchJobRequest, want *int64) (*job.Job, error) {
	j, err := s.loadJob(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	if want != nil && j.Version != *want {
		return nil, problem(http.StatusConflict, fmt.Sprintf("the job is at version %d, not %d; read it again and retry", j.Version, *want))
	}
	up := &store.UpdateJobParams{OrgID: p.OrgID, ID: j.ID, Version: j.Version, Now: s.cfg.Now(), Name: req.Name, Tags: req.Tags}
	if req.Status != nil {
		if *req.Status != job.StatusQueued || j.Status != job.StatusDraft {
			return nil, problem(http.StatusConflict, fmt.Sprintf("PATCH can only promote a draft to queued; this job is %s", j.Status),
				FieldError{Field: "status", Rule: "transition", Message: "only draft → queued"})
		}
		// The account may have been made read-only since the draft was written.
		if err := s.checkAccount(r.Context(), j); err != nil {
			return nil, err
		}
		now := s.cfg.Now()
		up.Status, up.NextRunAt = req.Status, &now
	}
	if req.VMOp != nil {
		if err := s.planVMOp(j, *req.VMOp, up); err != nil {
			return nil, err
		}
	}
	resize := req.Min != nil || req.Max != nil || req.Desired != nil
	if resize {
		if err := s.planResize(j, req.Min, req.Max, req.Desired, up); err != nil {
			return nil, err
		}
	}
	action, meta := "provisioning-job.update", map[string]any{"name": req.Name, "tags": req.Tags}
	if req.Status != nil {
		meta["status"] = *req.Status
	}
	if req.VMOp != nil {
		action, meta["vmOp"] = "provisioning-job.vm_op", *req.VMOp
	}
	if resize {
		action, meta["min"], meta["max"], meta["desired"] = "provisioning-job.resize", req.Min, req.Max, req.Desired
	}
	if want == nil {
		meta["unconditional"] = true
	}
	var out *job.Job
	err = s.audited(r.Context(), p, entry(audit.ScopeProvisioning, action, "provisioning-job", j.ID, meta),
		func(tx store.Tx) (err error) {
			out, err = tx.UpdateJob(r.Context(), up)
			return err
		})
	return out, err
}

func (s *Server) planVMOp(j *job.Job, op string, up *store.UpdateJobParams) error {
	if err := vmpool.CheckOp(op); err != nil {
		fields, _ := validation.Fields(err)
		return badRequest("unknown vmOp", fields...)
	}
	if j.Family != job.FamilyVMPool {
		return badRequest("vmOp applies to vm_pool jobs", FieldError{Field: "vmOp", Rule: "kind", Message: "this job is " + string(j.Family)})
	}
	if j.Status != job.StatusCompleted {
		return problem(http.StatusConflict, "vmOp needs a completed job; this one is "+string(j.Status))
	}
	vo := s.cfg.VMOps
	if vo == nil {
		return badRequest("this server's vm_pool pipeline has no VM operations", FieldError{Field: "vmOp", Rule: "supported", Message: "not supported"})
	}
	config, steps, err := vo.PlanVMOp(j, op)
	if err != nil {
		return validationProblem(err)
	}
	queued := job.StatusQueued
	now := s.cfg.Now()
	up.Config, up.Steps, up.Status, up.NextRunAt = config, steps, &queued, &now
	return nil
}

func (s *Server) planResize(j *job.Job, min, max, desired *int32, up *store.UpdateJobParams) error {
	if up.Config != nil {
		return badRequest("resize and vmOp are separate requests", FieldError{Field: "vmOp", Rule: "exclusive", Message: "send vmOp or min/max/desired, not both"})
	}
	if j.Family != job.FamilyVMPool {
		return badRequest("min/max/desired resize vm_pool jobs", FieldError{Field: "min", Rule: "kind", Message: "this job is " + string(j.Family)})
	}
	if j.Status != job.StatusCompleted {
		return problem(http.StatusConflict, "a resize needs a completed job; this one is "+string(j.Status))
	}
	vr := s.cfg.VMOps
	if vr == nil {
		return badRequest("this server's vm_pool pipeline does not resize", FieldError{Field: "min", Rule: "supported", Message: "not supported"})
	}
	config, steps, err := vr.PlanResize(j, min, max, desired)
	if err != nil {
		return validationProblem(err)
	}
	queued := job.StatusQueued
	now := s.cfg.Now()
	up.Config, up.Steps, up.Status, up.NextRunAt = config, steps, &queued, &now
	return nil
}

// requestVersion takes the version the client read from the body or from If-Match; nil when
// the client sent neither, which asks for the change to apply to the job as it is.
func requestVersion(r *http.Request, body *int64) (*int64, error) {
	if body != nil {
		return body, nil
	}
	if h := strings.Trim(strings.TrimPrefix(r.Header.Get("If-Match"), "W/"), `"`); h != "" {
		v, err := strconv.ParseInt(h, 10, 64)
		if err != nil {
			return nil, badRequest("If-Match must hold the job's version", FieldError{Field: "If-Match", Rule: "type", Message: "must be a number"})
		}
		return &v, nil
	}
	return nil, nil
}

func (s *Server) deleteJob(w http.ResponseWriter, r *http.Request, p *Principal) error {
	j, err := s.loadJob(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	out := j
	err = s.audited(r.Context(), p, entry(audit.ScopeProvisioning, "provisioning-job.delete", "provisioning-job", j.ID,
		map[string]any{"statusBefore": j.Status}),
		func(tx store.Tx) error {
			o, err := engine.Cancel(r.Context(), tx, j, s.cfg.Now())
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
		return transitionErr(err)
	}
	if out.Status == job.StatusCancelled && !out.AnyStepCompleted() && s.cfg.Secrets != nil {
		// No step ran, so no undo will: the secrets stored for the job at admission (an adopted
		// server's password, secret component values) go now.
		if err := s.cfg.Secrets.Forget(r.Context(), secrets.JobOwner(out.OrgID, out.ID)); err != nil {
			s.log.Warn("a cancelled job's secrets were not deleted", "job", out.ID, "error", err)
		}
	}
	writeJSON(w, http.StatusAccepted, out)
	return nil
}

func (s *Server) retryJob(w http.ResponseWriter, r *http.Request, p *Principal) error {
	j, err := s.loadJob(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	var out *job.Job
	err = s.audited(r.Context(), p, entry(audit.ScopeProvisioning, "provisioning-job.retry", "provisioning-job", j.ID, nil),
		func(tx store.Tx) (err error) {
			out, err = engine.Retry(r.Context(), tx, j, s.cfg.Now())
			return err
		})
	if err != nil {
		return transitionErr(err)
	}
	writeJSON(w, http.StatusAccepted, out)
	return nil
}

func transitionErr(err error) error {
	var te *job.TransitionError
	if errors.As(err, &te) {
		return problem(http.StatusConflict, te.Error())
	}
	return storeErr(err, "job")
}

// Event stream timing. The server's WriteTimeout is for ordinary answers; a stream lives as
// long as its job, so it sets its own write deadline before each write instead: a client that
// stops reading is cut off after streamWriteGrace. The token is checked again at every
// keepalive, so a revoked or expired token ends its streams within streamKeepalive.
const (
	streamPoll        = time.Second
	streamKeepalive   = 15 * time.Second
	streamWriteGrace  = 30 * time.Second
	maxStreamsPerUser = 20
)

// jobEvents streams the job as server-sent events: one "job" event now and one per committed
// change, until the job settles (completed, failed, cancelled, deleted), the client leaves or
// the token stops being valid.
func (s *Server) jobEvents(w http.ResponseWriter, r *http.Request, p *Principal) error {
	j, err := s.loadJob(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	release, ok := s.cfg.Hub.openStream(streamHolder(p))
	if !ok {
		w.Header().Set("Retry-After", "15")
		return problem(http.StatusTooManyRequests, fmt.Sprintf("at most %d event streams may be open per token; close one first", s.cfg.Hub.streamCap()))
	}
	defer release()
	rc := http.NewResponseController(w)
	changes, unsubscribe := s.cfg.Hub.subscribe(p.OrgID, j.ID, j.Version)
	defer unsubscribe()
	// A change committed between the first read and the subscription would be missed until
	// the next one; one more read now closes that gap.
	if fresh, err := s.cfg.Store.GetJob(r.Context(), &store.GetJobParams{OrgID: p.OrgID, ID: j.ID}); err == nil {
		j = fresh
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	write := func(format string, args ...any) bool {
		if err := rc.SetWriteDeadline(time.Now().Add(streamWriteGrace)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return false
		}
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	send := func(j *job.Job) bool {
		b, _ := json.Marshal(j)
		return write("id: %d\nevent: job\ndata: %s\n\n", j.Version, b)
	}
	if !send(j) {
		return nil
	}
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	last := j.Version
	every := streamKeepalive
	if s.cfg.Hub.Keepalive > 0 {
		every = s.cfg.Hub.Keepalive
	}
	keepalive := time.NewTicker(every)
	defer keepalive.Stop()
	for !settled(j) {
		select {
		case <-r.Context().Done():
			return nil
		case <-keepalive.C:
			if _, err := s.cfg.Auth.Authenticate(r.Context(), token); err != nil {
				return nil // revoked, expired, or its user removed: the stream ends with it
			}
			if !write(": keepalive\n\n") {
				return nil
			}
			continue
		case c := <-changes:
			// From this process's commits or the shared feed (other replicas' commits).
			j = c
		}
		if j.Version > last {
			last = j.Version
			if !send(j) {
				return nil
			}
		}
	}
	return nil
}

// streamHolder is whose streams are counted together: the token, or for the bootstrap and
// static tokens (no stored id) the actor.
func streamHolder(p *Principal) string {
	if p.TokenID != "" {
		return "token:" + p.TokenID
	}
	return "actor:" + p.OrgID + "/" + p.Actor
}

func settled(j *job.Job) bool {
	switch j.Status {
	case job.StatusCompleted, job.StatusFailed, job.StatusCancelled, job.StatusDeleted:
		return true
	}
	return false
}
