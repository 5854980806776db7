package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/groundworkhq/groundwork/internal/store"
)

var _ store.ProvisionerStore = (*Store)(nil)

// InsertProvisioner records p and the pairs it holds in one transaction. A pair already held
// makes the insert of its row do nothing (ON CONFLICT), which is how a registration racing
// another one on a different replica learns that it lost: the primary key on (kind, type)
// settles it, the rows-affected count tells us, and nothing of the loser is kept.
func (s *Store) InsertProvisioner(ctx context.Context, p store.Provisioner) error {
	conflict, err := s.insertProvisioner(ctx, p)
	if err != nil {
		return fmt.Errorf("insert provisioner %s: %w", p.ID, err)
	}
	if conflict == nil {
		return nil
	}
	// The transaction is rolled back; read the holder afterwards, so that PostgreSQL (which
	// aborts a transaction after an error) and SQLite answer alike.
	ce := &store.PairConflictError{Pair: *conflict}
	if h, err := s.ProvisionerForPair(ctx, p.OrgID, *conflict); err == nil {
		ce.HolderID, ce.HolderName = h.ID, h.Name
	}
	return ce
}

func (s *Store) insertProvisioner(ctx context.Context, p store.Provisioner) (*store.CatalogPair, error) {
	var conflict *store.CatalogPair
	err := s.within(ctx, func(q querier) error {
		if _, err := q.ExecContext(ctx, `INSERT INTO provisioners (id, org_id, name, url, created_at) VALUES ($1, $2, $3, $4, $5)`,
			p.ID, p.OrgID, p.Name, p.URL, ms(p.CreatedAt)); err != nil {
			return err
		}
		for i, pair := range p.Pairs {
			res, err := q.ExecContext(ctx, `INSERT INTO provisioner_pairs (org_id, kind, type, provisioner_id, position)
				VALUES ($1, $2, $3, $4, $5) ON CONFLICT (org_id, kind, type) DO NOTHING`, p.OrgID, string(pair.Kind), pair.Type, p.ID, i)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n == 0 {
				conflict = &pair
				return errLostPair
			}
		}
		return nil
	})
	if errors.Is(err, errLostPair) {
		return conflict, nil
	}
	return nil, err
}

// errLostPair rolls a registration back when one of its pairs is already held.
var errLostPair = errors.New("pair already held")

