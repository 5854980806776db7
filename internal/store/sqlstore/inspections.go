package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/store"
)

// The store keeps each job's latest drift inspection.
var _ store.Inspections = (*Store)(nil)

// RecordInspection upserts the job's latest inspection; the next-inspect time is left as the
// last claim set it.
func (s *Store) RecordInspection(ctx context.Context, in *job.Inspection) error {
	drift := in.Drift
	if drift == nil {
		drift = []job.Drift{}
	}
	b, err := json.Marshal(drift)
	if err != nil {
		return fmt.Errorf("record inspection: %w", err)
	}
	_, err = s.q.ExecContext(ctx, `INSERT INTO job_inspections (job_id, org_id, space_id, drift, drift_count, inspected_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (job_id) DO UPDATE SET space_id = excluded.space_id, drift = excluded.drift,
		drift_count = excluded.drift_count, inspected_at = excluded.inspected_at
		WHERE job_inspections.org_id = excluded.org_id`,
		in.JobID, in.OrgID, in.SpaceID, string(b), len(drift), ms(in.InspectedAt))
	if err != nil {
		return fmt.Errorf("record inspection: %w", err)
	}
	return nil
}

// GetInspection reads the job's latest inspection within the org.
func (s *Store) GetInspection(ctx context.Context, orgID, jobID string) (*job.Inspection, error) {
	var raw string
	var at sql.NullInt64
	in := &job.Inspection{JobID: jobID, OrgID: orgID}
	err := s.q.QueryRowContext(ctx, `SELECT space_id, drift, inspected_at FROM job_inspections
		WHERE job_id = $1 AND org_id = $2`, jobID, orgID).Scan(&in.SpaceID, &raw, &at)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !at.Valid) {
		// A row that only holds a schedule claim has no inspection yet.
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get inspection: %w", err)
	}
	if err := json.Unmarshal([]byte(raw), &in.Drift); err != nil {
		return nil, fmt.Errorf("get inspection: drift: %w", err)
	}
	in.InspectedAt = fromMS(at.Int64)
	return in, nil
}

// ClaimInspection is one upsert whose update only happens while the old next-inspect time
// is due: the database serialises racing claimers on the row, and only the first sees it due.
func (s *Store) ClaimInspection(ctx context.Context, orgID, jobID string, now, next time.Time) (bool, error) {
	res, err := s.q.ExecContext(ctx, `INSERT INTO job_inspections (job_id, org_id, next_inspect_at) VALUES ($1, $2, $3)
		ON CONFLICT (job_id) DO UPDATE SET next_inspect_at = excluded.next_inspect_at
		WHERE job_inspections.next_inspect_at <= $4 AND job_inspections.org_id = excluded.org_id`,
		jobID, orgID, ms(next), ms(now))
	if err != nil {
		return false, fmt.Errorf("claim inspection: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("claim inspection: %w", err)
	}
	return n == 1, nil
}

// DriftCounts sums drift per org and space over the jobs that are still completed: a job
// torn down since its inspection no longer stands for resources that can drift.
func (s *Store) DriftCounts(ctx context.Context) ([]store.DriftCount, error) {
	rows, err := s.q.QueryContext(ctx, `SELECT i.org_id, i.space_id, CAST(SUM(i.drift_count) AS BIGINT) FROM job_inspections i
		JOIN provisioning_jobs j ON j.id = i.job_id AND j.org_id = i.org_id
		WHERE i.inspected_at IS NOT NULL AND j.status = 'completed'
		GROUP BY i.org_id, i.space_id ORDER BY i.org_id, i.space_id`)
	if err != nil {
		return nil, fmt.Errorf("drift counts: %w", err)
	}
	defer rows.Close()
	var out []store.DriftCount
	for rows.Next() {
		var c store.DriftCount
		if err := rows.Scan(&c.OrgID, &c.SpaceID, &c.Fields); err != nil {
			return nil, fmt.Errorf("drift counts: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}
