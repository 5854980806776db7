package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/jobs"
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
	created, err := s.jobs.Create(r.Context(), jobCaller(p), s.jobRequest(&req, false), s.mayCreateIn(p))
	if err != nil {
		return refusalProblem(err)
	}
	w.Header().Set("Location", "/api/provisioning-jobs/"+created.ID)
	writeJSON(w, http.StatusCreated, created)
	return nil
}

// NewJob validates a create request and lays out the job (not yet stored). Other entry points
// that create jobs (install-component, the provisioner protocol) go through it too.
func (s *Server) NewJob(ctx context.Context, p *Principal, req *createJobRequest) (*job.Job, error) {
	return s.newJob(ctx, p, req, false)
}

// newJob is NewJob; planOnly admits a job that is only to be planned (a read-only cloud
// account is not refused: the plan is answered for one).
func (s *Server) newJob(ctx context.Context, p *Principal, req *createJobRequest, planOnly bool) (*job.Job, error) {
	j, err := s.jobs.Admit(ctx, p.OrgID, s.jobRequest(req, planOnly), s.mayCreateIn(p))
	if err != nil {
		return nil, refusalProblem(err)
	}
	return j, nil
}

func (s *Server) jobRequest(req *createJobRequest, planOnly bool) jobs.Request {
	return jobs.Request{SpaceID: req.SpaceID, Kind: req.Kind, Mode: req.Mode, Draft: req.Draft,
		Name: req.Name, Tags: req.Tags, Config: req.Config, PlanOnly: planOnly}
}

// mayCreateIn decides whether p may create a job in a space (the jobs service asks once it
// knows the space).
func (s *Server) mayCreateIn(p *Principal) jobs.Authorize {
	return func(ctx context.Context, space *store.Space) error {
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
	}
}

// refusalProblem renders the jobs service's refusal as a problem; other errors pass.
func refusalProblem(err error) error {
	var rf *jobs.Refusal
	if !errors.As(err, &rf) {
		return err
	}
	status := http.StatusBadRequest
	switch rf.Reason {
	case jobs.NotFound:
		status = http.StatusNotFound
	case jobs.Conflict:
		status = http.StatusConflict
	case jobs.Forbidden:
		status = http.StatusForbidden
	}
	pr := problem(status, rf.Detail, rf.Fields...)
	pr.FixHint = rf.FixHint
	return pr
}

// jobErr renders the jobs service's answer about a stored job: a refusal as its problem, the
// store's sentinels as theirs.
func jobErr(err error) error { return storeErr(refusalProblem(err), "job") }

func validationProblem(err error) error { return refusalProblem(jobs.ConfigRefusal(err)) }

type jobList struct {
	Data       []*job.Job `json:"data"`
	NextCursor string     `json:"nextCursor,omitempty"`
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request, p *Principal) error {
	params, err := listQuery(r.URL.Query(), p.OrgID)
	if err != nil {
		return err
	}
	params.Family = job.Family(r.URL.Query().Get("kind"))
	// Remediation workflows share the ledger but are listed by /api/remediation-jobs.
	list, next, err := s.visibleJobs(r.Context(), p, params, "provisioning",
		func(j *job.Job) bool { return j.Kind != job.KindRemediation })
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, jobList{Data: list, NextCursor: next})
	return nil
}

// listQuery reads the filters and page size every job list takes: status, spaceID, cursor
// and limit.
func listQuery(q url.Values, orgID string) (*store.ListJobsParams, error) {
	params := &store.ListJobsParams{OrgID: orgID, Status: job.Status(q.Get("status")), SpaceID: q.Get("spaceID"), After: q.Get("cursor")}
	if params.Status != "" && !params.Status.Valid() {
		return nil, badRequest("unknown status", FieldError{Field: "status", Rule: "enum", Message: "not a job status"})
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 500 {
			return nil, badRequest("bad limit", FieldError{Field: "limit", Rule: "range", Message: "must be a whole number from 1 to 500"})
		}
		params.Limit = n
	}
	return params, nil
}

