package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/groundworkhq/groundwork/internal/audit"
	"github.com/groundworkhq/groundwork/internal/engine"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/jobs"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/remediation"
	"github.com/groundworkhq/groundwork/internal/store"
)

// RemediationConfig turns on /api/remediation-jobs. The pipeline registry must hold the
// remediation family and the store must keep the timeline (remediation.Timeline).
type RemediationConfig struct{}

const remediationJobs = "/api/remediation-jobs"

func (s *Server) remediationRoutes() []route {
	if s.cfg.Remediation == nil {
		return nil
	}
	const one = remediationJobs + "/{id}"
	return []route{
		{"POST", remediationJobs, "remediation:create", s.createRemediation},
		{"GET", remediationJobs, "remediation:view", s.listRemediations},
		{"GET", one, "remediation:view", s.getRemediation},
		{"POST", one + "/cancel", "remediation:update", s.cancelRemediation},
		{"POST", one + "/steps-by-id/{stepID}/approve", "remediation:approve", s.decideRemediation(true, false)},
		{"POST", one + "/steps-by-id/{stepID}/reject", "remediation:approve", s.decideRemediation(false, false)},
		{"POST", one + "/steps/{stepName}/approve", "remediation:approve", s.decideRemediation(true, true)},
		{"POST", one + "/steps/{stepName}/reject", "remediation:approve", s.decideRemediation(false, true)},
		{"GET", one + "/audit", "remediation:view", s.remediationTimeline},
	}
}

// RemediationJob is a remediation job with its template's steps, so that a client knows the
// stable id of each gate.
type RemediationJob struct {
	*job.Job
	Template string            `json:"template"`
	Workflow []RemediationStep `json:"workflow"`
	// Notifications are the delivery records of the job's notifications (on a read of one job).
	Notifications []remediation.Delivery `json:"notifications,omitempty"`
}

// RemediationStep is one template step and where the job stands at it.
type RemediationStep struct {
	ID     string               `json:"id"`
	Name   string               `json:"name"`
	Kind   remediation.StepKind `json:"kind"`
	Status job.StepStatus       `json:"status"`
}

type remediationList struct {
	Data       []RemediationJob `json:"data"`
	NextCursor string           `json:"nextCursor,omitempty"`
}

type remediationTimeline struct {
	Data []remediation.Event `json:"data"`
}

// decisionRequest is the optional body of approve and reject.
type decisionRequest struct {
	Reason string `json:"reason,omitempty" maxLength:"1000" description:"why; kept on the timeline"`
}

func remediationView(j *job.Job) RemediationJob {
	out := RemediationJob{Job: j, Workflow: []RemediationStep{}}
	if c, err := remediation.ConfigOf(j); err == nil {
		out.Template = c.Template + "@" + strconv.Itoa(c.Revision)
	}
	steps, err := remediation.StepsOf(j)
	if err != nil {
		return out
	}
	for i, d := range steps {
		st := RemediationStep{ID: d.ID, Name: d.Name, Kind: d.Kind}
		if i < len(j.Steps) {
			st.Status = j.Steps[i].Status
		}
		out.Workflow = append(out.Workflow, st)
	}
	return out
}

