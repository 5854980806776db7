package api

import (
	"net/http"
	"strconv"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/jobs"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/store"
)

// Approvals of config updates that drop data: such an update (or rollback) is recorded as a
// revision awaiting approval, and another principal holding provisioning:approve approves or
// rejects it (docs/updates.md).

// pendingJob answers an update or rollback that awaits approval: the job as it is (not
// queued), and the number of the revision awaiting approval.
type pendingJob struct {
	*job.Job
	PendingRevision int `json:"pendingRevision" description:"the revision recorded awaiting approval (POST …/revisions/{number}/approve); the job is left as it is until then"`
}

// updatePlanAnswer is the dry run's answer: the plan, and whether applying it needs an
// approval (it drops data).
type updatePlanAnswer struct {
	*pipeline.UpdatePlan
	NeedsApproval bool `json:"needsApproval" description:"the update drops data: applied with allowDataLoss, it awaits another principal's approval"`
}

// writeUpdated answers an accepted update or rollback: 202 with the pending revision's number
// when it awaits approval, else status with the job.
func writeUpdated(w http.ResponseWriter, status int, j *job.Job, pending *store.JobRevision) {
	if pending != nil {
		writeJSON(w, http.StatusAccepted, pendingJob{Job: j, PendingRevision: pending.Number})
		return
	}
	writeJSON(w, status, j)
}

func (s *Server) approvalRoutes() []route {
	one := "/api/provisioning-jobs/{id}/revisions/{number}"
	return []route{
		{"POST", one + "/approve", "provisioning:approve", s.decideRevision(true)},
		{"POST", one + "/reject", "provisioning:approve", s.decideRevision(false)},
	}
}

func approvalDocs() map[string]opDoc {
	c := http.StatusConflict
	return map[string]opDoc{
		"POST /api/provisioning-jobs/{id}/revisions/{number}/approve": {summary: "Approve a config update awaiting approval (it drops data): the job is queued to carry it out; its requester cannot approve it",
			body: decisionRequest{}, bodyOptional: true, ok: map[int]any{202: job.Job{}}, problems: []int{c}},
		"POST /api/provisioning-jobs/{id}/revisions/{number}/reject": {summary: "Reject a config update awaiting approval: the revision is rejected and nothing runs",
			body: decisionRequest{}, bodyOptional: true, ok: map[int]any{200: store.JobRevision{}}, problems: []int{c}},
	}
}

// decideRevision approves or rejects the revision named by the path.
func (s *Server) decideRevision(approve bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, p *Principal) error {
		var req decisionRequest
		if pr := decodeOptional(r, &req); pr != nil {
			return pr
		}
		if len(req.Reason) > 1000 {
			return badRequest("the reason is too long", FieldError{Field: "reason", Rule: "maxLength", Message: "must be at most 1000 characters"})
		}
		n, err := strconv.Atoi(r.PathValue("number"))
		if err != nil || n < 1 {
			return badRequest("bad revision number", FieldError{Field: "number", Rule: "type", Message: "must be a revision number (1, 2, …)"})
		}
		d := jobs.Decision{Revision: n, Reason: req.Reason}
		if !approve {
			rev, err := s.jobs.Reject(r.Context(), jobCaller(p), r.PathValue("id"), d)
			if err != nil {
				return jobErr(err)
			}
			writeJSON(w, http.StatusOK, rev)
			return nil
		}
		out, err := s.jobs.Approve(r.Context(), jobCaller(p), r.PathValue("id"), d)
		if err != nil {
			return jobErr(err)
		}
		writeJSON(w, http.StatusAccepted, out)
		return nil
	}
}
