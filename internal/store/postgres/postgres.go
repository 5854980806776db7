// Package postgres is the shared store for several replicas: claims use FOR UPDATE SKIP LOCKED
// and LISTEN/NOTIFY wakes the other replicas when work becomes due.
package postgres

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver

	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/store/sqlstore"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

const channel = "groundwork_jobs"

// migrateLock serialises replicas migrating at once.
const migrateLock = `SELECT pg_advisory_xact_lock(5087)`

// clock is the server's clock in Unix milliseconds. clock_timestamp() rather than now(): now()
// is the start of the transaction, which may have begun well before the statement.
const clock = `floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint`

// claimSQL leases due jobs. A queued job is due by the caller's clock ($2): next_run_at is a
// timer the job set for itself, and firing it early only costs an extra poll of an idempotent
// step. A held lease is taken over only once it has expired by the server's clock too, so a
// replica whose clock runs fast cannot take a job another replica still holds; the caller's
// clock can only delay a take-over, which keeps tests that drive time through $2 meaningful.
// The clock is read once (a materialised CTE) so that the lease index can be used and every
// row compares against the same instant.
func claimSQL() string {
	// Two arms, each on its own index, instead of one OR that would scan the table.
	return `WITH db AS MATERIALIZED (SELECT ` + clock + ` AS now_ms),
	queued AS (
		SELECT id FROM provisioning_jobs WHERE status = 'queued' AND next_run_at <= $2
		ORDER BY next_run_at LIMIT $3 FOR UPDATE SKIP LOCKED),
	expired AS (
		SELECT id FROM provisioning_jobs WHERE status = 'running'
			AND lease_expires_at < LEAST($2, (SELECT now_ms FROM db))
		ORDER BY lease_expires_at LIMIT $3 FOR UPDATE SKIP LOCKED),
	due AS (SELECT id FROM queued UNION ALL SELECT id FROM expired LIMIT $3)
	UPDATE provisioning_jobs j SET claimed_from = j.status, status = 'running', lease_owner = $1, lease_token = j.lease_token + 1,
		lease_expires_at = $2 + j.lease_ttl_ms, version = j.version + 1, updated_at = $2
	FROM due, db WHERE j.id = due.id
	RETURNING ` + sqlstore.Columns("j.") + `, db.now_ms, j.claimed_from`
}

// maxConns bounds one replica's connections (the listener has one more of its own).
const maxConns = 20

// Store is the PostgreSQL store plus its listener.
type Store struct {
	*sqlstore.Store
	url    string
	logger *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}
}

var _ store.Full = (*Store)(nil)

// Open connects to url, applies migrations and starts listening for wake-ups.
func Open(ctx context.Context, url string, logger *slog.Logger) (*Store, error) {
	return OpenAt(ctx, url, logger, 0)
}

// OpenAt is Open migrating only up to schema version upTo (0: all), the database an earlier
// release would have left; upgrade tests build their fixtures with it.
func OpenAt(ctx context.Context, url string, logger *slog.Logger, upTo int) (*Store, error) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	// database/sql keeps only two idle connections unless told otherwise, so under concurrent
	// load every connection beyond two was closed on release and opened again on the next
	// query: a new server process and a login each time. At 500 API requests a second beside
	// the engine that took the p99 of reading one job from 3 ms to 116 ms. Idle connections are
	// kept up to the pool's size and closed after a quiet spell.
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect postgres: %w", err)
	}
	if err := sqlstore.MigrateTo(ctx, db, Migrations(), migrateLock, upTo); err != nil {
		db.Close()
		return nil, err
	}
	s := &Store{
		Store: sqlstore.New(db, sqlstore.Dialect{
			Name:     "postgres",
			Pipeline: true,
			ClaimSQL: claimSQL(),
			Clock:    clock,
			JSON:     func(p string) string { return p + "::jsonb" },
			Notify: func(ctx context.Context, db *sql.DB) error {
				_, err := db.ExecContext(ctx, `SELECT pg_notify('`+channel+`', '')`)
				return err
			},
		}),
		url:    url,
		logger: logger,
		done:   make(chan struct{}),
	}
	lctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.listen(lctx)
	return s, nil
}

// Migrate applies pending migrations under an advisory lock.
func Migrate(ctx context.Context, db *sql.DB) error {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return err
	}
	return sqlstore.Migrate(ctx, db, sub, migrateLock)
}

// listen holds one connection in LISTEN and turns notifications into local wake-ups,
// reconnecting with a pause when the connection drops; polling covers the gap.
func (s *Store) listen(ctx context.Context) {
	defer close(s.done)
	for ctx.Err() == nil {
		if err := s.listenOnce(ctx); err != nil && ctx.Err() == nil {
			s.logger.Warn("postgres listener dropped; polling covers until it is back", "error", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

func (s *Store) listenOnce(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, s.url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		return err
	}
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		s.Broadcast()
	}
}

// Close stops the listener and closes the pool.
func (s *Store) Close() error {
	s.cancel()
	<-s.done
	return s.Store.Close()
}

// Migrations are the PostgreSQL schema migrations this binary carries.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err) // the embedded directory is fixed at build time
	}
	return sub
}
