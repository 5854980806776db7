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
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver

	"github.com/groundworkhq/groundwork/internal/store/sqlstore"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

const channel = "groundwork_jobs"

func claimSQL() string {
	cols := strings.Split(sqlstore.JobColumns, ",")
	for i, c := range cols {
		cols[i] = "j." + strings.TrimSpace(c)
	}
	// Two arms, each on its own index, instead of one OR that would scan the table.
	return `WITH queued AS (
		SELECT id FROM provisioning_jobs WHERE status = 'queued' AND next_run_at <= $2
		ORDER BY next_run_at LIMIT $3 FOR UPDATE SKIP LOCKED),
	expired AS (
		SELECT id FROM provisioning_jobs WHERE status = 'running' AND lease_expires_at < $2
		ORDER BY lease_expires_at LIMIT $3 FOR UPDATE SKIP LOCKED),
	due AS (SELECT id FROM queued UNION ALL SELECT id FROM expired LIMIT $3)
	UPDATE provisioning_jobs j SET status = 'running', lease_owner = $1, lease_token = j.lease_token + 1,
		lease_expires_at = $2 + j.lease_ttl_ms, version = j.version + 1, updated_at = $2
	FROM due WHERE j.id = due.id
	RETURNING ` + strings.Join(cols, ", ")
}

// Store is the PostgreSQL store plus its listener.
type Store struct {
	*sqlstore.Store
	url    string
	logger *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}
}

// Open connects to url, applies migrations and starts listening for wake-ups.
func Open(ctx context.Context, url string, logger *slog.Logger) (*Store, error) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	db.SetMaxOpenConns(20)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect postgres: %w", err)
	}
	if err := Migrate(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	s := &Store{
		Store: sqlstore.New(db, sqlstore.Dialect{
			Name:     "postgres",
			ClaimSQL: claimSQL(),
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
	return sqlstore.Migrate(ctx, db, sub, `SELECT pg_advisory_xact_lock(5087)`)
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
