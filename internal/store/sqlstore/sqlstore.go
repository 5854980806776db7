// Package sqlstore implements store.Store over database/sql. SQLite and PostgreSQL share it;
// what differs between them (the claim query, notifications, migrations) comes in a Dialect.
// Times are stored as Unix milliseconds so that both databases compare them the same way.
// Scheduling compares against the "now" the caller passes; whether a lease has expired is also
// checked against the database's own clock (see Dialect.Clock).
package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/store"
)

// Dialect carries what one database does differently.
type Dialect struct {
	Name string
	// ClaimSQL leases due jobs: $1 owner, $2 now (ms), $3 limit. It returns JobColumns, then
	// the database's clock (ms), then claimed_from (the status the job had before the claim).
	// A queued job is due when next_run_at <= $2; a running job's
	// lease is expired only when lease_expires_at is below both $2 and the database's clock.
	ClaimSQL string
	// Clock is an SQL expression for the database's clock in Unix milliseconds.
	Clock string
	// JSON wraps a placeholder for a JSON column (PostgreSQL casts to jsonb).
	JSON func(placeholder string) string
	// Notify, if set, runs after a write that may make a job due, so other replicas wake.
	Notify func(ctx context.Context, db *sql.DB) error
	// Prepare keeps statements prepared in the store. Drivers that cache prepared statements
	// themselves (pgx) do not need it.
	Prepare bool
	// Pipeline says the driver is pgx: a group commit's statements go in two round trips, and
	// claims read their rows through pgx itself (see withPgx).
	Pipeline bool
}

// Store is store.Store over a *sql.DB, or over one transaction of it (see Audited).
type Store struct {
	db      *sql.DB
	q       querier // db, or the transaction this copy is bound to
	dialect Dialect
	hub     *wakeHub
	// tx is set on a copy bound to a transaction: wake-ups wait for the commit.
	tx *txState
	// batch group-commits checkpoints (see batcher).
	batch *batcher
	// stmts, if the dialect asks for it, keeps statements prepared.
	stmts *stmtCache
	// reads, if set, serves the job reads of the API (one job, a page) outside a transaction
	// from a pool of its own, so they do not queue behind the engine's writes on SQLite's one
	// writing connection. WAL lets them read the last commit meanwhile.
	reads querier
	// sql holds the statements built from the dialect, built once: the checkpoint statements
	// run for every step, and building them cost more allocation than running them.
	sql queries
}

type queries struct {
	checkpoint, finish, setCheckpoint string
}

// bound is a copy of s whose statements go to q, a transaction: wake-ups wait for its commit.
func (s *Store) bound(q querier) *Store {
	c := *s
	c.q, c.tx = q, &txState{}
	return &c
}

// querier is what *sql.DB and *sql.Tx share.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type wakeHub struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
}

// Both SQL stores are this one, so each has every ability; the application relies on that
// (it is wired with a store.Full), and this line makes the compiler hold the store to it.
var _ store.Full = (*Store)(nil)

// New wraps db. The caller has applied migrations.
func New(db *sql.DB, d Dialect) *Store {
	if d.JSON == nil {
		d.JSON = func(p string) string { return p }
	}
	if d.Clock == "" {
		panic("sqlstore: Dialect.Clock is required") // a programming error in the dialect package
	}
	s := &Store{db: db, q: db, dialect: d, hub: &wakeHub{subs: map[chan struct{}]struct{}{}}, batch: &batcher{}}
	s.sql = queries{checkpoint: s.checkpointSQL(), finish: s.finishSQL(), setCheckpoint: s.setCheckpointSQL()}
	if d.Prepare {
		s.stmts = newStmtCache(db)
		s.q = preparedDB{DB: db, c: s.stmts}
		// Statements that only ever run inside a transaction are prepared here, before any.
		for _, q := range []string{insertAuditSQL, s.sql.checkpoint, s.sql.finish} {
			s.stmts.get(context.Background(), q, true)
		}
	}
	return s
}

// DB exposes the handle for the implementation packages (LISTEN, migrations, dumps in tests).
func (s *Store) DB() *sql.DB { return s.db }

// ReadDB is the pool job reads go to: the read pool when there is one, else DB.
func (s *Store) ReadDB() *sql.DB {
	switch r := s.reads.(type) {
	case preparedDB:
		return r.DB
	case *sql.DB:
		return r
	}
	return s.db
}

