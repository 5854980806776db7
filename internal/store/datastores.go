package store

import (
	"context"
	"errors"
	"time"
)

// DatastoreEngine is a datastore engine (datastore.Engine).
type DatastoreEngine string

const (
	EnginePostgres DatastoreEngine = "postgres"
	EngineMySQL    DatastoreEngine = "mysql"
	EngineRedis    DatastoreEngine = "redis"
)

// DatastoreEngines lists the supported engines.
var DatastoreEngines = []DatastoreEngine{EnginePostgres, EngineMySQL, EngineRedis}

// Valid reports whether e is supported.
func (e DatastoreEngine) Valid() bool {
	for _, k := range DatastoreEngines {
		if k == e {
			return true
		}
	}
	return false
}

// DatastoreEndpoint is a set of connection details without the secret (datastore.Endpoint):
// {host, port, user, database, secretRef}.
type DatastoreEndpoint struct {
	Engine    DatastoreEngine `json:"engine"`
	Host      string          `json:"host"`
	Port      int             `json:"port"`
	User      string          `json:"user"`
	Database  string          `json:"database,omitempty"`
	SecretRef string          `json:"secretRef"`
}

// Database statuses. A record is written "creating" before any SQL runs and "deleting" before
// the drop, so that a crash leaves a record that says what to finish.
const (
	DatabaseStatusCreating = "creating"
	DatabaseStatusReady    = "ready"
	DatabaseStatusDeleting = "deleting"
)

// DatastoreDatabase is a database (and its owner) on a datastore job's server
// (datastore.Database).
type DatastoreDatabase struct {
	ID        string            `json:"id"`
	JobID     string            `json:"jobID"`
	Name      string            `json:"name"`
	Owner     string            `json:"owner"`
	Status    string            `json:"status"`
	Endpoint  DatastoreEndpoint `json:"connection"`
	CreatedAt time.Time         `json:"createdAt"`
	UpdatedAt time.Time         `json:"updatedAt"`
}

// DatastoreConnection is a stored set of credentials an application fetches
// (datastore.Connection): job-scoped (the server's admin endpoint) or database-scoped
// (DatabaseID set; the owner's endpoint).
type DatastoreConnection struct {
	ID         string            `json:"id"`
	JobID      string            `json:"jobID"`
	DatabaseID string            `json:"databaseID,omitempty"`
	Name       string            `json:"name,omitempty"`
	Endpoint   DatastoreEndpoint `json:"connection"`
	CreatedAt  time.Time         `json:"createdAt"`
}

// ErrDatastoreNotFound is returned for a missing database or connection (the API's 404).
// It is datastore.ErrNotFound, and not ErrNotFound: the two say different things to the API.
var ErrDatastoreNotFound = errors.New("not found")

// DatastoreRecords persists databases and connections (datastore.Records). Insert of a
// database whose (JobID, Name) exists returns the existing record and inserted=false: that
// unique key is what makes a re-sent create harmless.
type DatastoreRecords interface {
	InsertDatabase(ctx context.Context, d DatastoreDatabase) (got DatastoreDatabase, inserted bool, err error)
	GetDatabase(ctx context.Context, jobID, id string) (DatastoreDatabase, error)
	ListDatabases(ctx context.Context, jobID string) ([]DatastoreDatabase, error)
	UpdateDatabaseStatus(ctx context.Context, jobID, id, status string, now time.Time) error
	DeleteDatabase(ctx context.Context, jobID, id string) error

	InsertConnection(ctx context.Context, c DatastoreConnection) error
	GetConnection(ctx context.Context, jobID, id string) (DatastoreConnection, error)
	// ListConnections lists a job's connections with the given DatabaseID ("" for job-scoped).
	ListConnections(ctx context.Context, jobID, databaseID string) ([]DatastoreConnection, error)
	DeleteConnection(ctx context.Context, jobID, id string) error
}
