package sqlstore

import (
	"context"
	"fmt"

	"github.com/groundworkhq/groundwork/internal/store"
)

// ClusterSpaces lists the kubernetes spaces of every org whose config holds a registered
// cluster (a "cluster" key). The reachability checker walks them; it is install-wide, like the
// engine, so it takes no org.
func (s *Store) ClusterSpaces(ctx context.Context) ([]*store.Space, error) {
	// The JSON test is a LIKE on the stored text so that one query serves SQLite and PostgreSQL
	// (jsonb renders `"cluster": {` with a space, SQLite keeps what was written).
	rows, err := s.q.QueryContext(ctx, `SELECT `+spaceColumns+` FROM spaces
		WHERE space_type = 'kubernetes' AND CAST(config AS TEXT) LIKE '%"cluster"%' ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list cluster spaces: %w", err)
	}
	defer rows.Close()
	out := []*store.Space{}
	for rows.Next() {
		sp, err := scanSpace(rows)
		if err != nil {
			return nil, fmt.Errorf("list cluster spaces: %w", err)
		}
		out = append(out, sp)
	}
	return out, rows.Err()
}

// SetSpaceStatus records a space's observed status ("ready", "unreachable"). It reports whether
// the status changed, so the caller logs transitions only. A space deleted meanwhile is
// store.ErrNotFound.
func (s *Store) SetSpaceStatus(ctx context.Context, id, status string) (bool, error) {
	res, err := s.q.ExecContext(ctx, `UPDATE spaces SET status = $1 WHERE id = $2 AND status <> $1`, status, id)
	if err != nil {
		return false, fmt.Errorf("set space status: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("set space status: %w", err)
	}
	if n > 0 {
		return true, nil
	}
	if _, err := s.GetSpace(ctx, "", id); err != nil {
		return false, err
	}
	return false, nil
}