func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

func (s *Store) Close() error {
	if s.stmts != nil {
		s.stmts.close()
	}
	if r, ok := s.reads.(preparedDB); ok {
		r.c.close()
		r.DB.Close()
	} else if r, ok := s.reads.(*sql.DB); ok {
		r.Close()
	}
	return s.db.Close()
}

// JobColumns is the column list every job query returns, in scanJob's order.
const JobColumns = `id, org_id, space_id, kind, family, provider, mode, name, tags, subject_type, subject_id,
	config, infra, steps, status, phase, cancel_requested, failure, lease_owner, lease_token,
	lease_expires_at, lease_ttl_ms, next_run_at, version, created_at, updated_at`

// Columns is JobColumns with each column qualified by prefix ("j." in a join), and those named
// in null replaced by NULL.
func Columns(prefix string, null ...string) string {
	cols := strings.Split(JobColumns, ",")
	for i, c := range cols {
		c = strings.TrimSpace(c)
		cols[i] = prefix + c
		if slices.Contains(null, c) {
			cols[i] = "NULL"
		}
	}
	return strings.Join(cols, ", ")
}

// writtenColumns is JobColumns for the answer of a checkpoint, whose steps, infra and failure
// are the caller's own: they come back NULL and withWritten puts the caller's values in their
// place. Decoding a job's steps from JSON again was the larger part of the CPU a checkpoint
// cost this process.
func writtenColumns(prefix string) string { return Columns(prefix, "steps", "infra", "failure") }

