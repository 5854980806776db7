package api

import (
	"context"
	"net/http"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/plan"
)

// Planner answers what a job will do before it runs (internal/plan).
type Planner interface {
	Plan(ctx context.Context, j *job.Job, region string, steps []string) (*plan.Plan, error)
}

// planJob answers POST /api/provisioning-jobs/plan: the request of a create, laid out and
// validated as a create is, then planned; nothing is stored. A read-only account may be
// planned for: the plan is how its owner learns what to grant.
func (s *Server) planJob(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var req createJobRequest
	if pr := decode(r, &req); pr != nil {
		return pr
	}
	j, err := s.newJob(r.Context(), p, &req, true)
	if err != nil {
		return err
	}
	out, err := s.planOf(r.Context(), j)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// jobPlan answers GET /api/provisioning-jobs/{id}/plan: the plan of a stored job (a draft
// under review, or a job already run), from its config and steps as stored.
func (s *Server) jobPlan(w http.ResponseWriter, r *http.Request, p *Principal) error {
	j, err := s.loadJob(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	out, err := s.planOf(r.Context(), j)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// planOf plans j (laid out, its steps recorded) in its space's region.
func (s *Server) planOf(ctx context.Context, j *job.Job) (*plan.Plan, error) {
	pl, err := s.jobs.Plan(ctx, j)
	if err != nil {
		return nil, refusalProblem(err)
	}
	return pl, nil
}
