package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/groundworkhq/groundwork/internal/store"
)

var _ store.DatastoreSecretRefs = (*Store)(nil)

// RepointDatastoreSecret implements store.DatastoreSecretRefs. The endpoint is JSON text in
// both stores, so each row is decoded and written back rather than edited with a dialect's
// JSON functions; every UPDATE is conditioned on the old reference, so a concurrent or
// repeated run never writes a row twice.
func (s *Store) RepointDatastoreSecret(ctx context.Context, jobID, oldRef, newRef string) (int, error) {
	if oldRef == "" || newRef == "" || oldRef == newRef {
		return 0, fmt.Errorf("repoint secret: references %q → %q", oldRef, newRef)
	}
	n := 0
	for _, table := range []string{"datastore_databases", "datastore_connections"} {
		rows, err := s.q.QueryContext(ctx, `SELECT id, endpoint FROM `+table+` WHERE job_id = $1 AND secret_ref = $2 ORDER BY id`, jobID, oldRef)
		if err != nil {
			return n, fmt.Errorf("list %s on the old secret: %w", table, err)
		}
		type row struct{ id, endpoint string }
		var found []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.id, &r.endpoint); err != nil {
				_ = rows.Close()
				return n, err
			}
			found = append(found, r)
		}
		if err := rows.Close(); err != nil {
			return n, err
		}
		for _, r := range found {
			var ep store.DatastoreEndpoint
			if err := json.Unmarshal([]byte(r.endpoint), &ep); err != nil {
				return n, fmt.Errorf("decode endpoint of %s: %w", r.id, err)
			}
			ep.SecretRef = newRef
			text, err := jsonText(ep)
			if err != nil {
				return n, err
			}
			res, err := s.q.ExecContext(ctx, `UPDATE `+table+` SET endpoint = $4, secret_ref = $3
				WHERE job_id = $1 AND id = $2 AND secret_ref = $5`, jobID, r.id, newRef, text, oldRef)
			if err != nil {
				return n, fmt.Errorf("repoint %s: %w", r.id, err)
			}
			k, err := res.RowsAffected()
			if err != nil {
				return n, err
			}
			n += int(k)
		}
	}
	return n, nil
}
