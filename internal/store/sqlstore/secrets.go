package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/groundworkhq/groundwork/internal/store"
)

var _ store.SecretLedger = (*Store)(nil)

// RecordSecretOwner implements store.SecretLedger. The primary key on ref settles two writers:
// the second binding is kept only when it names the same owner.
func (s *Store) RecordSecretOwner(ctx context.Context, ref string, o store.SecretOwner, now time.Time) error {
	if _, err := s.q.ExecContext(ctx, `INSERT INTO secret_owners (ref, org_id, owner_kind, owner_id, created_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (ref) DO NOTHING`, ref, o.OrgID, o.Kind, o.ID, ms(now)); err != nil {
		return fmt.Errorf("record owner of %s: %w", ref, err)
	}
	got, err := s.SecretOwner(ctx, ref)
	if err != nil {
		return err
	}
	if got != o {
		return fmt.Errorf("secret %s: %w", ref, store.ErrSecretOwnedElsewhere)
	}
	return nil
}

// SecretOwner implements store.SecretLedger.
func (s *Store) SecretOwner(ctx context.Context, ref string) (store.SecretOwner, error) {
	var o store.SecretOwner
	err := s.q.QueryRowContext(ctx, `SELECT org_id, owner_kind, owner_id FROM secret_owners WHERE ref = $1`, ref).
		Scan(&o.OrgID, &o.Kind, &o.ID)
	if errors.Is(err, sql.ErrNoRows) {
		return o, fmt.Errorf("owner of %s: %w", ref, store.ErrSecretNotFound)
	}
	if err != nil {
		return o, fmt.Errorf("owner of %s: %w", ref, err)
	}
	return o, nil
}

// ForgetSecretOwner implements store.SecretLedger.
func (s *Store) ForgetSecretOwner(ctx context.Context, ref string) error {
	if _, err := s.q.ExecContext(ctx, `DELETE FROM secret_owners WHERE ref = $1`, ref); err != nil {
		return fmt.Errorf("forget owner of %s: %w", ref, err)
	}
	return nil
}

// SecretsOwnedBy implements store.SecretLedger.
func (s *Store) SecretsOwnedBy(ctx context.Context, o store.SecretOwner) ([]string, error) {
	rows, err := s.q.QueryContext(ctx, `SELECT ref FROM secret_owners WHERE org_id = $1 AND owner_kind = $2 AND owner_id = $3 ORDER BY ref`,
		o.OrgID, o.Kind, o.ID)
	if err != nil {
		return nil, fmt.Errorf("secrets of %s: %w", o, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var ref string
		if err := rows.Scan(&ref); err != nil {
			return nil, err
		}
		out = append(out, ref)
	}
	return out, rows.Err()
}

// OwnersOfEndedJobs implements store.EndedJobs: the jobs, cancelled or deleted, that still
// own secrets. Only jobs whose row says they ended are named, so a secret stored at admission
// for a job not yet committed is never taken for an orphan.
func (s *Store) OwnersOfEndedJobs(ctx context.Context, limit int) ([]store.SecretOwner, error) {
	rows, err := s.q.QueryContext(ctx, `SELECT DISTINCT so.org_id, so.owner_id FROM secret_owners so
		JOIN provisioning_jobs j ON j.id = so.owner_id AND j.org_id = so.org_id
		WHERE so.owner_kind = $1 AND j.status IN ($2, $3)
		ORDER BY so.owner_id LIMIT $4`, store.OwnerJob, "cancelled", "deleted", limit)
	if err != nil {
		return nil, fmt.Errorf("owners of ended jobs: %w", err)
	}
	defer rows.Close()
	var out []store.SecretOwner
	for rows.Next() {
		o := store.SecretOwner{Kind: store.OwnerJob}
		if err := rows.Scan(&o.OrgID, &o.ID); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}
