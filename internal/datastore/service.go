package datastore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/netguard"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
)

// Endpoint is a set of connection details without the secret: {host, port, user, database,
// secretRef}. The datastore pipeline records the server's admin endpoint in infra under
// InfraConnectionKey; connections hand endpoints to applications.
type Endpoint = store.DatastoreEndpoint

// InfraConnectionKey is the infra key holding a datastore job's admin Endpoint.
const InfraConnectionKey = "connection"

// Database statuses. A record is written "creating" before any SQL runs and "deleting" before
// the drop, so that a crash leaves a record that says what to finish (see Reconcile).
const (
	StatusCreating = store.DatabaseStatusCreating
	StatusReady    = store.DatabaseStatusReady
	StatusDeleting = store.DatabaseStatusDeleting
)

// Database is a database (and its owner) on a datastore job's server.
type Database = store.DatastoreDatabase

// Connection is a stored set of credentials an application fetches: job-scoped (the server's
// admin endpoint) or database-scoped (DatabaseID set; the owner's endpoint).
type Connection = store.DatastoreConnection

// ErrNotFound is returned for a missing database or connection (the API's 404).
var ErrNotFound = store.ErrDatastoreNotFound

// ErrNotReady is returned when the job's datastore cannot take databases yet (the API's 409).
var ErrNotReady = errors.New("datastore is not ready")

// Records persists databases and connections. Declared here, where it is consumed; the job
// store implements it. Insert of a database whose (JobID, Name) exists returns the existing
// record and inserted=false: that unique key is what makes a re-sent create harmless.
type Records interface {
	InsertDatabase(ctx context.Context, d Database) (got Database, inserted bool, err error)
	GetDatabase(ctx context.Context, jobID, id string) (Database, error)
	ListDatabases(ctx context.Context, jobID string) ([]Database, error)
	UpdateDatabaseStatus(ctx context.Context, jobID, id, status string, now time.Time) error
	DeleteDatabase(ctx context.Context, jobID, id string) error

	InsertConnection(ctx context.Context, c Connection) error
	GetConnection(ctx context.Context, jobID, id string) (Connection, error)
	// ListConnections lists a job's connections with the given DatabaseID ("" for job-scoped).
	ListConnections(ctx context.Context, jobID, databaseID string) ([]Connection, error)
	DeleteConnection(ctx context.Context, jobID, id string) error
}

// Jobs reads datastore jobs.
type Jobs interface {
	GetJob(ctx context.Context, jobID string) (*job.Job, error)
}

// Vault hands out the secret store as one owner sees it (secrets.Vault satisfies it).
type Vault interface {
	For(owner secrets.Owner) secrets.SecretStore
}

// JobSecrets is the owner of a job's secrets: its admin password and its databases' owner
// passwords live and die with the job.
func JobSecrets(j *job.Job) secrets.Owner {
	return secrets.Owner{OrgID: j.OrgID, Kind: secrets.OwnerJob, ID: j.ID}
}

// Service runs database and connection requests against a job's server.
type Service struct {
	jobs     Jobs
	records  Records
	secrets  Vault
	outbound *netguard.Policy
	now      func() time.Time
	log      *slog.Logger
}

// NewService returns a Service. now may be nil (time.Now).
func NewService(jobs Jobs, records Records, store Vault, now func() time.Time, log *slog.Logger) *Service {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{jobs: jobs, records: records, secrets: store, now: now, log: log}
}

// WithOutbound makes the service dial adopted servers through policy.
func (s *Service) WithOutbound(policy *netguard.Policy) *Service {
	s.outbound = policy
	return s
}

// CreateDatabaseParams is a request for a database.
type CreateDatabaseParams struct {
	JobID string `json:"-"`
	Name  string `json:"name"`
	Owner string `json:"owner"`
}

// adminEndpoint returns the job's admin endpoint, requiring a completed datastore job, and
// the secret store as that job sees it.
func (s *Service) adminEndpoint(ctx context.Context, jobID string) (Endpoint, jobAccess, error) {
	ep, j, err := s.endpointOf(ctx, jobID)
	if err != nil {
		return Endpoint{}, jobAccess{}, err
	}
	acc := jobAccess{SecretStore: s.secrets.For(JobSecrets(j))}
	if j.Mode == job.ModeAdopt {
		// An adopted server's host is the user's: dial it through the outbound policy.
		acc.dial = s.outbound.DialContext
	}
	return ep, acc, nil
}

