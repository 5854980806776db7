package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/groundworkhq/groundwork/internal/store"
)

// The store keeps the databases and connections of datastore jobs for the datastore service.
var _ store.DatastoreRecords = (*Store)(nil)

const databaseColumns = `id, job_id, name, owner, status, endpoint, created_at, updated_at`

func scanDatabase(r scanner) (store.DatastoreDatabase, error) {
	var (
		d                store.DatastoreDatabase
		ep               string
		created, updated int64
	)
	if err := r.Scan(&d.ID, &d.JobID, &d.Name, &d.Owner, &d.Status, &ep, &created, &updated); err != nil {
		return d, err
	}
	if err := json.Unmarshal([]byte(ep), &d.Endpoint); err != nil {
		return d, fmt.Errorf("decode endpoint of %s: %w", d.ID, err)
	}
	d.CreatedAt, d.UpdatedAt = fromMS(created), fromMS(updated)
	return d, nil
}

// InsertDatabase implements store.DatastoreRecords: a row whose (job, name) exists is left alone
// and returned with inserted=false.
func (s *Store) InsertDatabase(ctx context.Context, d store.DatastoreDatabase) (store.DatastoreDatabase, bool, error) {
	ep, err := jsonText(d.Endpoint)
	if err != nil {
		return d, false, err
	}
	res, err := s.q.ExecContext(ctx, `INSERT INTO datastore_databases (`+databaseColumns+`, secret_ref)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (job_id, name) DO NOTHING`,
		d.ID, d.JobID, d.Name, d.Owner, d.Status, ep, ms(d.CreatedAt), ms(d.UpdatedAt), d.Endpoint.SecretRef)
	if err != nil {
		return d, false, fmt.Errorf("insert database %s: %w", d.Name, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return d, false, err
	} else if n == 1 {
		return d, true, nil
	}
	got, err := scanDatabase(s.q.QueryRowContext(ctx, `SELECT `+databaseColumns+` FROM datastore_databases
		WHERE job_id = $1 AND name = $2`, d.JobID, d.Name))
	if err != nil {
		return d, false, fmt.Errorf("read database %s: %w", d.Name, err)
	}
	return got, false, nil
}

// GetDatabase implements store.DatastoreRecords.
func (s *Store) GetDatabase(ctx context.Context, jobID, id string) (store.DatastoreDatabase, error) {
	d, err := scanDatabase(s.q.QueryRowContext(ctx, `SELECT `+databaseColumns+` FROM datastore_databases
		WHERE job_id = $1 AND id = $2`, jobID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return d, fmt.Errorf("database %s: %w", id, store.ErrDatastoreNotFound)
	}
	if err != nil {
		return d, fmt.Errorf("get database %s: %w", id, err)
	}
	return d, nil
}

// ListDatabases implements store.DatastoreRecords, oldest first.
func (s *Store) ListDatabases(ctx context.Context, jobID string) ([]store.DatastoreDatabase, error) {
	rows, err := s.q.QueryContext(ctx, `SELECT `+databaseColumns+` FROM datastore_databases
		WHERE job_id = $1 ORDER BY id`, jobID)
	if err != nil {
		return nil, fmt.Errorf("list databases: %w", err)
	}
	defer rows.Close()
	out := []store.DatastoreDatabase{}
	for rows.Next() {
		d, err := scanDatabase(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// UpdateDatabaseStatus implements store.DatastoreRecords.
func (s *Store) UpdateDatabaseStatus(ctx context.Context, jobID, id, status string, now time.Time) error {
	res, err := s.q.ExecContext(ctx, `UPDATE datastore_databases SET status = $3, updated_at = $4
		WHERE job_id = $1 AND id = $2`, jobID, id, status, ms(now))
	return oneRow(res, err, "database", id)
}

// DeleteDatabase implements store.DatastoreRecords.
func (s *Store) DeleteDatabase(ctx context.Context, jobID, id string) error {
	res, err := s.q.ExecContext(ctx, `DELETE FROM datastore_databases WHERE job_id = $1 AND id = $2`, jobID, id)
	return oneRow(res, err, "database", id)
}

const connectionColumns = `id, job_id, database_id, name, endpoint, created_at`

func scanConnection(r scanner) (store.DatastoreConnection, error) {
	var (
		c       store.DatastoreConnection
		ep      string
		created int64
	)
	if err := r.Scan(&c.ID, &c.JobID, &c.DatabaseID, &c.Name, &ep, &created); err != nil {
		return c, err
	}
	if err := json.Unmarshal([]byte(ep), &c.Endpoint); err != nil {
		return c, fmt.Errorf("decode endpoint of %s: %w", c.ID, err)
	}
	c.CreatedAt = fromMS(created)
	return c, nil
}

// InsertConnection implements store.DatastoreRecords.
func (s *Store) InsertConnection(ctx context.Context, c store.DatastoreConnection) error {
	ep, err := jsonText(c.Endpoint)
	if err != nil {
		return err
	}
	_, err = s.q.ExecContext(ctx, `INSERT INTO datastore_connections (`+connectionColumns+`, secret_ref)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, c.ID, c.JobID, c.DatabaseID, c.Name, ep, ms(c.CreatedAt), c.Endpoint.SecretRef)
	if err != nil {
		return fmt.Errorf("insert connection: %w", err)
	}
	return nil
}

// GetConnection implements store.DatastoreRecords.
func (s *Store) GetConnection(ctx context.Context, jobID, id string) (store.DatastoreConnection, error) {
	c, err := scanConnection(s.q.QueryRowContext(ctx, `SELECT `+connectionColumns+` FROM datastore_connections
		WHERE job_id = $1 AND id = $2`, jobID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return c, fmt.Errorf("connection %s: %w", id, store.ErrDatastoreNotFound)
	}
	if err != nil {
		return c, fmt.Errorf("get connection %s: %w", id, err)
	}
	return c, nil
}

// ListConnections implements store.DatastoreRecords.
func (s *Store) ListConnections(ctx context.Context, jobID, databaseID string) ([]store.DatastoreConnection, error) {
	rows, err := s.q.QueryContext(ctx, `SELECT `+connectionColumns+` FROM datastore_connections
		WHERE job_id = $1 AND database_id = $2 ORDER BY id`, jobID, databaseID)
	if err != nil {
		return nil, fmt.Errorf("list connections: %w", err)
	}
	defer rows.Close()
	out := []store.DatastoreConnection{}
	for rows.Next() {
		c, err := scanConnection(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// DeleteConnection implements store.DatastoreRecords.
func (s *Store) DeleteConnection(ctx context.Context, jobID, id string) error {
	res, err := s.q.ExecContext(ctx, `DELETE FROM datastore_connections WHERE job_id = $1 AND id = $2`, jobID, id)
	return oneRow(res, err, "connection", id)
}

// SecretJob returns the job whose database or connection holds the secret reference ref, so
// that a reveal can be checked against the caller's org and scopes; ErrNotFound when nothing
// names it.
func (s *Store) SecretJob(ctx context.Context, ref string) (string, error) {
	var jobID string
	err := s.q.QueryRowContext(ctx, `SELECT job_id FROM datastore_connections WHERE secret_ref = $1
		UNION SELECT job_id FROM datastore_databases WHERE secret_ref = $1 LIMIT 1`, ref).Scan(&jobID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("secret reference: %w", store.ErrDatastoreNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("find secret reference: %w", err)
	}
	return jobID, nil
}

// UnsettledDatabaseJobs lists the jobs that have databases left "creating" or "deleting", the
// ones a restarted server must reconcile.
func (s *Store) UnsettledDatabaseJobs(ctx context.Context) ([]string, error) {
	rows, err := s.q.QueryContext(ctx, `SELECT DISTINCT job_id FROM datastore_databases
		WHERE status IN ($1, $2) ORDER BY job_id`, store.DatabaseStatusCreating, store.DatabaseStatusDeleting)
	if err != nil {
		return nil, fmt.Errorf("list unsettled databases: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

func oneRow(res sql.Result, err error, what, id string) error {
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%s %s: %w", what, id, store.ErrDatastoreNotFound)
	}
	return nil
}
