package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/jobs"
	"github.com/groundworkhq/groundwork/internal/store"
)

// DriftConfig serves drift inspection and reconcile of provisioning jobs.
type DriftConfig struct {
	// Inspectors finds the inspector of a job's family on its provider (nil: every family
	// answers that inspection is not supported).
	Inspectors jobs.InspectorFor
	// Timeout bounds one inspection (jobs.DefaultInspectTimeout when zero).
	Timeout time.Duration
}

// driftRoutes are the drift routes of provisioning jobs; absent without a DriftConfig.
func (s *Server) driftRoutes() []route {
	if s.cfg.Drift == nil {
		return nil
	}
	const one = "/api/provisioning-jobs/{id}"
	return []route{
		// Inspection reads the cloud with the space's account and writes the job's drift
		// record: it is an update of the job, not a view.
		{"POST", one + "/inspect", "provisioning:update", s.inspectJob},
		{"GET", one + "/drift", "provisioning:view", s.jobDrift},
		{"POST", one + "/reconcile", "provisioning:update", s.reconcileJob},
	}
}

// inspections is the drift service over the server's jobs service.
func (s *Server) inspections() *jobs.Inspections {
	return &jobs.Inspections{Jobs: s.jobs, Ledger: s.cfg.Store, Inspectors: s.cfg.Drift.Inspectors, Timeout: s.cfg.Drift.Timeout}
}

// JobDrift is a job's latest inspection as the API answers it.
type JobDrift struct {
	JobID       string      `json:"jobID"`
	InspectedAt time.Time   `json:"inspectedAt"`
	DriftCount  int         `json:"driftCount"`
	Drift       []job.Drift `json:"drift" description:"each field of each resource whose value in the cloud differs from what the job applied; empty when none"`
}

func jobDrift(in *job.Inspection) JobDrift {
	d := in.Drift
	if d == nil {
		d = []job.Drift{}
	}
	return JobDrift{JobID: in.JobID, InspectedAt: in.InspectedAt, DriftCount: len(d), Drift: d}
}

func (s *Server) inspectJob(w http.ResponseWriter, r *http.Request, p *Principal) error {
	in, err := s.inspections().Inspect(r.Context(), jobCaller(p), r.PathValue("id"))
	if err != nil {
		return inspectErr(err)
	}
	writeJSON(w, http.StatusOK, jobDrift(in))
	return nil
}

func (s *Server) jobDrift(w http.ResponseWriter, r *http.Request, p *Principal) error {
	in, err := s.inspections().Latest(r.Context(), p.OrgID, r.PathValue("id"))
	if errors.Is(err, store.ErrNotFound) {
		// Either the job is not the caller's or it was never inspected; the job's own read
		// tells them apart without leaking another org's ids.
		if _, gerr := s.jobs.Get(r.Context(), p.OrgID, r.PathValue("id")); gerr != nil {
			return jobErr(gerr)
		}
		return notFound("inspection of this job (POST /api/provisioning-jobs/" + r.PathValue("id") + "/inspect makes one)")
	}
	if err != nil {
		return jobErr(err)
	}
	writeJSON(w, http.StatusOK, jobDrift(in))
	return nil
}

func (s *Server) reconcileJob(w http.ResponseWriter, r *http.Request, p *Principal) error {
	out, err := s.inspections().Reconcile(r.Context(), jobCaller(p), r.PathValue("id"))
	if err != nil {
		return jobErr(err)
	}
	writeJSON(w, http.StatusAccepted, out)
	return nil
}

// inspectErr renders an inspection's failure: the service's refusals and the store's
// sentinels as theirs, a cloud that refused the reads as 422 with its fix, one that did not
// answer as 503; anything unclassified is ours.
func inspectErr(err error) error {
	var rf *jobs.Refusal
	if errors.As(err, &rf) || errors.Is(err, store.ErrNotFound) {
		return jobErr(err)
	}
	return cloudRefusal(err, "inspection's reads")
}

func driftDocs() map[string]opDoc {
	const one = "/api/provisioning-jobs/{id}"
	c := http.StatusConflict
	return map[string]opDoc{
		"POST " + one + "/inspect": {summary: "Read a completed job's resources back from the cloud and record what drifted (audited)",
			ok: map[int]any{200: JobDrift{}}, problems: []int{c, http.StatusUnprocessableEntity, http.StatusServiceUnavailable}},
		"GET " + one + "/drift": {summary: "The job's latest inspection", ok: map[int]any{200: JobDrift{}}},
		"POST " + one + "/reconcile": {summary: "Run again the steps that own the drifted resources, with the job's config as it is (audited)",
			ok: map[int]any{202: job.Job{}}, problems: []int{c}},
	}
}

// inspectIntervalFields refuses a space config whose inspectIntervalMinutes is out of range.
func inspectIntervalFields(config []byte) []FieldError {
	var rf *jobs.Refusal
	if err := jobs.CheckInspectInterval(config); errors.As(err, &rf) {
		return rf.Fields
	}
	return nil
}
