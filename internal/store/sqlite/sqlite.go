// Package sqlite is the embedded default store: one file, pure Go (modernc.org/sqlite), WAL.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"net/url"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/groundworkhq/groundwork/internal/store/sqlstore"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// clock is SQLite's own clock in Unix milliseconds. SQLite runs inside this process, so it is
// the machine's clock; reading it in the SQL keeps the rule the same as on PostgreSQL, where it
// is the server's. Within one statement 'now' is one instant.
const clock = `CAST(unixepoch('subsec') * 1000 AS INTEGER)`

// claimSQL leases due jobs in one statement. The two arms are separate so that each walks its
// own index instead of scanning the table; SQLite has one writer at a time, so no row locks
// are needed for two claimers not to take the same job.
//
// A queued job is due by the caller's clock ($2): next_run_at is a timer the job set for
// itself (a wait or a backoff), and firing it early only costs an extra poll of an idempotent
// step. A held lease is taken over only once it has expired by the database's clock too, so a
// replica whose clock runs fast cannot take a job another replica still holds; the caller's
// clock can only delay a take-over, which keeps tests that drive time through $2 meaningful.
const claimSQL = `UPDATE provisioning_jobs SET claimed_from = status, status = 'running', lease_owner = $1, lease_token = lease_token + 1,
	lease_expires_at = $2 + lease_ttl_ms, version = version + 1, updated_at = $2
	WHERE id IN (
		SELECT id FROM (SELECT id FROM provisioning_jobs WHERE status = 'queued' AND next_run_at <= $2
			ORDER BY next_run_at LIMIT $3)
		UNION ALL
		SELECT id FROM (SELECT id FROM provisioning_jobs WHERE status = 'running' AND lease_expires_at < min($2, ` + clock + `)
			ORDER BY lease_expires_at LIMIT $3)
		LIMIT $3)
	RETURNING ` + sqlstore.JobColumns + `, ` + clock + `, claimed_from`

// Open opens (creating if needed) the database file at path and applies migrations.
func Open(ctx context.Context, path string) (*sqlstore.Store, error) {
	return OpenAt(ctx, path, 0)
}

// OpenAt is Open migrating only up to schema version upTo (0: all), the database an earlier
// release would have left; upgrade tests build their fixtures with it.
func OpenAt(ctx context.Context, path string, upTo int) (*sqlstore.Store, error) {
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "busy_timeout(10000)")
	// NORMAL is durable against a process crash in WAL mode; only an OS crash can lose the last
	// transactions, which the engine re-runs idempotently.
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	// One connection serialises writers inside this process, so they queue in Go instead of
	// spinning on SQLITE_BUSY; other processes still wait on busy_timeout.
	db.SetMaxOpenConns(1)
	if err := sqlstore.MigrateTo(ctx, db, Migrations(), "", upTo); err != nil {
		db.Close()
		return nil, err
	}
	st := sqlstore.New(db, sqlstore.Dialect{Name: "sqlite", ClaimSQL: claimSQL, Clock: clock, Prepare: true})
	// Readers of their own: WAL lets them read the last commit while the writer writes, so
	// the API's reads of jobs do not queue behind the engine's writes.
	rq := url.Values{}
	rq.Add("_pragma", "busy_timeout(10000)")
	rq.Add("_pragma", "query_only(1)")
	rdb, err := sql.Open("sqlite", "file:"+path+"?"+rq.Encode())
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open sqlite %s for reading: %w", path, err)
	}
	// Idle readers are kept: a reader closed on release would lose its prepared statements
	// and open the file again on the next read.
	rdb.SetMaxOpenConns(4)
	rdb.SetMaxIdleConns(4)
	return st.WithReadPool(rdb), nil
}

// Migrate applies pending migrations.
func Migrate(ctx context.Context, db *sql.DB) error {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return err
	}
	return sqlstore.Migrate(ctx, db, sub, "")
}

// Migrations are the SQLite schema migrations this binary carries.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err) // the embedded directory is fixed at build time
	}
	return sub
}
