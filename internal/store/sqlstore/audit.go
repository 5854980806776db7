package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/store"
)

type txState struct{ wake bool }

// Audited runs fn on a copy of the store bound to one transaction, appends e in it and
// commits. Called on a copy already in a transaction, it joins that transaction.
func (s *Store) Audited(ctx context.Context, e *store.AuditEntry, fn func(tx store.Tx) error) error {
	return s.inTx(ctx, func(tx *Store) error {
		if err := fn(tx); err != nil {
			return err
		}
		return tx.insertAudit(ctx, e)
	})
}

const insertAuditSQL = `INSERT INTO audit_logs (id, org_id, scope, action, actor, resource_type,
		resource_id, metadata, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`

func (s *Store) insertAudit(ctx context.Context, e *store.AuditEntry) error {
	if err := readyAudit(e); err != nil {
		return err
	}
	var meta any
	if len(e.Metadata) > 0 {
		meta = string(e.Metadata)
	}
	_, err := s.q.ExecContext(ctx, insertAuditSQL,
		e.ID, e.OrgID, e.Scope, e.Action, e.Actor, e.ResourceType, e.ResourceID, meta, ms(e.CreatedAt))
	if err != nil {
		return fmt.Errorf("write audit entry: %w", err)
	}
	return nil
}

// readyAudit checks e and gives it an id.
func readyAudit(e *store.AuditEntry) error {
	if e == nil {
		return errors.New("audited change without an audit entry")
	}
	if err := e.Validate(); err != nil {
		return err
	}
	if e.ID == "" {
		e.ID = "aud_" + ulid.Make().String()
	}
	if e.CreatedAt.IsZero() {
		return fmt.Errorf("audit entry %s has no time", e.Action)
	}
	return nil
}

// ListAudit pages through an org's entries, newest first.
func (s *Store) ListAudit(ctx context.Context, f *store.AuditFilter) ([]*store.AuditEntry, int, error) {
	where := []string{"org_id = $1"}
	args := []any{f.OrgID}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if len(f.Scopes) > 0 {
		var ph []string
		for _, sc := range f.Scopes {
			args = append(args, sc)
			ph = append(ph, fmt.Sprintf("$%d", len(args)))
		}
		where = append(where, "scope IN ("+strings.Join(ph, ", ")+")")
	}
	for _, c := range []struct{ col, v string }{{"action", f.Action}, {"actor", f.Actor},
		{"resource_type", f.ResourceType}, {"resource_id", f.ResourceID}} {
		if c.v != "" {
			add(c.col+" = $%d", c.v)
		}
	}
	if !f.From.IsZero() {
		add("created_at >= $%d", ms(f.From))
	}
	if !f.To.IsZero() {
		add("created_at < $%d", ms(f.To))
	}
	cond := strings.Join(where, " AND ")
	var total int
	if err := s.q.QueryRowContext(ctx, `SELECT COUNT(*) FROM audit_logs WHERE `+cond, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count audit entries: %w", err)
	}
	limit := f.Limit
	if limit <= 0 || limit > store.AuditMaxLimit {
		limit = store.AuditDefaultLimit
	}
	page := max(f.Page, 1)
	args = append(args, limit, (page-1)*limit)
	rows, err := s.q.QueryContext(ctx, fmt.Sprintf(`SELECT id, org_id, scope, action, actor, resource_type, resource_id,
		metadata, created_at FROM audit_logs WHERE %s ORDER BY created_at DESC, id DESC LIMIT $%d OFFSET $%d`,
		cond, len(args)-1, len(args)), args...)
	if err != nil {
		return nil, 0, fmt.Errorf("list audit entries: %w", err)
	}
	defer rows.Close()
	out := []*store.AuditEntry{}
	for rows.Next() {
		var e store.AuditEntry
		var meta sql.NullString
		var created int64
		if err := rows.Scan(&e.ID, &e.OrgID, &e.Scope, &e.Action, &e.Actor, &e.ResourceType, &e.ResourceID,
			&meta, &created); err != nil {
			return nil, 0, fmt.Errorf("list audit entries: %w", err)
		}
		if meta.Valid && meta.String != "" {
			e.Metadata = []byte(meta.String)
		}
		e.CreatedAt = fromMS(created)
		out = append(out, &e)
	}
	return out, total, rows.Err()
}

// terminalAction names the audit action of a checkpoint that ends a job, or "" for one that
// does not: the engine's own changes are on the record at least where a job settles.
func terminalAction(st job.Status) string {
	switch st {
	case job.StatusCompleted, job.StatusFailed, job.StatusCancelled, job.StatusDeleted:
		return "provisioning-job." + string(st)
	}
	return ""
}

// auditedCheckpoint writes a terminal checkpoint and its audit entry in one transaction.
func (s *Store) auditedCheckpoint(ctx context.Context, p *store.CheckpointParams, action string) (*job.Job, error) {
	return s.auditedTerminal(ctx, p.ID, p.Now, action, func(tx *Store) (*job.Job, error) { return tx.checkpoint(ctx, p) })
}

// auditedTerminal runs change, which ends job id, and writes the engine's audit entry for
// that end in the same transaction. A job also ends by an update (cancelling a job that never
// finished a step, say a failed one being deleted): it gets the same entry as one ended by a
// checkpoint, so the record does not depend on the path taken.
func (s *Store) auditedTerminal(ctx context.Context, id string, now time.Time, action string, change func(tx *Store) (*job.Job, error)) (*job.Job, error) {
	var out *job.Job
	e := &store.AuditEntry{Scope: store.AuditScopeProvisioning, Action: action, Actor: store.AuditActorEngine,
		ResourceType: "provisioning-job", ResourceID: id, CreatedAt: now}
	err := s.Audited(ctx, e, func(tx store.Tx) error {
		j, err := change(tx.(*Store))
		if err != nil {
			return err
		}
		out = j
		*e = *terminalEntry(j, action, now)
		return nil
	})
	return out, err
}

// terminalMeta is the metadata of a job's end in the audit log.
type terminalMeta struct {
	FailureClass *job.FailureClass `json:"failureClass,omitempty"`
	FailureCode  *string           `json:"failureCode,omitempty"`
	Family       job.Family        `json:"family"`
	Phase        job.Phase         `json:"phase"`
	SpaceID      string            `json:"spaceID"`
}

// terminalEntry is the engine's audit entry for job j ending with action.
func terminalEntry(j *job.Job, action string, now time.Time) *store.AuditEntry {
	// A struct, not a map: every job's end writes one, and a map's encoding (reflection over
	// sorted keys) cost several times as much. The fields are in the order a map's keys were.
	meta := terminalMeta{Family: j.Family, SpaceID: j.SpaceID, Phase: j.Phase}
	if j.Failure != nil {
		meta.FailureClass, meta.FailureCode = &j.Failure.Class, &j.Failure.Code
	}
	resource := "provisioning-job"
	if j.Kind == job.KindRemediation {
		// A remediation's end is recorded under the name its API calls use.
		resource = "remediation-job"
		action = "remediation-job." + strings.TrimPrefix(action, "provisioning-job.")
	}
	e := store.NewAuditEntry(j.OrgID, store.AuditScopeProvisioning, action, store.AuditActorEngine, resource, j.ID, meta)
	e.CreatedAt = now
	return e
}

// isUnique reports whether err is a unique-constraint violation on either database.
func isUnique(err error) bool {
	if err == nil {
		return false
	}
	m := err.Error()
	return strings.Contains(m, "UNIQUE constraint failed") || strings.Contains(m, "SQLSTATE 23505") ||
		strings.Contains(m, "constraint failed: UNIQUE")
}
