package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/store"
)

// maxBatch bounds how many checkpoints share one transaction, so that one commit never holds
// the writer for long.
const maxBatch = 128

// batchTimeout bounds one group commit; a checkpoint's caller waits for its batch.
const batchTimeout = 30 * time.Second

// batcher group-commits checkpoints from many workers. A checkpoint that arrives while a
// batch is being written waits; the ones that piled up meanwhile are then written together in
// one transaction, one fenced UPDATE per job, so the database syncs its log once for all of
// them. Fencing is unchanged: each row's UPDATE carries its own lease token, and a row whose
// token moved on writes nothing and tells only its own caller ErrLeaseLost. A checkpoint that
// arrives when nothing is being written goes out at once, on its own, as before.
//
// On a database that syncs its log on every commit (PostgreSQL with its stock settings),
// several batches may be in flight at once: the server folds concurrent commits into one
// sync, and one batch in flight would cap the engine at the serial commit rate.
type batcher struct {
	mu       sync.Mutex
	pending  []*cpRequest
	running  int
	inFlight int // at most this many batches at once
}

type cpRequest struct {
	p      *store.CheckpointParams
	action string // the audit action for a job's end; "" for progress
	out    *job.Job
	err    error
	done   chan struct{}
	// end, if set, is the job's end, written after p in the same transaction unless a cancel
	// was requested; endAction is its audit action, endOut its result (nil: not written).
	end       *store.CheckpointParams
	endAction string
	endOut    *job.Job
}

// submit hands r to the batcher and waits for its result.
func (s *Store) submit(r *cpRequest) (*job.Job, error) {
	b := s.batch
	b.mu.Lock()
	b.pending = append(b.pending, r)
	if b.running < max(b.inFlight, 1) {
		b.running++
		go s.drain()
	}
	b.mu.Unlock()
	<-r.done
	return r.out, r.err
}

// drain writes batches until none is pending. It runs on its own goroutine, started on
// demand and ended when idle, so the store needs no lifecycle of its own for it.
func (s *Store) drain() {
	b := s.batch
	for {
		b.mu.Lock()
		n := min(len(b.pending), maxBatch)
		if n == 0 {
			b.running--
			b.mu.Unlock()
			return
		}
		reqs := append([]*cpRequest(nil), b.pending[:n]...)
		b.pending = append(b.pending[:0], b.pending[n:]...)
		b.mu.Unlock()
		s.writeBatch(reqs)
		for _, r := range reqs {
			close(r.done)
		}
	}
}

func (s *Store) writeBatch(reqs []*cpRequest) {
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	if len(reqs) == 1 {
		reqs[0].out, reqs[0].err = s.checkpointNow(ctx, reqs[0])
		return
	}
	write := s.writeTogether
	if s.dialect.Pipeline {
		write = s.writePipelined
	}
	if err := write(ctx, reqs); err != nil {
		// One statement failed (not a lost lease: that is a row not updated, no error), and
		// with it the transaction. Each checkpoint is written alone, so that only the one at
		// fault reports an error.
		for _, r := range reqs {
			r.out, r.err = s.checkpointNow(ctx, r)
		}
	}
}

// checkpointNow writes one checkpoint (with its end, if any) outside any batch.
func (s *Store) checkpointNow(ctx context.Context, r *cpRequest) (*job.Job, error) {
	if r.end != nil {
		if s.tx != nil {
			out, err := s.checkpoint(ctx, r.p)
			if err != nil {
				return nil, err
			}
			r.endOut, err = s.writeEnd(ctx, r.end, r.endAction)
			return out, err
		}
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return nil, fmt.Errorf("begin: %w", err)
		}
		defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op
		ts := &Store{db: s.db, q: s.txQuerier(tx), dialect: s.dialect, hub: s.hub, batch: s.batch, stmts: s.stmts, tx: &txState{}}
		out, err := ts.checkpoint(ctx, r.p)
		if err != nil {
			return nil, err
		}
		end, err := ts.writeEnd(ctx, r.end, r.endAction)
		if err != nil {
			return nil, err
		}
		if err := tx.Commit(); err != nil {
			return nil, fmt.Errorf("commit: %w", err)
		}
		r.endOut = end
		if ts.tx.wake {
			s.wake(ctx)
		}
		return out, nil
	}
	if r.action != "" {
		return s.auditedTerminal(ctx, r.p.ID, r.p.Now, r.action, func(tx *Store) (*job.Job, error) { return tx.checkpoint(ctx, r.p) })
	}
	return s.checkpoint(ctx, r.p)
}

// writeEnd writes a job's end on a store bound to a transaction, only if no cancel was
// requested, with its audit entry; nil, nil when a cancel was.
func (s *Store) writeEnd(ctx context.Context, p *store.CheckpointParams, action string) (*job.Job, error) {
	args, err := checkpointArgs(p)
	if err != nil {
		return nil, err
	}
	j, err := s.checkpointDone(ctx, p, s.q.QueryRowContext(ctx, s.endSQL(), args...))
	if errors.Is(err, store.ErrLeaseLost) {
		return nil, nil // the first write of the pair held the lease: a cancel was requested
	}
	if err != nil {
		return nil, err
	}
	if err := s.insertAudit(ctx, terminalEntry(j, action, p.Now)); err != nil {
		return nil, err
	}
	return j, nil
}