func (s *Server) createRemediation(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var req remediation.CreateRequest
	if pr := decode(r, &req); pr != nil {
		return pr
	}
	pl, ok := s.cfg.Pipelines.Get(remediation.Family)
	if !ok {
		return errors.New("the remediation pipeline is not registered")
	}
	var space *store.Space
	if req.SpaceID != "" {
		sp, err := s.cfg.Store.GetSpace(r.Context(), p.OrgID, req.SpaceID)
		if errors.Is(err, store.ErrNotFound) {
			return problem(http.StatusNotFound, "space not found",
				FieldError{Field: "spaceID", Rule: "exists", Message: "no space " + req.SpaceID + " in your organisation"})
		}
		if err != nil {
			return err
		}
		space = sp
	}
	provider := ""
	if space != nil {
		provider = space.Provider
	}
	j, fields := remediation.NewJob(&req, p.OrgID, provider, func(j *job.Job) []job.StepRecord {
		return pipeline.NewStepRecords(pl.Steps(j))
	}, pl.LeaseTTL(), s.cfg.Now())
	if len(fields) > 0 {
		return badRequest("the remediation request is invalid", fields...)
	}
	if p.Perms != nil && !p.Perms.OrgWide("remediation:create") {
		chain, err := newScopes(s.cfg.Store, p.OrgID).space(r.Context(), space.ID)
		if err != nil {
			return err
		}
		if !p.Can("remediation:create", chain...) {
			return problem(http.StatusForbidden, "this needs the remediation:create permission on space "+space.ID)
		}
	}
	if err := s.jobs.RequireReadWrite(r.Context(), p.OrgID, space); err != nil {
		return refusalProblem(err)
	}
	if err := pl.Validate(r.Context(), j); err != nil {
		return validationProblem(err)
	}
	var created *job.Job
	err := s.audited(r.Context(), p, entry(audit.ScopeProvisioning, "remediation-job.create", "remediation-job", j.ID,
		map[string]any{"recommendationID": req.RecommendationID, "action": req.Action, "resourceType": req.ResourceType,
			"subjectID": req.SubjectID, "spaceID": req.SpaceID}),
		func(tx store.Tx) (err error) {
			created, err = tx.CreateJob(r.Context(), &store.CreateJobParams{Job: j, Now: s.cfg.Now()})
			return err
		})
	if err != nil {
		return err
	}
	w.Header().Set("Location", remediationJobs+"/"+created.ID)
	writeJSON(w, http.StatusCreated, remediationView(created))
	return nil
}

