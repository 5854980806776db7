package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

// SchemaTooNewError is returned when the database was migrated by a newer Groundwork than this
// binary: running on it could misread or corrupt rows whose meaning the binary does not know,
// and migrations only go forward, so the only safe answer is to stop.
type SchemaTooNewError struct {
	// Database is the highest schema version recorded in the database, Binary the highest
	// this binary carries; Migration names the newest migration the database has applied.
	Database, Binary int
	Migration        string
}

func (e *SchemaTooNewError) Error() string {
	return fmt.Sprintf("database schema version %d (migration %s) is newer than this binary's schema version %d: "+
		"run a Groundwork at least as new as the one that upgraded the database, or restore a backup taken before that upgrade "+
		"(migrations are forward-only)", e.Database, e.Migration, e.Binary)
}

// Version is the schema version a migration file stands for: its leading number
// ("0006_datastores.sql" is 6), or 0 when it has none.
func Version(name string) int {
	end := strings.IndexFunc(name, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(name)
	}
	n, _ := strconv.Atoi(name[:end])
	return n
}

// Latest is the highest schema version among migrations.
func Latest(migrations fs.FS) (int, error) {
	names, err := fs.Glob(migrations, "*.sql")
	if err != nil {
		return 0, err
	}
	v := 0
	for _, n := range names {
		v = max(v, Version(n))
	}
	return v, nil
}

// Applied is the highest schema version recorded in db's schema_migrations and the migration
// that recorded it; 0 and "" when the table is empty.
func Applied(ctx context.Context, db *sql.DB) (int, string, error) {
	rows, err := db.QueryContext(ctx, `SELECT name FROM schema_migrations`)
	if err != nil {
		return 0, "", fmt.Errorf("read schema_migrations: %w", err)
	}
	defer rows.Close()
	v, last := 0, ""
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return 0, "", fmt.Errorf("read schema_migrations: %w", err)
		}
		if n := Version(name); n > v {
			v, last = n, name
		}
	}
	return v, last, rows.Err()
}

// Migrate applies, in name order, each *.sql file of migrations not yet recorded in
// schema_migrations. Each file runs in its own transaction with its record, so a crash leaves
// either both or neither. lock, if set, runs first inside each transaction (PostgreSQL takes an
// advisory lock there so that replicas starting together do not race).
func Migrate(ctx context.Context, db *sql.DB, migrations fs.FS, lock string) error {
	return MigrateTo(ctx, db, migrations, lock, 0)
}

// MigrateTo is Migrate stopping after schema version upTo (0: no limit). Tests use it to build
// a database as each earlier release left it. It refuses a database whose schema is newer than
// migrations know (SchemaTooNewError) before changing anything.
func MigrateTo(ctx context.Context, db *sql.DB, migrations fs.FS, lock string, upTo int) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		name TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	latest, err := Latest(migrations)
	if err != nil {
		return err
	}
	applied, last, err := Applied(ctx, db)
	if err != nil {
		return err
	}
	if applied > latest {
		return &SchemaTooNewError{Database: applied, Binary: latest, Migration: last}
	}
	names, err := fs.Glob(migrations, "*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		if upTo > 0 && Version(name) > upTo {
			break
		}
		body, err := fs.ReadFile(migrations, name)
		if err != nil {
			return err
		}
		if err := applyOne(ctx, db, name, string(body), lock); err != nil {
			return fmt.Errorf("migration %s: %w", name, err)
		}
	}
	return nil
}

func applyOne(ctx context.Context, db *sql.DB, name, body, lock string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op
	if lock != "" {
		if _, err := tx.ExecContext(ctx, lock); err != nil {
			return err
		}
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE name = $1`, name).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	for _, stmt := range strings.Split(body, ";\n") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("%w\n%s", err, stmt)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (name, applied_at) VALUES ($1, 0)`, name); err != nil {
		return err
	}
	return tx.Commit()
}