// jobAccess is how a request reaches a job's server: the secret store as the job sees it, and
// the dialler for the server's address (nil: the default, for servers Groundwork made).
type jobAccess struct {
	secrets.SecretStore
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

func (s *Service) endpointOf(ctx context.Context, jobID string) (Endpoint, *job.Job, error) {
	j, err := s.jobs.GetJob(ctx, jobID)
	if err != nil {
		return Endpoint{}, nil, err
	}
	if j.Family != job.FamilyDatastore {
		return Endpoint{}, nil, fmt.Errorf("job %s is a %s job: %w", jobID, j.Family, ErrNotFound)
	}
	if j.Status != job.StatusCompleted {
		return Endpoint{}, nil, fmt.Errorf("job %s is %s: %w", jobID, j.Status, ErrNotReady)
	}
	var m map[string]json.RawMessage
	var ep Endpoint
	if err := json.Unmarshal(j.Infra, &m); err != nil || m[InfraConnectionKey] == nil {
		return Endpoint{}, nil, fmt.Errorf("job %s records no connection: %w", jobID, ErrNotReady)
	}
	if err := json.Unmarshal(m[InfraConnectionKey], &ep); err != nil {
		return Endpoint{}, nil, fmt.Errorf("job %s connection: %w", jobID, err)
	}
	return ep, j, nil
}

func adminConn(ctx context.Context, sec jobAccess, ep Endpoint) (Conn, error) {
	pw, err := sec.Get(ctx, ep.SecretRef)
	if err != nil {
		return Conn{}, fmt.Errorf("admin password: %w", err)
	}
	return Conn{Engine: ep.Engine, Host: ep.Host, Port: ep.Port, User: ep.User, Password: pw, Dial: sec.dial}, nil
}

func ownerSecretName(jobID, name string) string { return jobID + "/databases/" + name }

// CreateDatabase creates (or finishes creating) a database and its owner with a generated
// password kept in the secret store. Re-sending the same request returns the same record.
func (s *Service) CreateDatabase(ctx context.Context, p CreateDatabaseParams) (Database, error) {
	ep, sec, err := s.adminEndpoint(ctx, p.JobID)
	if err != nil {
		return Database{}, err
	}
	if err := ValidateDatabase(ep.Engine, p.Name, p.Owner); err != nil {
		return Database{}, err
	}
	existing, err := s.records.ListDatabases(ctx, p.JobID)
	if err != nil {
		return Database{}, err
	}
	for _, d := range existing {
		if d.Name == p.Name && d.Owner != p.Owner {
			return Database{}, &FieldError{Field: "name", Rule: RuleConflict, Message: fmt.Sprintf("database %q exists with owner %q", d.Name, d.Owner)}
		}
		// One owner per database: sharing would let a second create reset the first's password.
		if d.Name != p.Name && d.Owner == p.Owner {
			return Database{}, &FieldError{Field: "owner", Rule: RuleConflict, Message: fmt.Sprintf("%q already owns database %q", p.Owner, d.Name)}
		}
		if d.Name == p.Name && d.Status == StatusReady {
			return d, nil
		}
		if d.Name == p.Name && d.Status == StatusDeleting {
			return Database{}, fmt.Errorf("database %q is being deleted: %w", d.Name, ErrNotReady)
		}
	}
	if err := s.checkOwner(ctx, sec, ep, p.Owner, existing); err != nil {
		return Database{}, err
	}
	// The password is stored under a deterministic name before anything else: a re-run after
	// a crash finds the same reference.
	ref, err := sec.Put(ctx, ownerSecretName(p.JobID, p.Name), GeneratePassword())
	if err != nil {
		return Database{}, fmt.Errorf("store owner password: %w", err)
	}
	now := s.now().UTC()
	d, _, err := s.records.InsertDatabase(ctx, Database{
		ID: "db_" + ulid.Make().String(), JobID: p.JobID, Name: p.Name, Owner: p.Owner, Status: StatusCreating,
		Endpoint:  Endpoint{Engine: ep.Engine, Host: ep.Host, Port: ep.Port, User: p.Owner, Database: p.Name, SecretRef: ref},
		CreatedAt: now, UpdatedAt: now,
	})
	if err != nil {
		return Database{}, err
	}
	if err := s.finishCreate(ctx, sec, ep, d); err != nil {
		return Database{}, err
	}
	d.Status = StatusReady
	return d, nil
}

// checkOwner refuses an owner Groundwork did not create on this server: the server's admin
// login (Groundwork's own, or an adopted server's), and any role that already exists there and
// is not the owner of one of this job's databases. Creating a database resets its owner's
// password, so naming an existing role would take it over.
func (s *Service) checkOwner(ctx context.Context, sec jobAccess, ep Endpoint, owner string, existing []Database) error {
	if strings.EqualFold(owner, ep.User) || ep.Engine == EngineRedis && owner == "default" {
		return &FieldError{Field: "owner", Rule: RuleConflict, Message: fmt.Sprintf("%q is the server's admin login; choose a new owner name", owner)}
	}
	for _, d := range existing {
		if d.Owner == owner {
			return nil // ours: a re-sent or crashed create finishes it
		}
	}
	admin, err := adminConn(ctx, sec, ep)
	if err != nil {
		return err
	}
	exists, err := RoleExists(ctx, admin, owner)
	if err != nil {
		return err
	}
	if exists {
		return &FieldError{Field: "owner", Rule: RuleConflict,
			Message: fmt.Sprintf("a login named %q already exists on the server and was not created by Groundwork; choose a new owner name", owner)}
	}
	return nil
}

func (s *Service) finishCreate(ctx context.Context, sec jobAccess, ep Endpoint, d Database) error {
	admin, err := adminConn(ctx, sec, ep)
	if err != nil {
		return err
	}
	pw, err := sec.Get(ctx, d.Endpoint.SecretRef)
	if err != nil {
		return fmt.Errorf("owner password: %w", err)
	}
	if err := CreateDatabase(ctx, admin, d.Name, d.Owner, pw); err != nil {
		return err
	}
	if err := s.records.UpdateDatabaseStatus(ctx, d.JobID, d.ID, StatusReady, s.now().UTC()); err != nil {
		return err
	}
	s.log.InfoContext(ctx, "database created", "job", d.JobID, "database", d.ID, "name", d.Name, "owner", d.Owner)
	return nil
}

// GetDatabase returns one database.
func (s *Service) GetDatabase(ctx context.Context, jobID, id string) (Database, error) {
	return s.records.GetDatabase(ctx, jobID, id)
}

// ListDatabases lists a job's databases.
func (s *Service) ListDatabases(ctx context.Context, jobID string) ([]Database, error) {
	return s.records.ListDatabases(ctx, jobID)
}

// DeleteDatabase drops the database and its owner, deletes the owner's secret and the
// database-scoped connections, then the record. Deleting again after a crash finishes the work.
func (s *Service) DeleteDatabase(ctx context.Context, jobID, id string) error {
	d, err := s.records.GetDatabase(ctx, jobID, id)
	if err != nil {
		return err
	}
	ep, sec, err := s.adminEndpoint(ctx, jobID)
	if err != nil {
		return err
	}
	if err := s.records.UpdateDatabaseStatus(ctx, jobID, id, StatusDeleting, s.now().UTC()); err != nil {
		return err
	}
	return s.finishDelete(ctx, sec, ep, d)
}

func (s *Service) finishDelete(ctx context.Context, sec jobAccess, ep Endpoint, d Database) error {
	admin, err := adminConn(ctx, sec, ep)
	if err != nil {
		return err
	}
	if err := DropDatabase(ctx, admin, d.Name, d.Owner); err != nil {
		return err
	}
	conns, err := s.records.ListConnections(ctx, d.JobID, d.ID)
	if err != nil {
		return err
	}
	for _, c := range conns {
		if err := s.records.DeleteConnection(ctx, d.JobID, c.ID); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	if err := sec.Delete(ctx, d.Endpoint.SecretRef); err != nil {
		return fmt.Errorf("delete owner password: %w", err)
	}
	if err := s.records.DeleteDatabase(ctx, d.JobID, d.ID); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	s.log.InfoContext(ctx, "database deleted", "job", d.JobID, "database", d.ID, "name", d.Name)
	return nil
}

// UnsettledJobs lists the jobs with databases a crash left "creating" or "deleting".
type UnsettledJobs interface {
	UnsettledDatabaseJobs(ctx context.Context) ([]string, error)
}

// ReconcileAll reconciles every job of unsettled until none is left or ctx ends (a server
// start runs it in the background). A job whose server is not back yet is tried again with
// capped backoff.
func (s *Service) ReconcileAll(ctx context.Context, unsettled UnsettledJobs) {
	wait := time.Second
	for {
		ids, err := unsettled.UnsettledDatabaseJobs(ctx)
		if err == nil && len(ids) == 0 {
			return
		}
		if err != nil {
			s.log.WarnContext(ctx, "list unsettled databases", "error", err)
		}
		for _, id := range ids {
			if err := s.Reconcile(ctx, id); err != nil {
				s.log.WarnContext(ctx, "reconcile databases", "job", id, "error", err)
			} else {
				s.log.InfoContext(ctx, "databases reconciled", "job", id)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
	}
}

// Reconcile finishes the job's databases left "creating" or "deleting" by a crash. Call it
// at start for every completed datastore job (and it is harmless at any time).
func (s *Service) Reconcile(ctx context.Context, jobID string) error {
	ep, sec, err := s.adminEndpoint(ctx, jobID)
	if err != nil {
		return err
	}
	dbs, err := s.records.ListDatabases(ctx, jobID)
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range dbs {
		switch d.Status {
		case StatusCreating:
			errs = append(errs, s.finishCreate(ctx, sec, ep, d))
		case StatusDeleting:
			errs = append(errs, s.finishDelete(ctx, sec, ep, d))
		}
	}
	return errors.Join(errs...)
}

// CreateConnectionParams asks for a connection; DatabaseID empty means job-scoped.
type CreateConnectionParams struct {
	JobID      string `json:"-"`
	DatabaseID string `json:"-"`
	Name       string `json:"name,omitempty"`
}

// CreateConnection stores a connection: the server's admin endpoint for a job-scoped one, the
// database owner's for a database-scoped one. It creates no user: connections are pointers.
func (s *Service) CreateConnection(ctx context.Context, p CreateConnectionParams) (Connection, error) {
	ep, _, err := s.adminEndpoint(ctx, p.JobID)
	if err != nil {
		return Connection{}, err
	}
	if p.Name != "" {
		if err := ValidateName(ep.Engine, "name", p.Name); err != nil {
			return Connection{}, err
		}
	}
	if p.DatabaseID != "" {
		d, err := s.records.GetDatabase(ctx, p.JobID, p.DatabaseID)
		if err != nil {
			return Connection{}, err
		}
		if d.Status != StatusReady {
			return Connection{}, fmt.Errorf("database %s is %s: %w", d.ID, d.Status, ErrNotReady)
		}
		ep = d.Endpoint
	}
	c := Connection{ID: "conn_" + ulid.Make().String(), JobID: p.JobID, DatabaseID: p.DatabaseID, Name: p.Name, Endpoint: ep, CreatedAt: s.now().UTC()}
	if err := s.records.InsertConnection(ctx, c); err != nil {
		return Connection{}, err
	}
	return c, nil
}

// GetConnection returns one connection; databaseID must match its scope.
func (s *Service) GetConnection(ctx context.Context, jobID, databaseID, id string) (Connection, error) {
	c, err := s.records.GetConnection(ctx, jobID, id)
	if err != nil {
		return Connection{}, err
	}
	if c.DatabaseID != databaseID {
		return Connection{}, fmt.Errorf("connection %s: %w", id, ErrNotFound)
	}
	return c, nil
}

// ListConnections lists the connections of one scope.
func (s *Service) ListConnections(ctx context.Context, jobID, databaseID string) ([]Connection, error) {
	return s.records.ListConnections(ctx, jobID, databaseID)
}

// DeleteConnection removes the record only; the user and its password stay.
func (s *Service) DeleteConnection(ctx context.Context, jobID, databaseID, id string) error {
	if _, err := s.GetConnection(ctx, jobID, databaseID, id); err != nil {
		return err
	}
	return s.records.DeleteConnection(ctx, jobID, id)
}

// IsFieldError reports whether err is a refused input (the API's 400).
func IsFieldError(err error) bool {
	var fe *FieldError
	return errors.As(err, &fe)
}

// Forget removes what Groundwork keeps about a job's databases: connection records, owner
// passwords, database records. Teardown calls it before the server goes (for an adopted
// server, the server is left as it is: it is the customer's). Re-running it is harmless.
func (s *Service) Forget(ctx context.Context, j *job.Job) error {
	jobID, sec := j.ID, s.secrets.For(JobSecrets(j))
	dbs, err := s.records.ListDatabases(ctx, jobID)
	if err != nil {
		return err
	}
	for _, db := range dbs {
		if err := s.forgetConnections(ctx, jobID, db.ID); err != nil {
			return err
		}
		if err := sec.Delete(ctx, db.Endpoint.SecretRef); err != nil {
			return fmt.Errorf("delete owner password of %s: %w", db.ID, err)
		}
		if err := s.records.DeleteDatabase(ctx, jobID, db.ID); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	return s.forgetConnections(ctx, jobID, "")
}

func (s *Service) forgetConnections(ctx context.Context, jobID, dbID string) error {
	conns, err := s.records.ListConnections(ctx, jobID, dbID)
	if err != nil {
		return err
	}
	for _, c := range conns {
		if err := s.records.DeleteConnection(ctx, jobID, c.ID); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	return nil
}
