package api

import (
	"encoding/json"
	"net/http"

	"github.com/groundworkhq/groundwork/internal/jobs"
	"github.com/groundworkhq/groundwork/internal/store"
)

// Configuration updates of live jobs: the dry run, the revision history and rollback. The
// update itself is PATCH /api/provisioning-jobs/{id} with config (patchJob).

type updatePlanRequest struct {
	Config           json.RawMessage `json:"config" required:"true" description:"the whole new config"`
	AllowDataLoss    bool            `json:"allowDataLoss" description:"accept a change that drops data (a shorter backup retention)"`
	ApplyImmediately *bool           `json:"applyImmediately" description:"false: a disruptive change waits for the cloud's maintenance window (default true)"`
}

type rollbackRequest struct {
	Version       *int64 `json:"version" description:"the job version read; omitted, the rollback applies to the job as it is"`
	AllowDataLoss bool   `json:"allowDataLoss" description:"accept a rollback that drops data"`
}

type revisionList struct {
	Data []store.JobRevision `json:"data"`
}

func (s *Server) updateRoutes() []route {
	return []route{
		{"POST", "/api/provisioning-jobs/{id}/update-plan", "provisioning:update", s.planJobUpdate},
		{"GET", "/api/provisioning-jobs/{id}/revisions", "provisioning:view", s.listJobRevisions},
		{"POST", "/api/provisioning-jobs/{id}/rollback", "provisioning:update", s.rollbackJob},
	}
}

func updateDocs() map[string]opDoc {
	c := http.StatusConflict
	return map[string]opDoc{
		"POST /api/provisioning-jobs/{id}/update-plan": {summary: "Dry run of a config update: per resource the action, changed fields and disruption; changes nothing",
			body: updatePlanRequest{}, ok: map[int]any{200: updatePlanAnswer{}}, problems: []int{c}},
		"GET /api/provisioning-jobs/{id}/revisions": {summary: "The job's config revisions, oldest first", ok: map[int]any{200: revisionList{}}},
		"POST /api/provisioning-jobs/{id}/rollback": {summary: "Re-open a job whose latest config update failed with its last applied revision's config; one that drops data awaits approval (pendingRevision)",
			body: rollbackRequest{}, bodyOptional: true, ok: map[int]any{202: pendingJob{}}, problems: []int{c}},
	}
}

func (s *Server) planJobUpdate(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var req updatePlanRequest
	if pr := decode(r, &req); pr != nil {
		return pr
	}
	if req.Config == nil {
		return badRequest("config is required", FieldError{Field: "config", Rule: "required", Message: "is required"})
	}
	pl, err := s.jobs.PlanUpdate(r.Context(), jobCaller(p), r.PathValue("id"),
		jobs.Update{Config: req.Config, AllowDataLoss: req.AllowDataLoss, ApplyImmediately: req.ApplyImmediately})
	if err != nil {
		return jobErr(err)
	}
	writeJSON(w, http.StatusOK, updatePlanAnswer{UpdatePlan: pl, NeedsApproval: jobs.NeedsApproval(pl)})
	return nil
}

func (s *Server) listJobRevisions(w http.ResponseWriter, r *http.Request, p *Principal) error {
	revs, err := s.jobs.Revisions(r.Context(), p.OrgID, r.PathValue("id"))
	if err != nil {
		return jobErr(err)
	}
	writeJSON(w, http.StatusOK, revisionList{Data: revs})
	return nil
}

func (s *Server) rollbackJob(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var req rollbackRequest
	if pr := decodeOptional(r, &req); pr != nil {
		return pr
	}
	want, err := requestVersion(r, req.Version)
	if err != nil {
		return err
	}
	out, pending, err := s.jobs.Rollback(r.Context(), jobCaller(p), r.PathValue("id"), want, req.AllowDataLoss)
	if err != nil {
		return jobErr(err)
	}
	writeUpdated(w, http.StatusAccepted, out, pending)
	return nil
}
