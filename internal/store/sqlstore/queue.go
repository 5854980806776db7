package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// OldestDue returns when the longest-waiting queued job became due, if any job is queued and
// due at now. The due index (status, next_run_at) answers it without a scan.
func (s *Store) OldestDue(ctx context.Context, now time.Time) (time.Time, bool, error) {
	var v sql.NullInt64
	if err := s.q.QueryRowContext(ctx, `SELECT MIN(next_run_at) FROM provisioning_jobs WHERE status = 'queued' AND next_run_at <= $1`,
		ms(now)).Scan(&v); err != nil {
		return time.Time{}, false, fmt.Errorf("oldest due job: %w", err)
	}
	if !v.Valid {
		return time.Time{}, false, nil
	}
	return fromMS(v.Int64), true, nil
}
