package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/groundworkhq/groundwork/internal/audit"
	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/engine"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/store"
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
// pipeline's Validate may return one).
type FieldErrorer interface {
	FieldErrors() []FieldError
}

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
		func(tx store.Store) (err error) {
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
	var fields []FieldError
	if req.SpaceID == "" {
		fields = append(fields, FieldError{Field: "spaceID", Rule: "required", Message: "is required"})
	}
	family := job.Family(req.Kind)
	if req.Kind == "" {
		fields = append(fields, FieldError{Field: "kind", Rule: "required", Message: "is required"})
	} else if _, ok := s.cfg.Pipelines.Get(family); !ok {
		fields = append(fields, FieldError{Field: "kind", Rule: "enum",
			Message: fmt.Sprintf("%q is not a kind this server provisions; one of %s", req.Kind, s.kinds())})
	}
	mode := job.Mode(req.Mode)
	if mode == "" {
		mode = job.ModeCreate
	}
	if mode != job.ModeCreate && mode != job.ModeAdopt {
		fields = append(fields, FieldError{Field: "mode", Rule: "enum", Message: "must be create or adopt"})
	}
	config := bytes.TrimSpace(req.Config)
	if len(config) == 0 || string(config) == "null" {
		config = []byte(`{}`)
	}
	if config[0] != '{' {
		fields = append(fields, FieldError{Field: "config", Rule: "type", Message: "must be an object"})
	}
	if len(req.Name) > 200 {
		fields = append(fields, FieldError{Field: "name", Rule: "maxLength", Message: "must be at most 200 characters"})
	}
	if len(fields) > 0 {
		return nil, badRequest("the job request is invalid", fields...)
	}
	space, err := s.cfg.Store.GetSpace(ctx, p.OrgID, req.SpaceID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, problem(http.StatusNotFound, "space not found",
			FieldError{Field: "spaceID", Rule: "exists", Message: "no space " + req.SpaceID + " in your organisation"})
	}
	if err != nil {
		return nil, err
	}
	if p.Perms != nil && !p.Perms.OrgWide("provisioning:create") {
		chain, err := newScopes(s.cfg.Store, p.OrgID).space(ctx, space.ID)
		if err != nil {
			return nil, err
		}
		if !p.Can("provisioning:create", chain...) {
			return nil, problem(http.StatusForbidden, "this needs the provisioning:create permission on space "+space.ID)
		}
	}
	if space.CloudAccountID != "" && mode == job.ModeCreate {
		acc, err := s.cfg.Store.GetCloudAccount(ctx, p.OrgID, space.CloudAccountID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		if acc != nil && acc.PermissionLevel == "read_only" {
			return nil, readOnlyRefusal(acc)
		}
	}
	if s.cfg.Catalog != nil && mode == job.ModeCreate {
		_, withDefaults, err := s.cfg.Catalog.ValidateJob(family, config)
		var ve *catalog.ValidationError
		switch {
		case errors.As(err, &ve):
			return nil, badRequest("the config is invalid for kind "+req.Kind, catalogFields(ve)...)
		case err == nil:
			config = withDefaults
		}
		// A family the catalog has no type for is validated by its pipeline alone.
	}
	pl, _ := s.cfg.Pipelines.Get(family)
	status := job.StatusQueued
	if req.Draft {
		status = job.StatusDraft
	}
	now := s.cfg.Now()
	j := &job.Job{
		ID: "job_" + ulid.Make().String(), OrgID: p.OrgID, SpaceID: space.ID, Kind: job.KindProvisioning,
		Family: family, Provider: space.Provider, Mode: mode, Name: req.Name, Tags: req.Tags,
		Config: json.RawMessage(config), Infra: json.RawMessage(`{}`), Status: status, Phase: job.PhaseApply,
		LeaseTTL: pl.LeaseTTL(), NextRunAt: now,
	}
	if err := pl.Validate(ctx, j); err != nil {
		return nil, validationProblem(err)
	}
	j.Steps = pipeline.NewStepRecords(pl.Steps(j))
	return j, nil
}

func catalogFields(ve *catalog.ValidationError) []FieldError {
	out := make([]FieldError, len(ve.Fields))
	for i, f := range ve.Fields {
		name := "config"
		if f.Field != "" {
			name = "config." + f.Field
		}
		out[i] = FieldError{Field: name, Rule: f.Rule, Message: f.Message}
	}
	return out
}

func validationProblem(err error) error {
	var fe FieldErrorer
	if errors.As(err, &fe) {
		return badRequest("the config is invalid", fe.FieldErrors()...)
	}
	var ve *catalog.ValidationError
	if errors.As(err, &ve) {
		return badRequest("the config is invalid", catalogFields(ve)...)
	}
	return badRequest(err.Error())
}

func (s *Server) kinds() string {
	var names []string
	for _, f := range job.Families {
		if _, ok := s.cfg.Pipelines.Get(f); ok {
			names = append(names, string(f))
		}
	}
	return strings.Join(names, ", ")
}

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
	VMOp    *string           `json:"vmOp"`
	// Min, Max and Desired resize an ASG pool in place.
	Min     *int32 `json:"min"`
	Max     *int32 `json:"max"`
	Desired *int32 `json:"desired"`
}

// VMOperator is implemented by a pipeline that supports post-provisioning VM operations
// (attach_lb, detach_lb): it returns the job's new config and step records, which the engine
// then runs like any other pending steps.
type VMOperator interface {
	PlanVMOp(j *job.Job, op string) (config json.RawMessage, steps []job.StepRecord, err error)
}

