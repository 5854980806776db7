package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/groundworkhq/groundwork/internal/store"
)

const spaceColumns = `id, org_id, name, provider, region, space_type, cloud_account_id, status, config, created_at`

func scanSpace(r scanner) (*store.Space, error) {
	var sp store.Space
	var config sql.NullString
	var created int64
	if err := r.Scan(&sp.ID, &sp.OrgID, &sp.Name, &sp.Provider, &sp.Region, &sp.SpaceType, &sp.CloudAccountID,
		&sp.Status, &config, &created); err != nil {
		return nil, err
	}
	sp.Config = json.RawMessage(orDefault(config, "{}"))
	sp.CreatedAt = fromMS(created)
	return &sp, nil
}

func (s *Store) CreateSpace(ctx context.Context, sp *store.Space) error {
	_, err := s.q.ExecContext(ctx, `INSERT INTO spaces (`+spaceColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, `+s.dialect.JSON("$9")+`, $10)`,
		sp.ID, sp.OrgID, sp.Name, sp.Provider, sp.Region, sp.SpaceType, sp.CloudAccountID, sp.Status,
		rawText(sp.Config, "{}"), ms(sp.CreatedAt))
	if err != nil {
		return fmt.Errorf("insert space: %w", err)
	}
	return nil
}

func (s *Store) GetSpace(ctx context.Context, orgID, id string) (*store.Space, error) {
	sp, err := scanSpace(s.q.QueryRowContext(ctx, `SELECT `+spaceColumns+` FROM spaces
		WHERE id = $1 AND ($2 = '' OR org_id = $2)`, id, orgID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get space: %w", err)
	}
	return sp, nil
}

func (s *Store) ListSpaces(ctx context.Context, orgID string) ([]*store.Space, error) {
	rows, err := s.q.QueryContext(ctx, `SELECT `+spaceColumns+` FROM spaces WHERE org_id = $1 ORDER BY id`, orgID)
	if err != nil {
		return nil, fmt.Errorf("list spaces: %w", err)
	}
	defer rows.Close()
	out := []*store.Space{}
	for rows.Next() {
		sp, err := scanSpace(rows)
		if err != nil {
			return nil, fmt.Errorf("list spaces: %w", err)
		}
		out = append(out, sp)
	}
	return out, rows.Err()
}

// DeleteSpace refuses while jobs that may still own resources in the space exist: deleting the
// space would orphan them.
func (s *Store) DeleteSpace(ctx context.Context, orgID, id string) error {
	if _, err := s.GetSpace(ctx, orgID, id); err != nil {
		return err
	}
	var live int
	if err := s.q.QueryRowContext(ctx, `SELECT COUNT(*) FROM provisioning_jobs
		WHERE space_id = $1 AND status NOT IN ('cancelled', 'deleted')`, id).Scan(&live); err != nil {
		return fmt.Errorf("delete space: %w", err)
	}
	if live > 0 {
		return fmt.Errorf("%w: %d job(s) still hold resources in this space", store.ErrInUse, live)
	}
	if _, err := s.q.ExecContext(ctx, `DELETE FROM spaces WHERE id = $1 AND org_id = $2`, id, orgID); err != nil {
		return fmt.Errorf("delete space: %w", err)
	}
	return nil
}

const accountColumns = `id, org_id, name, provider, region, auth_method, credentials_ref, permission_level, config, created_at`

func scanAccount(r scanner) (*store.CloudAccount, error) {
	var a store.CloudAccount
	var config sql.NullString
	var created int64
	if err := r.Scan(&a.ID, &a.OrgID, &a.Name, &a.Provider, &a.Region, &a.AuthMethod, &a.CredentialsRef,
		&a.PermissionLevel, &config, &created); err != nil {
		return nil, err
	}
	a.Config = json.RawMessage(orDefault(config, "{}"))
	a.CreatedAt = fromMS(created)
	return &a, nil
}

func (s *Store) CreateCloudAccount(ctx context.Context, a *store.CloudAccount) error {
	_, err := s.q.ExecContext(ctx, `INSERT INTO cloud_accounts (`+accountColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, `+s.dialect.JSON("$9")+`, $10)`,
		a.ID, a.OrgID, a.Name, a.Provider, a.Region, a.AuthMethod, a.CredentialsRef, a.PermissionLevel,
		rawText(a.Config, "{}"), ms(a.CreatedAt))
	if err != nil {
		return fmt.Errorf("insert cloud account: %w", err)
	}
	return nil
}

func (s *Store) GetCloudAccount(ctx context.Context, orgID, id string) (*store.CloudAccount, error) {
	a, err := scanAccount(s.q.QueryRowContext(ctx, `SELECT `+accountColumns+` FROM cloud_accounts
		WHERE id = $1 AND ($2 = '' OR org_id = $2)`, id, orgID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get cloud account: %w", err)
	}
	return a, nil
}

func (s *Store) ListCloudAccounts(ctx context.Context, orgID string) ([]*store.CloudAccount, error) {
	rows, err := s.q.QueryContext(ctx, `SELECT `+accountColumns+` FROM cloud_accounts WHERE org_id = $1 ORDER BY id`, orgID)
	if err != nil {
		return nil, fmt.Errorf("list cloud accounts: %w", err)
	}
	defer rows.Close()
	out := []*store.CloudAccount{}
	for rows.Next() {
		a, err := scanAccount(rows)
		if err != nil {
			return nil, fmt.Errorf("list cloud accounts: %w", err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}