func (s *Server) listRemediations(w http.ResponseWriter, r *http.Request, p *Principal) error {
	params, err := listQuery(r.URL.Query(), p.OrgID)
	if err != nil {
		return err
	}
	params.Family = remediation.Family
	list, next, err := s.visibleJobs(r.Context(), p, params, "remediation", func(*job.Job) bool { return true })
	if err != nil {
		return err
	}
	out := remediationList{Data: []RemediationJob{}, NextCursor: next}
	for _, j := range list {
		out.Data = append(out.Data, remediationView(j))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// loadRemediation reads a remediation job of the caller's org; any other job is not found.
func (s *Server) loadRemediation(r *http.Request, p *Principal) (*job.Job, error) {
	j, err := s.cfg.Store.GetJob(r.Context(), &store.GetJobParams{OrgID: p.OrgID, ID: r.PathValue("id")})
	if err != nil {
		return nil, storeErr(err, "remediation job")
	}
	if j.Kind != job.KindRemediation {
		return nil, notFound("remediation job")
	}
	return j, nil
}

func (s *Server) getRemediation(w http.ResponseWriter, r *http.Request, p *Principal) error {
	j, err := s.loadRemediation(r, p)
	if err != nil {
		return err
	}
	tl := s.cfg.Store
	out := remediationView(j)
	if out.Notifications, err = tl.ListDeliveries(r.Context(), p.OrgID, j.ID); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) cancelRemediation(w http.ResponseWriter, r *http.Request, p *Principal) error {
	j, err := s.loadRemediation(r, p)
	if err != nil {
		return err
	}
	out := j
	err = s.audited(r.Context(), p, entry(audit.ScopeProvisioning, "remediation-job.cancel", "remediation-job", j.ID,
		map[string]any{"statusBefore": j.Status}),
		func(tx store.Tx) error {
			o, err := engine.Cancel(r.Context(), tx, j, s.cfg.Now())
			if err != nil {
				return err
			}
			out = o
			if o.Version == j.Version {
				return errNoChange
			}
			return nil
		})
	if err != nil && !errors.Is(err, errNoChange) {
		return jobErr(jobs.TransitionRefusal(err))
	}
	writeJSON(w, http.StatusAccepted, remediationView(out))
	return nil
}

// decideRemediation approves or rejects the gate named by the path. Approval queues the job
// at the gate (the engine records the decision on the timeline when it passes it); rejection
// cancels the job (the engine records it while winding the workflow down).
func (s *Server) decideRemediation(approve, byName bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, p *Principal) error {
		var req decisionRequest
		if pr := decodeOptional(r, &req); pr != nil {
			return pr
		}
		if len(req.Reason) > 1000 {
			return badRequest("the reason is too long", FieldError{Field: "reason", Rule: "maxLength", Message: "must be at most 1000 characters"})
		}
		key, param := r.PathValue("stepID"), "stepID"
		if byName {
			key, param = r.PathValue("stepName"), "stepName"
		}
		j, err := s.loadRemediation(r, p)
		if err != nil {
			return err
		}
		verb := "reject"
		if approve {
			verb = "approve"
		}
		now := s.cfg.Now()
		var out *job.Job
		ent := entry(audit.ScopeProvisioning, "remediation-job."+verb, "remediation-job", j.ID, nil)
		err = s.audited(r.Context(), p, ent,
			func(tx store.Tx) error {
				cfg, st, err := remediation.Decide(j, key, byName, remediation.Decision{Approved: approve, Actor: p.Actor, Reason: req.Reason, At: now})
				if err != nil {
					return err
				}
				ent.Metadata, _ = json.Marshal(map[string]any{"stepID": st.ID, "stepName": st.Name, "reason": req.Reason})
				up := &store.UpdateJobParams{OrgID: j.OrgID, ID: j.ID, Version: j.Version, Now: now, Config: cfg, NextRunAt: &now}
				queued := job.StatusQueued
				up.Status = &queued
				if !approve {
					yes, teardown := true, job.PhaseTeardown
					up.CancelRequested, up.Phase = &yes, &teardown
				}
				out, err = tx.UpdateJob(r.Context(), up)
				return err
			})
		switch {
		case errors.Is(err, remediation.ErrNoSuchStep):
			return problem(http.StatusNotFound, "no approval step "+key+" in this workflow",
				FieldError{Field: param, Rule: "exists", Message: "names no approval step of the job's template"})
		case errors.Is(err, remediation.ErrNotAwaiting):
			return problem(http.StatusConflict, err.Error())
		case err != nil:
			return storeErr(err, "remediation job")
		}
		writeJSON(w, http.StatusAccepted, remediationView(out))
		return nil
	}
}

func (s *Server) remediationTimeline(w http.ResponseWriter, r *http.Request, p *Principal) error {
	j, err := s.loadRemediation(r, p)
	if err != nil {
		return err
	}
	tl := s.cfg.Store
	evs, err := tl.ListEvents(r.Context(), p.OrgID, j.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, remediationTimeline{Data: evs})
	return nil
}

type listRemediationsParams struct {
	Status  string `query:"status" minLength:"1" description:"a job status"`
	SpaceID string `query:"spaceID" minLength:"1"`
	Cursor  string `query:"cursor" description:"nextCursor of the previous page"`
	Limit   int    `query:"limit" minimum:"1" maximum:"500"`
}

func remediationDocs() map[string]opDoc {
	accepted := map[int]any{http.StatusAccepted: RemediationJob{}}
	c := http.StatusConflict
	decide := func(summary string) opDoc {
		return opDoc{summary: summary, body: decisionRequest{}, bodyOptional: true, ok: accepted, problems: []int{c}}
	}
	const one = remediationJobs + "/{id}"
	return map[string]opDoc{
		"POST " + remediationJobs: {summary: "Start a remediation workflow for a recommendation", body: remediation.CreateRequest{},
			ok: map[int]any{http.StatusCreated: RemediationJob{}}, problems: []int{c}},
		"GET " + remediationJobs:                        {summary: "List remediation workflows, newest first (cursor)", params: listRemediationsParams{}, ok: map[int]any{200: remediationList{}}},
		"GET " + one:                                    {summary: "Read a remediation workflow", ok: map[int]any{200: RemediationJob{}}},
		"POST " + one + "/cancel":                       {summary: "Cancel a running or waiting workflow", ok: accepted, problems: []int{c}},
		"POST " + one + "/steps-by-id/{stepID}/approve": decide("Approve the approval step with this stable id"),
		"POST " + one + "/steps-by-id/{stepID}/reject":  decide("Reject the approval step with this stable id; the workflow ends cancelled"),
		"POST " + one + "/steps/{stepName}/approve":     decide("Approve the approval step with this name"),
		"POST " + one + "/steps/{stepName}/reject":      decide("Reject the approval step with this name; the workflow ends cancelled"),
		"GET " + one + "/audit":                         {summary: "The workflow's step timeline", ok: map[int]any{200: remediationTimeline{}}},
	}
}