// CheckpointThenEnd implements store.Finisher through the group commit.
func (s *Store) CheckpointThenEnd(ctx context.Context, first, end *store.CheckpointParams) (*job.Job, *job.Job, error) {
	action := terminalAction(end.Status)
	if action == "" || terminalAction(first.Status) != "" {
		return nil, nil, fmt.Errorf("checkpoint then end: %s then %s is not a step's result then an end", first.Status, end.Status)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	r := &cpRequest{p: first, end: end, endAction: action, done: make(chan struct{})}
	if s.tx != nil {
		out, err := s.checkpointNow(ctx, r)
		return out, r.endOut, err
	}
	out, err := s.submit(r)
	return out, r.endOut, err
}

// writeTogether writes reqs in one transaction. A lost lease is a result for its own request
// only; any other error undoes the whole batch and is returned.
func (s *Store) writeTogether(ctx context.Context, reqs []*cpRequest) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op
	ts := &Store{db: s.db, q: s.txQuerier(tx), dialect: s.dialect, hub: s.hub, batch: s.batch, stmts: s.stmts, tx: &txState{}}
	outs := make([]*job.Job, len(reqs))
	errs := make([]error, len(reqs))
	ends := make([]*job.Job, len(reqs))
	for i, r := range reqs {
		if r.end != nil {
			outs[i], errs[i] = ts.checkpoint(ctx, r.p)
			if errs[i] == nil {
				if ends[i], errs[i] = ts.writeEnd(ctx, r.end, r.endAction); errs[i] != nil {
					return errs[i]
				}
			}
		} else if r.action == "" {
			outs[i], errs[i] = ts.checkpoint(ctx, r.p)
		} else {
			// The job's end and its audit entry commit together, as auditedTerminal does.
			outs[i], errs[i] = ts.auditedTerminal(ctx, r.p.ID, r.p.Now, r.action, func(tx *Store) (*job.Job, error) { return tx.checkpoint(ctx, r.p) })
		}
		if errs[i] != nil && !errors.Is(errs[i], store.ErrLeaseLost) {
			return errs[i]
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	for i, r := range reqs {
		r.out, r.err, r.endOut = outs[i], errs[i], ends[i]
	}
	if ts.tx.wake {
		s.wake(ctx)
	}
	return nil
}

// errNoRows is what a pipelined query's row reports when the fenced UPDATE matched nothing.
var errNoRows = pgx.ErrNoRows

// writePipelined is writeTogether for PostgreSQL over pgx: the batch's statements go out in
// two network round trips instead of one per statement. The first carries BEGIN and every
// fenced UPDATE; the second the audit entries of the jobs that ended (they need the rows the
// UPDATEs returned) and COMMIT. The statements and their fencing are writeTogether's.
func (s *Store) writePipelined(ctx context.Context, reqs []*cpRequest) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return s.writeTogether(ctx, reqs)
		}
		pc := sc.Conn()
		rollback := func() { _, _ = pc.Exec(context.Background(), "ROLLBACK") }
		q := s.checkpointSQL()
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		for _, r := range reqs {
			args, err := checkpointArgs(r.p)
			if err != nil {
				return err
			}
			b.Queue(q, args...)
			if r.end != nil {
				// Runs after the first in the same transaction; it matches nothing if the
				// first was refused (the token moved) or a cancel was requested.
				eargs, err := checkpointArgs(r.end)
				if err != nil {
					return err
				}
				b.Queue(s.endSQL(), eargs...)
			}
		}
		br := pc.SendBatch(ctx, b)
		outs := make([]*job.Job, len(reqs))
		errs := make([]error, len(reqs))
		if _, err := br.Exec(); err != nil {
			br.Close()
			rollback()
			return fmt.Errorf("begin: %w", err)
		}
		// Wake-ups wait for the commit, as in any transaction.
		ts := &Store{db: s.db, q: s.q, dialect: s.dialect, hub: s.hub, batch: s.batch, stmts: s.stmts, tx: &txState{}}
		ends := make([]*job.Job, len(reqs))
		for i, r := range reqs {
			outs[i], errs[i] = ts.checkpointDone(ctx, r.p, br.QueryRow())
			if errs[i] != nil && !errors.Is(errs[i], store.ErrLeaseLost) {
				br.Close()
				rollback()
				return errs[i]
			}
			if r.end != nil {
				end, err := ts.checkpointDone(ctx, r.end, br.QueryRow())
				switch {
				case err == nil && errs[i] == nil:
					ends[i] = end
				case err == nil, err != nil && !errors.Is(err, store.ErrLeaseLost):
					// The end cannot land when the first did not; any other error undoes all.
					br.Close()
					rollback()
					return fmt.Errorf("checkpoint %s then end: %v", r.p.ID, err)
				}
			}
		}
		if err := br.Close(); err != nil {
			rollback()
			return err
		}
		b = &pgx.Batch{}
		for i, r := range reqs {
			done, action := outs[i], r.action
			if r.end != nil {
				done, action = ends[i], r.endAction
			}
			if action == "" || errs[i] != nil || done == nil {
				continue
			}
			e := terminalEntry(done, action, r.p.Now)
			if err := readyAudit(e); err != nil {
				rollback()
				return err
			}
			var meta any
			if len(e.Metadata) > 0 {
				meta = string(e.Metadata)
			}
			b.Queue(insertAuditSQL, e.ID, e.OrgID, e.Scope, e.Action, e.Actor, e.ResourceType, e.ResourceID, meta, ms(e.CreatedAt))
		}
		b.Queue("COMMIT")
		if err := pc.SendBatch(ctx, b).Close(); err != nil {
			rollback()
			return fmt.Errorf("audit and commit: %w", err)
		}
		for i, r := range reqs {
			r.out, r.err, r.endOut = outs[i], errs[i], ends[i]
		}
		if ts.tx.wake {
			s.wake(ctx)
		}
		return nil
	})
}
