package sqlstore

import (
	"context"
	"fmt"

	"github.com/groundworkhq/groundwork/internal/store"
)

// The store keeps the remediation timeline and notification deliveries.
var _ store.RemediationTimeline = (*Store)(nil)

// AppendEvent adds e unless the job already has an event of its type for its step.
func (s *Store) AppendEvent(ctx context.Context, e store.RemediationEvent) (bool, error) {
	res, err := s.q.ExecContext(ctx, `INSERT INTO remediation_audit (org_id, job_id, step_id, step_name, event_type,
		actor, reason, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (job_id, step_id, event_type) DO NOTHING`,
		e.OrgID, e.JobID, e.StepID, e.StepName, e.EventType, e.Actor, e.Reason, ms(e.CreatedAt))
	if err != nil {
		return false, fmt.Errorf("append remediation event: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("append remediation event: %w", err)
	}
	return n == 1, nil
}

// ListEvents returns a job's timeline in the order it was written.
func (s *Store) ListEvents(ctx context.Context, orgID, jobID string) ([]store.RemediationEvent, error) {
	rows, err := s.q.QueryContext(ctx, `SELECT job_id, org_id, step_id, step_name, event_type, actor, reason, created_at
		FROM remediation_audit WHERE org_id = $1 AND job_id = $2 ORDER BY seq`, orgID, jobID)
	if err != nil {
		return nil, fmt.Errorf("list remediation events: %w", err)
	}
	defer rows.Close()
	out := []store.RemediationEvent{}
	for rows.Next() {
		var e store.RemediationEvent
		var created int64
		if err := rows.Scan(&e.JobID, &e.OrgID, &e.StepID, &e.StepName, &e.EventType, &e.Actor, &e.Reason, &created); err != nil {
			return nil, fmt.Errorf("list remediation events: %w", err)
		}
		e.CreatedAt = fromMS(created)
		out = append(out, e)
	}
	return out, rows.Err()
}

// Delivered reports whether the notification reached channel.
func (s *Store) Delivered(ctx context.Context, jobID, stepID, kind, channel string) (bool, error) {
	var n int
	err := s.q.QueryRowContext(ctx, `SELECT COUNT(*) FROM remediation_notifications WHERE job_id = $1 AND step_id = $2
		AND kind = $3 AND channel = $4 AND status = 'delivered'`, jobID, stepID, kind, channel).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("read notification delivery: %w", err)
	}
	return n > 0, nil
}

// RecordDelivery writes (or overwrites) the delivery record of one notification on one channel.
func (s *Store) RecordDelivery(ctx context.Context, d store.RemediationDelivery) error {
	_, err := s.q.ExecContext(ctx, `INSERT INTO remediation_notifications (job_id, org_id, step_id, kind, channel,
		status, attempts, last_error, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (job_id, step_id, kind, channel) DO UPDATE SET status = excluded.status,
		attempts = remediation_notifications.attempts + excluded.attempts, last_error = excluded.last_error,
		updated_at = excluded.updated_at`,
		d.JobID, d.OrgID, d.StepID, d.Kind, d.Channel, d.Status, d.Attempts, d.LastError, ms(d.UpdatedAt))
	if err != nil {
		return fmt.Errorf("record notification delivery: %w", err)
	}
	return nil
}

// ListDeliveries returns a job's notification records.
func (s *Store) ListDeliveries(ctx context.Context, orgID, jobID string) ([]store.RemediationDelivery, error) {
	rows, err := s.q.QueryContext(ctx, `SELECT job_id, org_id, step_id, kind, channel, status, attempts, last_error, updated_at
		FROM remediation_notifications WHERE org_id = $1 AND job_id = $2 ORDER BY updated_at, step_id, kind, channel`, orgID, jobID)
	if err != nil {
		return nil, fmt.Errorf("list notification deliveries: %w", err)
	}
	defer rows.Close()
	out := []store.RemediationDelivery{}
	for rows.Next() {
		var d store.RemediationDelivery
		var at int64
		if err := rows.Scan(&d.JobID, &d.OrgID, &d.StepID, &d.Kind, &d.Channel, &d.Status, &d.Attempts, &d.LastError, &at); err != nil {
			return nil, fmt.Errorf("list notification deliveries: %w", err)
		}
		d.UpdatedAt = fromMS(at)
		out = append(out, d)
	}
	return out, rows.Err()
}
