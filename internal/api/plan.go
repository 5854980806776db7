package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/plan"
	"github.com/groundworkhq/groundwork/internal/store"
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
	j, err := s.newJob(r.Context(), p, &req, false)
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
	sp, err := s.cfg.Store.GetSpace(ctx, j.OrgID, j.SpaceID)
	if err != nil {
		return nil, storeErr(err, "space")
	}
	names := make([]string, len(j.Steps))
	for i, st := range j.Steps {
		names[i] = st.Name
	}
	planner := s.cfg.Planner
	if planner == nil {
		planner = &plan.Planner{}
	}
	return planner.Plan(ctx, j, sp.Region, names)
}

// checkAccount refuses j, before it is stored or started, when its space's cloud account is
// read-only and the job's plan calls operations a read-only grant does not cover; the fix
// hint lists them with the least-privilege policy that grants them. A family whose
// operations the plan cannot list is refused on a read-only account as before, with the
// provider's broad policy.
func (s *Server) checkAccount(ctx context.Context, j *job.Job) error {
	sp, err := s.cfg.Store.GetSpace(ctx, j.OrgID, j.SpaceID)
	if err != nil {
		return storeErr(err, "space")
	}
	if sp.CloudAccountID == "" {
		return nil
	}
	acc, err := s.cfg.Store.GetCloudAccount(ctx, j.OrgID, sp.CloudAccountID)
	if errors.Is(err, store.ErrNotFound) {
		return nil // the job fails at its first step with the account's absence named
	}
	if err != nil {
		return err
	}
	if acc.PermissionLevel != "read_only" {
		return nil
	}
	pl, err := s.planOf(ctx, j)
	if err != nil {
		return err
	}
	if !pl.OperationsKnown {
		if j.Mode == job.ModeCreate {
			return readOnlyRefusal(acc)
		}
		return nil
	}
	missing := pl.NotGranted()
	if len(missing) == 0 {
		return nil
	}
	pr := problem(http.StatusForbidden, fmt.Sprintf("cloud account %s is read_only; this job calls %d operations it does not grant", acc.ID, len(missing)),
		FieldError{Field: "spaceID", Rule: "permissionLevel", Message: "the space's cloud account " + acc.ID + " is read_only and does not grant " + strings.Join(missing, ", ")})
	pr.FixHint = fmt.Sprintf("Grant the account's principal these actions, then set its permissionLevel to read_write: %s. The least-privilege %s that covers this job: %s",
		strings.Join(missing, ", "), pl.Policy.Format, pl.Policy.Document)
	return pr
}