// within runs fn in the transaction this copy of the store is bound to (an audited change),
// or else in a transaction of its own that it commits when fn succeeds.
func (s *Store) within(ctx context.Context, fn func(q querier) error) error {
	if s.tx != nil {
		return fn(s.q)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

func (s *Store) ListProvisioners(ctx context.Context, orgID string) ([]store.Provisioner, error) {
	out, err := s.queryProvisioners(ctx, `SELECT id, org_id, name, url, created_at FROM provisioners WHERE org_id = $1
		ORDER BY created_at, id`, orgID)
	if err != nil {
		return nil, fmt.Errorf("list provisioners: %w", err)
	}
	return out, nil
}

func (s *Store) GetProvisioner(ctx context.Context, orgID, id string) (store.Provisioner, error) {
	out, err := s.queryProvisioners(ctx, `SELECT id, org_id, name, url, created_at FROM provisioners
		WHERE org_id = $1 AND id = $2`, orgID, id)
	if err != nil {
		return store.Provisioner{}, fmt.Errorf("get provisioner %s: %w", id, err)
	}
	if len(out) == 0 {
		return store.Provisioner{}, store.ErrProvisionerNotFound
	}
	return out[0], nil
}

func (s *Store) ProvisionerForPair(ctx context.Context, orgID string, pair store.CatalogPair) (store.Provisioner, error) {
	out, err := s.queryProvisioners(ctx, `SELECT p.id, p.org_id, p.name, p.url, p.created_at FROM provisioners p
		JOIN provisioner_pairs pp ON pp.provisioner_id = p.id
		WHERE pp.org_id = $1 AND pp.kind = $2 AND pp.type = $3`,
		orgID, string(pair.Kind), pair.Type)
	if err != nil {
		return store.Provisioner{}, fmt.Errorf("holder of %s: %w", pair, err)
	}
	if len(out) == 0 {
		return store.Provisioner{}, store.ErrProvisionerNotFound
	}
	return out[0], nil
}

func (s *Store) DeleteProvisioner(ctx context.Context, orgID, id string) error {
	err := s.within(ctx, func(q querier) error {
		res, err := q.ExecContext(ctx, `DELETE FROM provisioners WHERE org_id = $1 AND id = $2`, orgID, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return store.ErrProvisionerNotFound
		}
		if _, err := q.ExecContext(ctx, `DELETE FROM provisioner_pairs WHERE provisioner_id = $1`, id); err != nil {
			return fmt.Errorf("free the pairs: %w", err)
		}
		return nil
	})
	if errors.Is(err, store.ErrProvisionerNotFound) {
		return err
	}
	if err != nil {
		return fmt.Errorf("delete provisioner %s: %w", id, err)
	}
	return nil
}

// queryProvisioners runs a query answering (id, org_id, name, url, created_at) and fills in each
// provisioner's pairs in the order they were registered.
func (s *Store) queryProvisioners(ctx context.Context, q string, args ...any) ([]store.Provisioner, error) {
	rows, err := s.q.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	var out []store.Provisioner
	for rows.Next() {
		var (
			p       store.Provisioner
			created int64
		)
		if err := rows.Scan(&p.ID, &p.OrgID, &p.Name, &p.URL, &created); err != nil {
			rows.Close()
			return nil, err
		}
		p.CreatedAt = fromMS(created)
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return nil, err
	}
	rows.Close()
	// A second query per provisioner is fine: there are a handful of provisioners, and SQLite's
	// single connection cannot serve a nested query while the outer rows are open.
	for i := range out {
		if out[i].Pairs, err = s.pairsOf(ctx, out[i].ID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *Store) pairsOf(ctx context.Context, id string) ([]store.CatalogPair, error) {
	rows, err := s.q.QueryContext(ctx, `SELECT kind, type FROM provisioner_pairs WHERE provisioner_id = $1 ORDER BY position`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	pairs := []store.CatalogPair{}
	for rows.Next() {
		var p store.CatalogPair
		if err := rows.Scan(&p.Kind, &p.Type); err != nil {
			return nil, err
		}
		pairs = append(pairs, p)
	}
	return pairs, rows.Err()
}

// ClaimRequestKey records that the provisioner-protocol apply with key (in org) is served by
// job jobID, unless another job already serves it. It returns the job that serves the key:
// jobID when this call won, the earlier one otherwise. Two replicas taking the same apply at
// once agree on one job this way.
func (s *Store) ClaimRequestKey(ctx context.Context, orgID, key, jobID string, now time.Time) (string, error) {
	if _, err := s.db.ExecContext(ctx, `INSERT INTO protocol_requests (org_id, request_key, job_id, created_at)
		VALUES ($1, $2, $3, $4) ON CONFLICT (org_id, request_key) DO NOTHING`, orgID, key, jobID, ms(now)); err != nil {
		return "", fmt.Errorf("claim request key: %w", err)
	}
	return s.RequestKeyJob(ctx, orgID, key)
}

// RequestKeyJob returns the job serving key, or "" when none does.
func (s *Store) RequestKeyJob(ctx context.Context, orgID, key string) (string, error) {
	var id string
	err := s.db.QueryRowContext(ctx, `SELECT job_id FROM protocol_requests WHERE org_id = $1 AND request_key = $2`,
		orgID, key).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read request key: %w", err)
	}
	return id, nil
}

// ReplaceRequestKey moves key from job oldID to newID, if it still names oldID, and returns
// the job serving key afterwards. It repairs a key whose job was never stored (the replica
// that claimed it stopped in between).
func (s *Store) ReplaceRequestKey(ctx context.Context, orgID, key, oldID, newID string) (string, error) {
	if _, err := s.db.ExecContext(ctx, `UPDATE protocol_requests SET job_id = $4
		WHERE org_id = $1 AND request_key = $2 AND job_id = $3`, orgID, key, oldID, newID); err != nil {
		return "", fmt.Errorf("replace request key: %w", err)
	}
	return s.RequestKeyJob(ctx, orgID, key)
}
