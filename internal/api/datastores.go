package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/groundworkhq/groundwork/internal/audit"
	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/store"
)

// DatastoreRecords is what the datastore routes need of the store (the server's, or one
// transaction of it): the databases and connections of datastore jobs, and the job a secret
// reference belongs to (for reveal).
type DatastoreRecords interface {
	datastore.Records
	SecretJob(ctx context.Context, ref string) (jobID string, err error)
}

// DatastoreConfig turns on the databases, connections and secret reveal routes, over the
// store's datastore records. Config.Secrets must be set.
type DatastoreConfig struct {
	// Wrap, if set, wraps the records each request writes through. Tests use it to stop a
	// request at a chosen write, as a crash would.
	Wrap func(datastore.Records) datastore.Records
	// Rotate plans credential rotations (POST .../rotate-credentials); nil refuses them.
	Rotate CredentialRotator
}

func (s *Server) datastoreRoutes() []route {
	if s.cfg.Datastores == nil {
		return nil
	}
	const job, db = "/api/provisioning-jobs/{id}", "/api/provisioning-jobs/{id}/databases/{dbID}"
	return []route{
		{"GET", job + "/databases", "provisioning:view", s.listDatabases},
		{"POST", job + "/databases", "provisioning:update", s.createDatabase},
		{"GET", db, "provisioning:view", s.getDatabase},
		{"DELETE", db, "provisioning:update", s.deleteDatabase},
		{"GET", job + "/connections", "provisioning:view", s.listConnections},
		{"POST", job + "/connections", "provisioning:update", s.createConnection},
		{"GET", job + "/connections/{connID}", "provisioning:view", s.getConnection},
		{"DELETE", job + "/connections/{connID}", "provisioning:update", s.deleteConnection},
		{"GET", db + "/connections", "provisioning:view", s.listConnections},
		{"POST", db + "/connections", "provisioning:update", s.createConnection},
		{"GET", db + "/connections/{connID}", "provisioning:view", s.getConnection},
		{"DELETE", db + "/connections/{connID}", "provisioning:update", s.deleteConnection},
		{"POST", job + "/rotate-credentials", "provisioning:update", s.rotateCredentials},
		{"POST", "/api/secrets/reveal", "secret:reveal", s.revealSecret},
	}
}

// orgJobs reads jobs of one org, so a job ID from another org is not found.
type orgJobs struct {
	st  store.Store
	org string
}

func (o orgJobs) GetJob(ctx context.Context, id string) (*job.Job, error) {
	j, err := o.st.GetJob(ctx, &store.GetJobParams{OrgID: o.org, ID: id})
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("job %s: %w", id, datastore.ErrNotFound)
	}
	return j, err
}

// auditedRecords writes the request's first change together with its audit entry, in one
// transaction: a database "creating" (or "deleting") row, a connection row. What the service
// writes afterwards (the status once the SQL ran, cleanup of a dropped database) follows from
// that one change and is not a second entry. A request that changes nothing leaves no entry.
type auditedRecords struct {
	DatastoreRecords
	srv     *Server
	p       *Principal
	action  string
	resType string
	// resID is the audited resource; "" takes the ID of the row first written (a create).
	resID   string
	meta    map[string]any
	changed bool
}

// audit runs write, with the entry, in a transaction unless an earlier write already carried it.
func (a *auditedRecords) audit(ctx context.Context, id string, write func(r datastore.Records) (bool, error)) error {
	if a.changed {
		_, err := write(a.DatastoreRecords)
		return err
	}
	if a.resID == "" {
		a.resID = id
	}
	err := a.srv.audited(ctx, a.p, entry(audit.ScopeProvisioning, a.action, a.resType, a.resID, a.meta),
		func(tx store.Tx) error {
			changed, err := write(tx)
			if err != nil {
				return err
			}
			if !changed {
				return errNoChange
			}
			return nil
		})
	if errors.Is(err, errNoChange) {
		return nil
	}
	if err == nil {
		a.changed = true
	}
	return err
}

func (a *auditedRecords) InsertDatabase(ctx context.Context, d datastore.Database) (got datastore.Database, inserted bool, err error) {
	err = a.audit(ctx, d.ID, func(r datastore.Records) (bool, error) {
		got, inserted, err = r.InsertDatabase(ctx, d)
		return inserted, err
	})
	return got, inserted, err
}