// VMResizer is implemented by a pipeline whose pools resize in place (an ASG): like
// PlanVMOp, it returns the new config and step records for the engine to run. A nil size
// keeps the current one.
type VMResizer interface {
	PlanResize(j *job.Job, min, max, desired *int32) (config json.RawMessage, steps []job.StepRecord, err error)
}

func (s *Server) patchJob(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var req patchJobRequest
	if pr := decode(r, &req); pr != nil {
		return pr
	}
	version, err := requestVersion(r, req.Version)
	if err != nil {
		return err
	}
	j, err := s.loadJob(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	if j.Version != version {
		return problem(http.StatusConflict, fmt.Sprintf("the job is at version %d, not %d; read it again and retry", j.Version, version))
	}
	up := &store.UpdateJobParams{OrgID: p.OrgID, ID: j.ID, Version: version, Now: s.cfg.Now(), Name: req.Name, Tags: req.Tags}
	if req.Name != nil && len(*req.Name) > 200 {
		return badRequest("bad name", FieldError{Field: "name", Rule: "maxLength", Message: "must be at most 200 characters"})
	}
	if req.Status != nil {
		if *req.Status != job.StatusQueued || j.Status != job.StatusDraft {
			return problem(http.StatusConflict, fmt.Sprintf("PATCH can only promote a draft to queued; this job is %s", j.Status),
				FieldError{Field: "status", Rule: "transition", Message: "only draft → queued"})
		}
		now := s.cfg.Now()
		up.Status, up.NextRunAt = req.Status, &now
	}
	if req.VMOp != nil {
		if err := s.planVMOp(j, *req.VMOp, up); err != nil {
			return err
		}
	}
	resize := req.Min != nil || req.Max != nil || req.Desired != nil
	if resize {
		if err := s.planResize(j, req.Min, req.Max, req.Desired, up); err != nil {
			return err
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
	var out *job.Job
	err = s.audited(r.Context(), p, entry(audit.ScopeProvisioning, action, "provisioning-job", j.ID, meta),
		func(tx store.Store) (err error) {
			out, err = tx.UpdateJob(r.Context(), up)
			return err
		})
	if err != nil {
		return storeErr(err, "job")
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) planVMOp(j *job.Job, op string, up *store.UpdateJobParams) error {
	if op != "attach_lb" && op != "detach_lb" {
		return badRequest("unknown vmOp", FieldError{Field: "vmOp", Rule: "enum", Message: "must be attach_lb or detach_lb"})
	}
	if j.Family != job.FamilyVMPool {
		return badRequest("vmOp applies to vm_pool jobs", FieldError{Field: "vmOp", Rule: "kind", Message: "this job is " + string(j.Family)})
	}
	if j.Status != job.StatusCompleted {
		return problem(http.StatusConflict, "vmOp needs a completed job; this one is "+string(j.Status))
	}
	pl, _ := s.cfg.Pipelines.Get(j.Family)
	vo, ok := pl.(VMOperator)
	if !ok {
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
	pl, _ := s.cfg.Pipelines.Get(j.Family)
	vr, ok := pl.(VMResizer)
	if !ok {
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

// requestVersion takes the version the client read from the body or from If-Match.
func requestVersion(r *http.Request, body *int64) (int64, error) {
	if body != nil {
		return *body, nil
	}
	if h := strings.Trim(strings.TrimPrefix(r.Header.Get("If-Match"), "W/"), `"`); h != "" {
		v, err := strconv.ParseInt(h, 10, 64)
		if err != nil {
			return 0, badRequest("If-Match must hold the job's version", FieldError{Field: "If-Match", Rule: "type", Message: "must be a number"})
		}
		return v, nil
	}
	return 0, problem(http.StatusPreconditionRequired, "send the version you read, as \"version\" in the body or in If-Match",
		FieldError{Field: "version", Rule: "required", Message: "is required"})
}

func (s *Server) deleteJob(w http.ResponseWriter, r *http.Request, p *Principal) error {
	j, err := s.loadJob(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	out := j
	err = s.audited(r.Context(), p, entry(audit.ScopeProvisioning, "provisioning-job.delete", "provisioning-job", j.ID,
		map[string]any{"statusBefore": j.Status}),
		func(tx store.Store) error {
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
		func(tx store.Store) (err error) {
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

// jobEvents streams the job as server-sent events: one "job" event now and one per committed
// change, until the job settles (completed, failed, cancelled, deleted).
func (s *Server) jobEvents(w http.ResponseWriter, r *http.Request, p *Principal) error {
	j, err := s.loadJob(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		return errors.New("streaming unsupported by the response writer")
	}
	changes, unsubscribe := s.cfg.Hub.subscribe(j.ID)
	defer unsubscribe()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	send := func(j *job.Job) {
		b, _ := json.Marshal(j)
		fmt.Fprintf(w, "id: %d\nevent: job\ndata: %s\n\n", j.Version, b)
		fl.Flush()
	}
	send(j)
	last := j.Version
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	for !settled(j) {
		select {
		case <-r.Context().Done():
			return nil
		case <-keepalive.C:
			fmt.Fprint(w, ": keepalive\n\n")
			fl.Flush()
			continue
		case c := <-changes:
			j = c
		case <-poll.C:
			// Another replica may be running the job; the store is the truth.
			fresh, err := s.cfg.Store.GetJob(r.Context(), &store.GetJobParams{OrgID: p.OrgID, ID: j.ID})
			if err != nil {
				return nil
			}
			j = fresh
		}
		if j.Version > last {
			last = j.Version
			send(j)
		}
	}
	return nil
}

func settled(j *job.Job) bool {
	switch j.Status {
	case job.StatusCompleted, job.StatusFailed, job.StatusCancelled, job.StatusDeleted:
		return true
	}
	return false
}