// visibleJobs reads one page of params and keeps the jobs that keep accepts and that p may
// view (scope:view org-wide, on the job's space chain or on the job). The cursor walks the
// whole org, so a page may hold fewer than the limit.
func (s *Server) visibleJobs(ctx context.Context, p *Principal, params *store.ListJobsParams, scope string, keep func(*job.Job) bool) ([]*job.Job, string, error) {
	page, err := s.cfg.Store.ListJobs(ctx, params)
	if err != nil {
		return nil, "", err
	}
	perm := scope + ":view"
	orgWide := p.Perms == nil || p.Perms.OrgWide(perm)
	sc := newScopes(s.cfg.Store, p.OrgID)
	out := []*job.Job{}
	for _, j := range page.Jobs {
		if !keep(j) {
			continue
		}
		if !orgWide {
			chain, err := sc.space(ctx, j.SpaceID)
			if err != nil {
				return nil, "", err
			}
			if !p.Can(perm, append(chain, scope+":"+j.ID)...) {
				continue
			}
		}
		out = append(out, j)
	}
	return out, page.Next, nil
}

func (s *Server) loadJob(ctx context.Context, p *Principal, id string) (*job.Job, error) {
	j, err := s.jobs.Get(ctx, p.OrgID, id)
	if err != nil {
		return nil, storeErr(err, "job")
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
	VMOp    *string           `json:"vmOp" description:"a VM operation on a completed vm_pool job: attach_lb, detach_lb, or roll (replace every instance, one at a time, by one on the launch template's default version)"`
	// Min, Max and Desired resize an ASG pool in place.
	Min     *int32 `json:"min" description:"resize: the pool's new minimum (an ASG pool)"`
	Max     *int32 `json:"max" description:"resize: the pool's new maximum"`
	Desired *int32 `json:"desired" description:"resize: the pool's new desired size"`
	// Config updates a completed job (or one whose last update failed); see update-plan for
	// the dry run.
	Config           json.RawMessage `json:"config" description:"a config update: the whole new config of a completed job (or one whose last update failed); a request of its own"`
	AllowDataLoss    bool            `json:"allowDataLoss" description:"config update: accept a change that drops data (a shorter backup retention)"`
	ApplyImmediately *bool           `json:"applyImmediately" description:"config update: false leaves a disruptive change to the cloud's maintenance window (default true)"`
}

func (s *Server) patchJob(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var req patchJobRequest
	if pr := decode(r, &req); pr != nil {
		return pr
	}
	want, err := requestVersion(r, req.Version)
	if err != nil {
		return err
	}
	if string(req.Config) == "null" {
		req.Config = nil // as if left out, like every other field of the patch
	}
	patch := jobs.Patch{Version: want, Name: req.Name, Tags: req.Tags,
		Status: req.Status, VMOp: req.VMOp, Min: req.Min, Max: req.Max, Desired: req.Desired,
		Config: req.Config, AllowDataLoss: req.AllowDataLoss, ApplyImmediately: req.ApplyImmediately}
	if req.Config != nil {
		// A config update that drops data awaits approval: 202 with the pending revision.
		out, pending, err := s.jobs.PatchConfig(r.Context(), jobCaller(p), r.PathValue("id"), patch)
		if err != nil {
			return jobErr(err)
		}
		writeUpdated(w, http.StatusOK, out, pending)
		return nil
	}
	out, err := s.jobs.Patch(r.Context(), jobCaller(p), r.PathValue("id"), patch)
	if err != nil {
		return jobErr(err)
	}
	writeJSON(w, http.StatusOK, out)
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
	out, err := s.jobs.Cancel(r.Context(), jobCaller(p), r.PathValue("id"))
	if err != nil {
		return jobErr(err)
	}
	writeJSON(w, http.StatusAccepted, out)
	return nil
}

func (s *Server) retryJob(w http.ResponseWriter, r *http.Request, p *Principal) error {
	out, err := s.jobs.Retry(r.Context(), jobCaller(p), r.PathValue("id"))
	if err != nil {
		return jobErr(err)
	}
	writeJSON(w, http.StatusAccepted, out)
	return nil
}

// jobCaller is p as the jobs service records it.
func jobCaller(p *Principal) jobs.Caller { return jobs.Caller{OrgID: p.OrgID, Actor: p.Actor} }

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