func (a *auditedRecords) UpdateDatabaseStatus(ctx context.Context, jobID, id, status string, now time.Time) error {
	return a.audit(ctx, id, func(r datastore.Records) (bool, error) {
		return true, r.UpdateDatabaseStatus(ctx, jobID, id, status, now)
	})
}

func (a *auditedRecords) DeleteDatabase(ctx context.Context, jobID, id string) error {
	return a.audit(ctx, id, func(r datastore.Records) (bool, error) {
		return true, r.DeleteDatabase(ctx, jobID, id)
	})
}

func (a *auditedRecords) InsertConnection(ctx context.Context, c datastore.Connection) error {
	return a.audit(ctx, c.ID, func(r datastore.Records) (bool, error) {
		return true, r.InsertConnection(ctx, c)
	})
}

func (a *auditedRecords) DeleteConnection(ctx context.Context, jobID, id string) error {
	return a.audit(ctx, id, func(r datastore.Records) (bool, error) {
		return true, r.DeleteConnection(ctx, jobID, id)
	})
}

// service returns the datastore service for one request, writing through recs (nil for a
// request that only reads).
func (s *Server) service(p *Principal, recs *auditedRecords) (*datastore.Service, error) {
	var r datastore.Records
	if recs != nil {
		r = recs
	} else {
		r = s.cfg.Store
	}
	if w := s.cfg.Datastores.Wrap; w != nil {
		r = w(r)
	}
	return datastore.NewService(orgJobs{st: s.cfg.Store, org: p.OrgID}, r, s.cfg.Secrets, s.cfg.Now, s.log).WithOutbound(s.cfg.Outbound), nil
}

// change returns records that audit the request's first change as action on resType/resID.
func (s *Server) change(p *Principal, action, resType, resID string, meta map[string]any) (*auditedRecords, error) {
	if s.cfg.Secrets == nil {
		return nil, errors.New("datastore routes need a secret store")
	}
	return &auditedRecords{DatastoreRecords: s.cfg.Store, srv: s, p: p, action: action, resType: resType, resID: resID, meta: meta}, nil
}

// datastoreErr maps the datastore service's errors to problems. Errors from the server being
// worked on keep their class: transient is 503 (try again), user_action 502 with the hint.
func datastoreErr(err error, what string) error {
	var fe *datastore.FieldError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &fe):
		return badRequest("the request is invalid", *fe)
	case errors.Is(err, datastore.ErrNotFound), errors.Is(err, store.ErrNotFound):
		return notFound(what)
	case errors.Is(err, datastore.ErrNotReady):
		return problem(http.StatusConflict, err.Error())
	}
	var f *fault.Error
	if errors.As(err, &f) {
		switch f.Class {
		case job.ClassTransient:
			return problem(http.StatusServiceUnavailable, "the datastore server did not answer; try again: "+f.Error())
		case job.ClassUserAction:
			pr := problem(http.StatusBadGateway, "the datastore server refused the request: "+f.Error())
			pr.FixHint = f.FixHint
			return pr
		}
	}
	return err
}

type databaseList struct {
	Data []datastore.Database `json:"data"`
}

type connectionList struct {
	Data []datastore.Connection `json:"data"`
}

// datastoreJob checks that the path's job is in the caller's org (404 otherwise, before
// anything else is looked at).
func (s *Server) datastoreJob(r *http.Request, p *Principal) (*job.Job, error) {
	return s.loadJob(r.Context(), p, r.PathValue("id"))
}

// reader returns the job a datastore request names (404 for another org's) and a service
// over its records.
func (s *Server) reader(r *http.Request, p *Principal) (*job.Job, *datastore.Service, error) {
	j, err := s.datastoreJob(r, p)
	if err != nil {
		return nil, nil, err
	}
	svc, err := s.service(p, nil)
	return j, svc, err
}

// writer is reader for a change: the service's first write is audited as action on
// resType/resID, with meta and the job's ID.
func (s *Server) writer(r *http.Request, p *Principal, action, resType, resID string, meta map[string]any) (*job.Job, *datastore.Service, error) {
	j, err := s.datastoreJob(r, p)
	if err != nil {
		return nil, nil, err
	}
	meta["jobID"] = j.ID
	recs, err := s.change(p, action, resType, resID, meta)
	if err != nil {
		return nil, nil, err
	}
	svc, err := s.service(p, recs)
	return j, svc, err
}

