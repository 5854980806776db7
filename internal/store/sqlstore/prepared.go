package sqlstore

import (
	"context"
	"database/sql"
	"sync"
)

// maxPrepared bounds the statement cache; queries built from optional filters have a few
// variants each, and past the bound a query simply runs unprepared.
const maxPrepared = 256

// stmtCache keeps each query text prepared once, so the database parses and plans the
// engine's hot statements (claim, checkpoint, audit insert) once instead of on every call. On
// SQLite, parsing was the largest share of the engine's CPU time.
type stmtCache struct {
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

func newStmtCache(db *sql.DB) *stmtCache { return &stmtCache{db: db, m: map[string]*sql.Stmt{}} }

// get returns q prepared, preparing it if prepare is true; nil means run it unprepared.
func (c *stmtCache) get(ctx context.Context, q string, prepare bool) *sql.Stmt {
	c.mu.Lock()
	st, ok := c.m[q]
	full := len(c.m) >= maxPrepared
	c.mu.Unlock()
	if ok || !prepare || full {
		return st
	}
	// Prepared without the lock held: on SQLite this waits for the one connection, which a
	// transaction reading the cache may hold.
	st, err := c.db.PrepareContext(ctx, q)
	if err != nil {
		return nil // the unprepared call reports the error in context
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.m[q]; ok {
		st.Close()
		return prev
	}
	c.m[q] = st
	return st
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.m {
		st.Close()
		delete(c.m, q)
	}
}

// preparedDB runs queries on the pool through the cache.
type preparedDB struct {
	*sql.DB
	c *stmtCache
}

func (p preparedDB) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if st := p.c.get(ctx, q, true); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return p.DB.ExecContext(ctx, q, args...)
}

func (p preparedDB) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if st := p.c.get(ctx, q, true); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return p.DB.QueryContext(ctx, q, args...)
}

func (p preparedDB) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if st := p.c.get(ctx, q, true); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return p.DB.QueryRowContext(ctx, q, args...)
}

// preparedTx runs queries in a transaction, using a statement the cache already holds. It
// never prepares one itself: on SQLite the transaction holds the only connection, so preparing
// on the pool would wait for the transaction to end.
type preparedTx struct {
	*sql.Tx
	c *stmtCache
}

func (p preparedTx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if st := p.c.get(ctx, q, false); st != nil {
		return p.Tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return p.Tx.ExecContext(ctx, q, args...)
}

func (p preparedTx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if st := p.c.get(ctx, q, false); st != nil {
		return p.Tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return p.Tx.QueryContext(ctx, q, args...)
}

func (p preparedTx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if st := p.c.get(ctx, q, false); st != nil {
		return p.Tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return p.Tx.QueryRowContext(ctx, q, args...)
}

// txQuerier is what a copy of the store bound to tx runs its queries on.
func (s *Store) txQuerier(tx *sql.Tx) querier {
	if s.stmts == nil {
		return tx
	}
	return preparedTx{Tx: tx, c: s.stmts}
}