// withWritten completes j, scanned from writtenColumns, with what checkpoint p wrote. The
// steps are copied, so the caller's later changes to j do not reach p; the times they point to
// are never changed in place.
func withWritten(j *job.Job, p *store.CheckpointParams) {
	j.Steps = append(make([]job.StepRecord, 0, len(p.Steps)), p.Steps...)
	j.Infra = json.RawMessage(rawText(p.Infra, "{}"))
	j.Failure = nil
	if p.Failure != nil {
		f := *p.Failure
		j.Failure = &f
	}
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

type scanner interface{ Scan(dest ...any) error }

func scanJob(r scanner) (*job.Job, error) { return scanJobExtra(r) }

// scanLeased scans a job row followed by the database's clock, read in the same statement
// that granted or extended the lease.
func scanLeased(r scanner) (*job.Job, error) {
	var dbNow int64
	j, err := scanJobExtra(r, &dbNow)
	if err != nil {
		return nil, err
	}
	if j.LeaseExpiresAt != nil {
		j.DBNow = fromMS(dbNow)
	}
	return j, nil
}

func scanJobExtra(r scanner, extra ...any) (*job.Job, error) {
	var (
		j                                   job.Job
		tags, config, infra, steps, failure sql.NullString
		cancel                              int64
		leaseExp                            sql.NullInt64
		ttl, next, created, updated         int64
	)
	// One allocation for the destinations: a literal then appended to was two.
	dest := append(make([]any, 0, 26+len(extra)), &j.ID, &j.OrgID, &j.SpaceID, &j.Kind, &j.Family, &j.Provider, &j.Mode, &j.Name, &tags,
		&j.SubjectType, &j.SubjectID, &config, &infra, &steps, &j.Status, &j.Phase, &cancel, &failure,
		&j.LeaseOwner, &j.LeaseToken, &leaseExp, &ttl, &next, &j.Version, &created, &updated)
	err := r.Scan(append(dest, extra...)...)
	if err != nil {
		return nil, err
	}
	j.CancelRequested = cancel != 0
	j.LeaseTTL = time.Duration(ttl) * time.Millisecond
	j.NextRunAt, j.CreatedAt, j.UpdatedAt = fromMS(next), fromMS(created), fromMS(updated)
	if leaseExp.Valid {
		t := fromMS(leaseExp.Int64)
		j.LeaseExpiresAt = &t
	}
	j.Config = json.RawMessage(orDefault(config, "{}"))
	j.Infra = json.RawMessage(orDefault(infra, "{}"))
	if tags.Valid && tags.String != "" && tags.String != "null" && tags.String != "{}" {
		if err := json.Unmarshal([]byte(tags.String), &j.Tags); err != nil {
			return nil, fmt.Errorf("decode tags of %s: %w", j.ID, err)
		}
	}
	if st := orDefault(steps, "[]"); st == "[]" {
		j.Steps = []job.StepRecord{}
	} else if err := json.Unmarshal([]byte(st), &j.Steps); err != nil {
		return nil, fmt.Errorf("decode steps of %s: %w", j.ID, err)
	}
	if failure.Valid && failure.String != "" && failure.String != "null" {
		j.Failure = &job.Failure{}
		if err := json.Unmarshal([]byte(failure.String), j.Failure); err != nil {
			return nil, fmt.Errorf("decode failure of %s: %w", j.ID, err)
		}
	}
	return &j, nil
}

func orDefault(v sql.NullString, def string) string {
	if !v.Valid || v.String == "" {
		return def
	}
	return v.String
}

func jsonText(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func rawText(raw json.RawMessage, def string) string {
	if len(raw) == 0 {
		return def
	}
	return string(raw)
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func (s *Store) CreateJob(ctx context.Context, p *store.CreateJobParams) (*job.Job, error) {
	j := p.Job
	tags, err := jsonText(j.Tags)
	if err != nil {
		return nil, err
	}
	steps, err := jsonText(j.Steps)
	if err != nil {
		return nil, err
	}
	var failure any
	if j.Failure != nil {
		f, err := jsonText(j.Failure)
		if err != nil {
			return nil, err
		}
		failure = f
	}
	js := s.dialect.JSON
	q := fmt.Sprintf(`INSERT INTO provisioning_jobs (id, org_id, space_id, kind, family, provider, mode, name, tags,
		subject_type, subject_id, config, infra, steps, status, phase, cancel_requested, failure, lease_owner,
		lease_token, lease_expires_at, lease_ttl_ms, next_run_at, version, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, %s, $10, $11, %s, %s, %s, $15, $16, 0, %s, '', 0, NULL, $18, $19, 1, $20, $20)
		RETURNING `+JobColumns, js("$9"), js("$12"), js("$13"), js("$14"), js("$17"))
	row := s.q.QueryRowContext(ctx, q, j.ID, j.OrgID, j.SpaceID, j.Kind, j.Family, j.Provider, j.Mode, j.Name, tags,
		j.SubjectType, j.SubjectID, rawText(j.Config, "{}"), rawText(j.Infra, "{}"), steps, j.Status, j.Phase,
		failure, j.LeaseTTL.Milliseconds(), ms(j.NextRunAt), ms(p.Now))
	out, err := scanJob(row)
	if err != nil {
		return nil, fmt.Errorf("insert job: %w", err)
	}
	if out.Status == job.StatusQueued && !out.NextRunAt.After(p.Now) {
		s.wake(ctx)
	}
	return out, nil
}

// reader is where a read outside a transaction goes.
func (s *Store) reader() querier {
	if s.reads != nil && s.tx == nil {
		return s.reads
	}
	return s.q
}

// WithReadPool returns s with job reads served from db, a pool on the same database (see
// Store.reads). The caller closes db after s.
func (s *Store) WithReadPool(db *sql.DB) *Store {
	if s.stmts != nil {
		s.reads = preparedDB{DB: db, c: newStmtCache(db)}
	} else {
		s.reads = db
	}
	return s
}

func (s *Store) GetJob(ctx context.Context, p *store.GetJobParams) (*job.Job, error) {
	q := `SELECT ` + JobColumns + ` FROM provisioning_jobs WHERE id = $1 AND ($2 = '' OR org_id = $2)`
	j, err := scanJob(s.reader().QueryRowContext(ctx, q, p.ID, p.OrgID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get job: %w", err)
	}
	return j, nil
}

func (s *Store) ListJobs(ctx context.Context, p *store.ListJobsParams) (*store.JobPage, error) {
	limit := p.Limit
	if limit <= 0 || limit > 500 {
		limit = 50
	}
	// Newest first; ids are ULIDs, so id order is creation order and makes a stable cursor.
	q := `SELECT ` + JobColumns + ` FROM provisioning_jobs
		WHERE org_id = $1 AND ($2 = '' OR status = $2) AND ($3 = '' OR family = $3)
		AND ($4 = '' OR space_id = $4) AND ($5 = '' OR id < $5)
		ORDER BY id DESC LIMIT $6`
	rows, err := s.reader().QueryContext(ctx, q, p.OrgID, string(p.Status), string(p.Family), p.SpaceID, p.After, limit+1)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	defer rows.Close()
	page := &store.JobPage{}
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
		page.Jobs = append(page.Jobs, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	if len(page.Jobs) > limit {
		page.Jobs = page.Jobs[:limit]
		page.Next = page.Jobs[limit-1].ID
	}
	return page, nil
}

func (s *Store) UpdateJob(ctx context.Context, p *store.UpdateJobParams) (*job.Job, error) {
	if p.Status != nil {
		if action := terminalAction(*p.Status); action != "" {
			return s.auditedTerminal(ctx, p.ID, p.Now, action, func(tx *Store) (*job.Job, error) { return tx.updateJob(ctx, p) })
		}
	}
	return s.updateJob(ctx, p)
}

func (s *Store) updateJob(ctx context.Context, p *store.UpdateJobParams) (*job.Job, error) {
	// Column names come from this fixed list, never from input; values are parameters.
	sets := []string{}
	args := []any{}
	add := func(col string, v any, isJSON bool) {
		args = append(args, v)
		ph := fmt.Sprintf("$%d", len(args))
		if isJSON {
			ph = s.dialect.JSON(ph)
		}
		sets = append(sets, col+" = "+ph)
	}
	if p.Name != nil {
		add("name", *p.Name, false)
	}
	if p.Tags != nil {
		t, err := jsonText(p.Tags)
		if err != nil {
			return nil, err
		}
		add("tags", t, true)
	}
	if p.Status != nil {
		add("status", string(*p.Status), false)
	}
	if p.Phase != nil {
		add("phase", string(*p.Phase), false)
	}
	if p.CancelRequested != nil {
		add("cancel_requested", boolInt(*p.CancelRequested), false)
	}
	if p.Steps != nil {
		t, err := jsonText(p.Steps)
		if err != nil {
			return nil, err
		}
		add("steps", t, true)
	}
	if p.Failure != nil {
		t, err := jsonText(p.Failure)
		if err != nil {
			return nil, err
		}
		add("failure", t, true)
	} else if p.ClearFailure {
		sets = append(sets, "failure = NULL")
	}
	if p.Config != nil {
		add("config", string(p.Config), true)
	}
	if p.NextRunAt != nil {
		add("next_run_at", ms(*p.NextRunAt), false)
	}
	add("updated_at", ms(p.Now), false)
	args = append(args, p.ID, p.OrgID, p.Version)
	n := len(args)
	q := fmt.Sprintf(`UPDATE provisioning_jobs SET %s, version = version + 1
		WHERE id = $%d AND ($%d = '' OR org_id = $%d) AND version = $%d RETURNING `+JobColumns,
		strings.Join(sets, ", "), n-2, n-1, n-1, n)
	j, err := scanJob(s.q.QueryRowContext(ctx, q, args...))
	if errors.Is(err, sql.ErrNoRows) {
		if _, gerr := s.GetJob(ctx, &store.GetJobParams{OrgID: p.OrgID, ID: p.ID}); gerr != nil {
			return nil, gerr
		}
		return nil, store.ErrVersionConflict
	}
	if err != nil {
		return nil, fmt.Errorf("update job: %w", err)
	}
	if j.Status == job.StatusQueued && !j.NextRunAt.After(p.Now) {
		s.wake(ctx)
	}
	return j, nil
}

func (s *Store) ClaimJobs(ctx context.Context, p *store.ClaimJobsParams) ([]*job.Job, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	args := []any{p.Owner, ms(p.Now), p.Limit}
	if s.dialect.Pipeline && s.tx == nil {
		var out []*job.Job
		err := s.withPgx(ctx, func(pc *pgx.Conn) error {
			rows, err := pc.Query(ctx, s.dialect.ClaimSQL, args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			out, err = scanClaimed(rows)
			return err
		})
		if !errors.Is(err, errNotPgx) {
			if err != nil {
				return nil, fmt.Errorf("claim jobs: %w", err)
			}
			return out, nil
		}
	}
	rows, err := s.q.QueryContext(ctx, s.dialect.ClaimSQL, args...)
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	defer rows.Close()
	out, err := scanClaimed(rows)
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	return out, nil
}

// scanClaimed reads a claim's answer, from database/sql or from pgx.
func scanClaimed[R interface {
	scanner
	Next() bool
	Err() error
}](rows R) ([]*job.Job, error) {
	var out []*job.Job
	for rows.Next() {
		var dbNow int64
		var from string
		j, err := scanJobExtra(rows, &dbNow, &from)
		if err != nil {
			return nil, err
		}
		j.DBNow, j.TakenOver = fromMS(dbNow), from == string(job.StatusRunning)
		out = append(out, j)
	}
	return out, rows.Err()
}

func (s *Store) Checkpoint(ctx context.Context, p *store.CheckpointParams) (*job.Job, error) {
	action := terminalAction(p.Status)
	if s.tx != nil {
		// Inside a caller's transaction: write in it, as every other method does.
		if action != "" {
			return s.auditedCheckpoint(ctx, p, action)
		}
		return s.checkpoint(ctx, p)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.submit(&cpRequest{p: p, action: action, done: make(chan struct{})})
}

func (s *Store) checkpoint(ctx context.Context, p *store.CheckpointParams) (*job.Job, error) {
	args, err := checkpointArgs(p)
	if err != nil {
		return nil, err
	}
	return s.checkpointDone(ctx, p, s.q.QueryRowContext(ctx, s.sql.checkpoint, args...))
}

// checkpointArgs are checkpointSQL's parameters for p.
func checkpointArgs(p *store.CheckpointParams) ([]any, error) {
	steps, err := jsonText(p.Steps)
	if err != nil {
		return nil, err
	}
	var failure any
	if p.Failure != nil {
		f, err := jsonText(p.Failure)
		if err != nil {
			return nil, err
		}
		failure = f
	}
	return []any{steps, rawText(p.Infra, "{}"), string(p.Status), string(p.Phase), failure,
		ms(p.NextRunAt), boolInt(p.Release), ms(p.Now), p.ID, p.LeaseToken}, nil
}

// checkpointDone reads checkpointSQL's answer for p: no row means the lease was lost.
func (s *Store) checkpointDone(ctx context.Context, p *store.CheckpointParams, row scanner) (*job.Job, error) {
	j, err := scanLeased(row)
	if errors.Is(err, sql.ErrNoRows) || errors.Is(err, errNoRows) {
		return nil, store.ErrLeaseLost
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", p.ID, err)
	}
	withWritten(j, p)
	s.checkpointed(ctx, p)
	return j, nil
}

// checkpointed wakes claimers after checkpoint p landed, if it made the job due at once. A job
// released to wait for a cloud resource is not due yet: waking everyone for it would only
// cost a claim query per replica.
func (s *Store) checkpointed(ctx context.Context, p *store.CheckpointParams) {
	if p.Release && p.Status == job.StatusQueued && !p.NextRunAt.After(p.Now) {
		s.wake(ctx)
	}
}

// finishSQL writes a job's last step result and its end in one statement. Unless a cancel was
// requested meanwhile, the row ends ($3, lease released) and moves two versions on, the
// result's and the end's, as two checkpoints in one transaction would have; with a cancel
// requested only the result lands (status running, the lease kept and extended, one version
// on) and the job goes on to its teardown. It is fenced as checkpointSQL is. $1 steps,
// $2 infra, $3 the final status, $4 phase, $5 failure, $6 next_run_at, $7 now, $8 id, $9 the
// lease token.
func (s *Store) finishSQL() string {
	js := s.dialect.JSON
	return fmt.Sprintf(`UPDATE provisioning_jobs SET steps = %s, infra = %s,
		status = CASE WHEN cancel_requested = 0 THEN $3 ELSE 'running' END, phase = $4, failure = %s,
		next_run_at = $6,
		lease_owner = CASE WHEN cancel_requested = 0 THEN '' ELSE lease_owner END,
		lease_expires_at = CASE WHEN cancel_requested = 0 THEN NULL
			WHEN lease_expires_at > $7 + lease_ttl_ms THEN lease_expires_at ELSE $7 + lease_ttl_ms END,
		version = version + CASE WHEN cancel_requested = 0 THEN 2 ELSE 1 END, updated_at = $7
		WHERE id = $8 AND lease_token = $9 AND status = 'running'
		RETURNING `+writtenColumns("")+`, `+s.dialect.Clock, js("$1"), js("$2"), js("$5"))
}

// finishArgs are finishSQL's parameters for the end p.
func finishArgs(p *store.CheckpointParams) ([]any, error) {
	args, err := checkpointArgs(p)
	if err != nil {
		return nil, err
	}
	// checkpointArgs without its release flag ($7), which finishSQL decides by itself.
	return append(args[:6:6], args[7:]...), nil
}

// finishDone reads finishSQL's answer for the end p: out is the version with the result,
// ended the end, nil when a cancel stopped it. The result's version never stood alone in the
// row when the end landed; out is then rebuilt from the end for subscribers.
func (s *Store) finishDone(ctx context.Context, p *store.CheckpointParams, row scanner) (out, ended *job.Job, err error) {
	j, err := s.checkpointDone(ctx, p, row)
	if err != nil {
		return nil, nil, err
	}
	out, ended = splitFinish(j)
	return out, ended, nil
}

// splitFinish tells finishSQL's row j apart: the result's version and the end, or j alone
// when a cancel stopped the end.
func splitFinish(j *job.Job) (out, ended *job.Job) {
	if j.Status == job.StatusRunning {
		return j, nil
	}
	mid := *j
	mid.Status, mid.Version = job.StatusRunning, j.Version-1
	mid.Steps = append([]job.StepRecord(nil), j.Steps...)
	return &mid, j
}

func (s *Store) checkpointSQL() string {
	js := s.dialect.JSON
	// The fencing token in the WHERE clause is what makes a worker that lost its lease (paused,
	// partitioned, slow) unable to write: a newer claim has bumped the token. A kept lease is
	// extended, never shortened (see RenewLease).
	return fmt.Sprintf(`UPDATE provisioning_jobs SET steps = %s, infra = %s, status = $3, phase = $4, failure = %s,
		next_run_at = $6,
		lease_owner = CASE WHEN $7 = 1 THEN '' ELSE lease_owner END,
		lease_expires_at = CASE WHEN $7 = 1 THEN NULL
			WHEN lease_expires_at > $8 + lease_ttl_ms THEN lease_expires_at ELSE $8 + lease_ttl_ms END,
		version = version + 1, updated_at = $8
		WHERE id = $9 AND lease_token = $10 AND status = 'running'
		RETURNING `+writtenColumns("")+`, `+s.dialect.Clock, js("$1"), js("$2"), js("$5"))
}

func (s *Store) RenewLease(ctx context.Context, p *store.RenewLeaseParams) (time.Time, error) {
	var exp int64
	// Never shortening the lease makes concurrent extensions (a heartbeat racing a checkpoint)
	// safe in any commit order: the worker may take the latest expiry it was told.
	err := s.q.QueryRowContext(ctx, `UPDATE provisioning_jobs SET lease_expires_at =
			CASE WHEN lease_expires_at > $1 + lease_ttl_ms THEN lease_expires_at ELSE $1 + lease_ttl_ms END
		WHERE id = $2 AND lease_token = $3 AND status = 'running' RETURNING lease_expires_at`,
		ms(p.Now), p.ID, p.LeaseToken).Scan(&exp)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, store.ErrLeaseLost
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("renew lease %s: %w", p.ID, err)
	}
	return fromMS(exp), nil
}

var _ store.Pruner = (*Store)(nil)

// PruneJobs deletes up to p.Limit jobs that are over (see store.Pruner) and were last changed
// before p.Before. Their audit entries stay: the record outlives the row.
func (s *Store) PruneJobs(ctx context.Context, p *store.PruneJobsParams) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	if s.dialect.Pipeline {
		return s.pruneBySubquery(ctx, p.Before, limit)
	}
	n := 0
	// One transaction: the jobs chosen are still over when deleted (an end is for good), and a
	// crash leaves no revision or inspection pointing at a job that is gone.
	err := s.inTx(ctx, func(tx *Store) error {
		ids, err := tx.prunable(ctx, p.Before, limit)
		if err != nil {
			return err
		}
		for len(ids) > 0 {
			chunk := ids[:min(len(ids), pruneChunk)]
			ids = ids[len(chunk):]
			k, err := tx.pruneChunk(ctx, chunk)
			if err != nil {
				return err
			}
			n += k
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("prune jobs: %w", err)
	}
	return n, nil
}

// prunable lists up to limit jobs that are over and were last changed before before, each
// status on its own index range.
func (s *Store) prunable(ctx context.Context, before time.Time, limit int) ([]string, error) {
	rows, err := s.q.QueryContext(ctx, `SELECT id FROM provisioning_jobs WHERE status = 'cancelled' AND updated_at < $1
		UNION ALL
		SELECT id FROM provisioning_jobs WHERE status = 'deleted' AND updated_at < $1
		LIMIT $2`, ms(before), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// pruneChunk is how many jobs one pruning statement names. The statements name their jobs in a
// list of this fixed length (padded), so that each is one prepared statement whatever the
// batch. (A subquery for the jobs that are over had SQLite gather the whole backlog of them for
// each batch; a condition on status beside the list had it walk that index instead of the
// list's keys.)
const pruneChunk = 100

// pruneChunk deletes the jobs ids, their revisions and their inspections first. It runs in
// the caller's transaction.
func (s *Store) pruneChunk(ctx context.Context, ids []string) (int, error) {
	args := make([]any, pruneChunk)
	for i := range args {
		args[i] = ""
		if i < len(ids) {
			args[i] = ids[i]
		}
	}
	list := pruneList()
	for _, table := range []string{"job_revisions", "job_inspections"} {
		if _, err := s.q.ExecContext(ctx, `DELETE FROM `+table+` WHERE job_id IN (`+list+`)`, args...); err != nil {
			return 0, fmt.Errorf("%s: %w", table, err)
		}
	}
	res, err := s.q.ExecContext(ctx, `DELETE FROM provisioning_jobs WHERE id IN (`+list+`)`, args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// pruneBySubquery is PruneJobs on PostgreSQL, which plans a subquery for the jobs that are
// over as a join and needs no list: a pruned job's revisions and inspections go first, for
// every job that may be pruned (this call's batch or a later one), so that a crash between the
// statements leaves no row pointing at a job that is gone.
func (s *Store) pruneBySubquery(ctx context.Context, before time.Time, limit int) (int, error) {
	for _, table := range []string{"job_revisions", "job_inspections"} {
		if _, err := s.q.ExecContext(ctx, `DELETE FROM `+table+` WHERE job_id IN (
			SELECT id FROM provisioning_jobs WHERE status IN ('cancelled', 'deleted') AND updated_at < $1)`, ms(before)); err != nil {
			return 0, fmt.Errorf("prune jobs: %s: %w", table, err)
		}
	}
	res, err := s.q.ExecContext(ctx, `DELETE FROM provisioning_jobs WHERE id IN (
		SELECT id FROM provisioning_jobs WHERE status = 'cancelled' AND updated_at < $1
		UNION ALL
		SELECT id FROM provisioning_jobs WHERE status = 'deleted' AND updated_at < $1
		LIMIT $2)`, ms(before), limit)
	if err != nil {
		return 0, fmt.Errorf("prune jobs: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("prune jobs: %w", err)
	}
	return int(n), nil
}

// pruneList is the placeholder list $1 … $pruneChunk.
func pruneList() string {
	var b strings.Builder
	for i := range pruneChunk {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "$%d", i+1)
	}
	return b.String()
}

// inTx runs fn on a store bound to one transaction, or on s if it already is.
func (s *Store) inTx(ctx context.Context, fn func(tx *Store) error) error {
	if s.tx != nil {
		return fn(s)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op
	ts := s.bound(s.txQuerier(tx))
	if err := fn(ts); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if ts.tx.wake {
		s.wake(ctx)
	}
	return nil
}

func (s *Store) CountJobs(ctx context.Context) (map[job.Status]int, error) {
	rows, err := s.q.QueryContext(ctx, `SELECT status, COUNT(*) FROM provisioning_jobs GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	defer rows.Close()
	out := map[job.Status]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("count jobs: %w", err)
		}
		out[job.Status(st)] = n
	}
	return out, rows.Err()
}

// wake tells local subscribers, and other replicas where the dialect can, that work may be due.
func (s *Store) wake(ctx context.Context) {
	if s.tx != nil {
		s.tx.wake = true // after the commit, or the woken claimer finds nothing
		return
	}
	s.Broadcast()
	if s.dialect.Notify != nil {
		// A lost notification only delays other replicas until their next poll.
		_ = s.dialect.Notify(ctx, s.db)
	}
}

// Broadcast signals local subscribers without notifying other replicas (the PostgreSQL
// listener calls it when a notification arrives).
func (s *Store) Broadcast() {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	for ch := range s.hub.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (s *Store) Wakeups(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	s.hub.mu.Lock()
	s.hub.subs[ch] = struct{}{}
	s.hub.mu.Unlock()
	go func() {
		<-ctx.Done()
		s.hub.mu.Lock()
		delete(s.hub.subs, ch)
		s.hub.mu.Unlock()
	}()
	return ch
}