func (s *Server) listDatabases(w http.ResponseWriter, r *http.Request, p *Principal) error {
	j, svc, err := s.reader(r, p)
	if err != nil {
		return err
	}
	list, err := svc.ListDatabases(r.Context(), j.ID)
	if err != nil {
		return datastoreErr(err, "database")
	}
	writeJSON(w, http.StatusOK, databaseList{Data: list})
	return nil
}

func (s *Server) createDatabase(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var req datastore.CreateDatabaseParams
	if pr := decode(r, &req); pr != nil {
		return pr
	}
	j, err := s.datastoreJob(r, p)
	if err != nil {
		return err
	}
	req.JobID = j.ID
	recs, err := s.change(p, "database.create", "database", "", map[string]any{"jobID": j.ID, "name": req.Name, "owner": req.Owner})
	if err != nil {
		return err
	}
	svc, err := s.service(p, recs)
	if err != nil {
		return err
	}
	d, err := svc.CreateDatabase(r.Context(), req)
	if err != nil {
		return datastoreErr(err, "job")
	}
	status := http.StatusOK // the same request again: the database exists
	if recs.changed {
		status = http.StatusCreated
		w.Header().Set("Location", "/api/provisioning-jobs/"+j.ID+"/databases/"+d.ID)
	}
	writeJSON(w, status, d)
	return nil
}

func (s *Server) getDatabase(w http.ResponseWriter, r *http.Request, p *Principal) error {
	j, svc, err := s.reader(r, p)
	if err != nil {
		return err
	}
	d, err := svc.GetDatabase(r.Context(), j.ID, r.PathValue("dbID"))
	if err != nil {
		return datastoreErr(err, "database")
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

func (s *Server) deleteDatabase(w http.ResponseWriter, r *http.Request, p *Principal) error {
	id := r.PathValue("dbID")
	j, svc, err := s.writer(r, p, "database.delete", "database", id, map[string]any{})
	if err != nil {
		return err
	}
	if err := svc.DeleteDatabase(r.Context(), j.ID, id); err != nil {
		return datastoreErr(err, "database")
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type createConnectionRequest struct {
	Name string `json:"name"`
}

func (s *Server) listConnections(w http.ResponseWriter, r *http.Request, p *Principal) error {
	j, svc, err := s.reader(r, p)
	if err != nil {
		return err
	}
	dbID := r.PathValue("dbID")
	if dbID != "" {
		if _, err := svc.GetDatabase(r.Context(), j.ID, dbID); err != nil {
			return datastoreErr(err, "database")
		}
	}
	list, err := svc.ListConnections(r.Context(), j.ID, dbID)
	if err != nil {
		return datastoreErr(err, "connection")
	}
	writeJSON(w, http.StatusOK, connectionList{Data: list})
	return nil
}

func (s *Server) createConnection(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var req createConnectionRequest
	// The body is optional: a connection needs no input.
	if pr := decodeOptional(r, &req); pr != nil {
		return pr
	}
	dbID := r.PathValue("dbID")
	j, svc, err := s.writer(r, p, "connection.create", "connection", "", map[string]any{"databaseID": dbID, "name": req.Name})
	if err != nil {
		return err
	}
	c, err := svc.CreateConnection(r.Context(), datastore.CreateConnectionParams{JobID: j.ID, DatabaseID: dbID, Name: req.Name})
	if err != nil {
		return datastoreErr(err, "database")
	}
	loc := "/api/provisioning-jobs/" + j.ID
	if dbID != "" {
		loc += "/databases/" + dbID
	}
	w.Header().Set("Location", loc+"/connections/"+c.ID)
	writeJSON(w, http.StatusCreated, c)
	return nil
}

func (s *Server) getConnection(w http.ResponseWriter, r *http.Request, p *Principal) error {
	j, svc, err := s.reader(r, p)
	if err != nil {
		return err
	}
	c, err := svc.GetConnection(r.Context(), j.ID, r.PathValue("dbID"), r.PathValue("connID"))
	if err != nil {
		return datastoreErr(err, "connection")
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) deleteConnection(w http.ResponseWriter, r *http.Request, p *Principal) error {
	id := r.PathValue("connID")
	j, svc, err := s.writer(r, p, "connection.delete", "connection", id, map[string]any{"databaseID": r.PathValue("dbID")})
	if err != nil {
		return err
	}
	if err := svc.DeleteConnection(r.Context(), j.ID, r.PathValue("dbID"), id); err != nil {
		return datastoreErr(err, "connection")
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
