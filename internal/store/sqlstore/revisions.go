package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/groundworkhq/groundwork/internal/store"
)

var _ store.JobRevisions = (*Store)(nil)

// AddRevision implements store.JobRevisions.
func (s *Store) AddRevision(ctx context.Context, r store.JobRevision) error {
	_, err := s.q.ExecContext(ctx, `INSERT INTO job_revisions (org_id, job_id, number, config, infra, status, reason, actor, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		r.OrgID, r.JobID, r.Number, string(r.Config), string(r.Infra), string(r.Status), r.Reason, r.Actor, ms(r.CreatedAt), ms(r.CreatedAt))
	if isUnique(err) {
		return fmt.Errorf("revision %d of %s: %w", r.Number, r.JobID, store.ErrVersionConflict)
	}
	if err != nil {
		return fmt.Errorf("add revision %d of %s: %w", r.Number, r.JobID, err)
	}
	return nil
}

// ListRevisions implements store.JobRevisions.
func (s *Store) ListRevisions(ctx context.Context, orgID, jobID string) ([]store.JobRevision, error) {
	rows, err := s.q.QueryContext(ctx, `SELECT org_id, job_id, number, config, infra, status, reason, actor, created_at, updated_at
		FROM job_revisions WHERE org_id = $1 AND job_id = $2 ORDER BY number`, orgID, jobID)
	if err != nil {
		return nil, fmt.Errorf("list revisions: %w", err)
	}
	defer rows.Close()
	out := []store.JobRevision{}
	for rows.Next() {
		var (
			r                store.JobRevision
			config, infra    string
			created, updated int64
		)
		if err := rows.Scan(&r.OrgID, &r.JobID, &r.Number, &config, &infra, &r.Status, &r.Reason, &r.Actor, &created, &updated); err != nil {
			return nil, fmt.Errorf("list revisions: %w", err)
		}
		r.Config, r.Infra = []byte(config), []byte(infra)
		r.CreatedAt, r.UpdatedAt = fromMS(created), fromMS(updated)
		out = append(out, r)
	}
	return out, rows.Err()
}

// SetRevisionStatus implements store.JobRevisions; a revision that does not exist is
// store.ErrNotFound.
func (s *Store) SetRevisionStatus(ctx context.Context, orgID, jobID string, number int, status store.RevisionStatus, now time.Time) error {
	res, err := s.q.ExecContext(ctx, `UPDATE job_revisions SET status = $1, updated_at = $2 WHERE org_id = $3 AND job_id = $4 AND number = $5`,
		string(status), ms(now), orgID, jobID, number)
	if err != nil {
		return fmt.Errorf("set revision %d of %s: %w", number, jobID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return fmt.Errorf("revision %d of %s: %w", number, jobID, store.ErrNotFound)
	}
	return nil
}
