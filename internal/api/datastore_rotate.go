package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/oklog/ulid/v2"

	"github.com/groundworkhq/groundwork/internal/audit"
	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/job"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// CredentialRotator plans credential rotations of datastore jobs (the datastore pipeline): a
// plan is the job's new config and step records, which the engine runs under the job's lease.
type CredentialRotator interface {
	PlanRotation(j *job.Job, rot dspipe.Rotation) (json.RawMessage, []job.StepRecord, error)
}

type rotateCredentialsRequest struct {
	Target        string `json:"target,omitempty" description:"admin: rotate the server's admin credential (job-scoped connections hold it)"`
	Connection    string `json:"connection,omitempty" description:"the id or name of a connection: rotate the credential it holds (the admin's for a job-scoped connection, the database owner's otherwise)"`
	AdminPassword string `json:"adminPassword,omitempty" description:"adopted datastores only, and required there: the admin password the server takes now; it goes to the secret store, never to the job"`
}

// rotateCredentials queues a rotation of one credential of a completed datastore job and
// answers 202 with the job; the rotation itself runs as the job's steps.
func (s *Server) rotateCredentials(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var req rotateCredentialsRequest
	if pr := decode(r, &req); pr != nil {
		return pr
	}
	ctx := r.Context()
	j, err := s.datastoreJob(r, p)
	if err != nil {
		return err
	}
	if j.Family != job.FamilyDatastore {
		return notFound("job")
	}
	rot := dspipe.Rotation{ID: "rot_" + ulid.Make().String()}
	switch {
	case req.Target != "" && req.Connection != "":
		return badRequest("name one credential", FieldError{Field: "connection", Rule: "exclusive", Message: "give target or connection, not both"})
	case req.Target == "" && req.Connection == "":
		return badRequest("name a credential", FieldError{Field: "target", Rule: datastore.RuleRequired, Message: "give target admin, or a connection"})
	case req.Target != "" && req.Target != dspipe.RotateAdmin:
		return badRequest("unknown target", FieldError{Field: "target", Rule: datastore.RuleEnum, Message: "must be admin"})
	case req.Target != "":
		rot.Target = dspipe.RotateAdmin
	default:
		c, err := s.namedConnection(ctx, j.ID, req.Connection)
		if err != nil {
			return err
		}
		rot.ConnectionID, rot.Target, rot.DatabaseID = c.ID, dspipe.RotateAdmin, c.DatabaseID
		if c.DatabaseID != "" {
			rot.Target = dspipe.RotateDatabase
		}
	}
	if s.cfg.Datastores.Rotate == nil || s.cfg.Secrets == nil {
		return badRequest("credential rotation is not available", FieldError{Field: "target", Rule: "supported", Message: "not supported by this server"})
	}
	// Planned once with a placeholder, so that a refused request stores no password.
	probe := rot
	if req.AdminPassword != "" {
		probe.SecretRef = "pending:validation"
	}
	if _, _, err := s.cfg.Datastores.Rotate.PlanRotation(j, probe); err != nil {
		return rotationErr(err)
	}
	sec := s.cfg.Secrets.For(datastore.JobSecrets(j))
	if req.AdminPassword != "" {
		if rot.SecretRef, err = sec.Put(ctx, dspipe.RotationSecretName(j.ID, rot.ID), req.AdminPassword); err != nil {
			return fmt.Errorf("store the new admin password: %w", err)
		}
	}
	config, steps, err := s.cfg.Datastores.Rotate.PlanRotation(j, rot)
	if err != nil {
		return rotationErr(errors.Join(err, s.dropSecret(ctx, sec, rot.SecretRef)))
	}
	now := s.cfg.Now()
	queued := job.StatusQueued
	meta := map[string]any{"rotationID": rot.ID, "target": rot.Target, "databaseID": rot.DatabaseID,
		"connectionID": rot.ConnectionID, "userGiven": rot.SecretRef != ""}
	var out *job.Job
	err = s.audited(ctx, p, entry(audit.ScopeProvisioning, "datastore.rotate_credentials", "provisioning-job", j.ID, meta),
		func(tx store.Tx) (err error) {
			out, err = tx.UpdateJob(ctx, &store.UpdateJobParams{OrgID: p.OrgID, ID: j.ID, Version: j.Version, Now: now,
				Config: config, Steps: steps, Status: &queued, NextRunAt: &now, ClearFailure: true})
			return err
		})
	if err != nil {
		err = errors.Join(err, s.dropSecret(ctx, sec, rot.SecretRef))
		if errors.Is(err, store.ErrVersionConflict) {
			return problem(http.StatusConflict, "the job changed while the rotation was planned; send the request again")
		}
		return storeErr(err, "job")
	}
	w.Header().Set("Location", "/api/provisioning-jobs/"+j.ID)
	writeJSON(w, http.StatusAccepted, out)
	return nil
}

// dropSecret deletes a password the request stored when the rotation was not queued after all.
func (s *Server) dropSecret(ctx context.Context, sec interface {
	Delete(ctx context.Context, ref string) error
}, ref string) error {
	if ref == "" {
		return nil
	}
	return sec.Delete(context.WithoutCancel(ctx), ref)
}

// namedConnection finds the job's connection with the given id, or else the one with that
// name; a name that several connections carry must be given as an id.
func (s *Server) namedConnection(ctx context.Context, jobID, key string) (datastore.Connection, error) {
	c, err := s.cfg.Store.GetConnection(ctx, jobID, key)
	if err == nil {
		return c, nil
	}
	if !errors.Is(err, datastore.ErrNotFound) {
		return c, err
	}
	all, err := s.cfg.Store.ListConnections(ctx, jobID, "")
	if err != nil {
		return c, err
	}
	dbs, err := s.cfg.Store.ListDatabases(ctx, jobID)
	if err != nil {
		return c, err
	}
	for _, d := range dbs {
		cs, err := s.cfg.Store.ListConnections(ctx, jobID, d.ID)
		if err != nil {
			return c, err
		}
		all = append(all, cs...)
	}
	var found []datastore.Connection
	for _, c := range all {
		if c.Name != "" && c.Name == key {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 0:
		return c, badRequest("no such connection", FieldError{Field: "connection", Rule: "exists", Message: "no connection of this job has that id or name"})
	case 1:
		return found[0], nil
	}
	return c, badRequest("ambiguous connection", FieldError{Field: "connection", Rule: "unique",
		Message: fmt.Sprintf("%d connections are named %q; give the id", len(found), key)})
}

// rotationErr maps a planning refusal: a field error is 400, a job not where a rotation can
// start is 409.
func rotationErr(err error) error {
	var busy *dspipe.Busy
	if errors.As(err, &busy) {
		return problem(http.StatusConflict, busy.Detail)
	}
	if f, ok := validation.Fields(err); ok {
		return badRequest("the request is invalid", f...)
	}
	return err
}
