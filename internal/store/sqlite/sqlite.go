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

// claimSQL leases due jobs in one statement. The two arms are separate so that each walks its
// own index instead of scanning the table; SQLite has one writer at a time, so no row locks
// are needed for two claimers not to take the same job.
const claimSQL = `UPDATE provisioning_jobs SET status = 'running', lease_owner = $1, lease_token = lease_token + 1,
	lease_expires_at = $2 + lease_ttl_ms, version = version + 1, updated_at = $2
	WHERE id IN (
		SELECT id FROM (SELECT id FROM provisioning_jobs WHERE status = 'queued' AND next_run_at <= $2
			ORDER BY next_run_at LIMIT $3)
		UNION ALL
		SELECT id FROM (SELECT id FROM provisioning_jobs WHERE status = 'running' AND lease_expires_at < $2
			ORDER BY lease_expires_at LIMIT $3)
		LIMIT $3)
	RETURNING ` + sqlstore.JobColumns

// Open opens (creating if needed) the database file at path and applies migrations.
func Open(ctx context.Context, path string) (*sqlstore.Store, error) {
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
	if err := Migrate(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	return sqlstore.New(db, sqlstore.Dialect{Name: "sqlite", ClaimSQL: claimSQL}), nil
}

// Migrate applies pending migrations.
func Migrate(ctx context.Context, db *sql.DB) error {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return err
	}
	return sqlstore.Migrate(ctx, db, sub, "")
}
