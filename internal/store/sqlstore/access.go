package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/groundworkhq/groundwork/internal/store"
)

// insert runs an INSERT and turns a key collision into store.ErrConflict.
func (s *Store) insert(ctx context.Context, what, q string, args ...any) error {
	_, err := s.q.ExecContext(ctx, q, args...)
	if isUnique(err) {
		return fmt.Errorf("%s: %w", what, store.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("insert %s: %w", what, err)
	}
	return nil
}

// deleteOne deletes by a condition and answers ErrNotFound when nothing matched.
func (s *Store) deleteOne(ctx context.Context, what, q string, args ...any) error {
	res, err := s.q.ExecContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("delete %s: %w", what, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("delete %s: %w", what, err)
	} else if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

func notFound(err error, what string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	return fmt.Errorf("get %s: %w", what, err)
}

func (s *Store) CreateOrg(ctx context.Context, o *store.Org) error {
	return s.insert(ctx, "org", `INSERT INTO orgs (id, name, created_at) VALUES ($1, $2, $3)`, o.ID, o.Name, ms(o.CreatedAt))
}

func (s *Store) GetOrg(ctx context.Context, id string) (*store.Org, error) {
	var o store.Org
	var created int64
	err := s.q.QueryRowContext(ctx, `SELECT id, name, created_at FROM orgs WHERE id = $1`, id).Scan(&o.ID, &o.Name, &created)
	if err != nil {
		return nil, notFound(err, "org")
	}
	o.CreatedAt = fromMS(created)
	return &o, nil
}

func (s *Store) ListOrgs(ctx context.Context) ([]*store.Org, error) {
	rows, err := s.q.QueryContext(ctx, `SELECT id, name, created_at FROM orgs ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list orgs: %w", err)
	}
	defer rows.Close()
	var out []*store.Org
	for rows.Next() {
		var o store.Org
		var created int64
		if err := rows.Scan(&o.ID, &o.Name, &created); err != nil {
			return nil, fmt.Errorf("list orgs: %w", err)
		}
		o.CreatedAt = fromMS(created)
		out = append(out, &o)
	}
	return out, rows.Err()
}

func (s *Store) CreateUser(ctx context.Context, u *store.User) error {
	return s.insert(ctx, "user", `INSERT INTO users (org_id, email, name, created_at) VALUES ($1, $2, $3, $4)`,
		u.OrgID, u.Email, u.Name, ms(u.CreatedAt))
}

func scanUser(r scanner) (*store.User, error) {
	var u store.User
	var created int64
	if err := r.Scan(&u.OrgID, &u.Email, &u.Name, &created); err != nil {
		return nil, err
	}
	u.CreatedAt = fromMS(created)
	return &u, nil
}

func (s *Store) GetUser(ctx context.Context, orgID, email string) (*store.User, error) {
	u, err := scanUser(s.q.QueryRowContext(ctx, `SELECT org_id, email, name, created_at FROM users
		WHERE org_id = $1 AND email = $2`, orgID, email))
	if err != nil {
		return nil, notFound(err, "user")
	}
	return u, nil
}

func (s *Store) ListUsers(ctx context.Context, orgID string) ([]*store.User, error) {
	return list(ctx, s, scanUser, `SELECT org_id, email, name, created_at FROM users WHERE org_id = $1 ORDER BY email`, orgID)
}

// DeleteUser also removes the user's assignments and revokes nothing by time: their tokens go,
// so a deleted user's token stops working at once.
func (s *Store) DeleteUser(ctx context.Context, orgID, email string) error {
	if err := s.deleteOne(ctx, "user", `DELETE FROM users WHERE org_id = $1 AND email = $2`, orgID, email); err != nil {
		return err
	}
	for _, q := range []string{`DELETE FROM role_assignments WHERE org_id = $1 AND email = $2`,
		`DELETE FROM api_tokens WHERE org_id = $1 AND email = $2`} {
		if _, err := s.q.ExecContext(ctx, q, orgID, email); err != nil {
			return fmt.Errorf("delete user: %w", err)
		}
	}
	return nil
}

func list[T any](ctx context.Context, s *Store, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	rows, err := s.q.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("list: %w", err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

const teamColumns = `id, org_id, name, members, space_ids, created_at`

func scanTeam(r scanner) (*store.Team, error) {
	var t store.Team
	var members, spaces string
	var created int64
	if err := r.Scan(&t.ID, &t.OrgID, &t.Name, &members, &spaces, &created); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(members), &t.Members); err != nil {
		return nil, fmt.Errorf("decode members of %s: %w", t.ID, err)
	}
	if err := json.Unmarshal([]byte(spaces), &t.SpaceIDs); err != nil {
		return nil, fmt.Errorf("decode spaces of %s: %w", t.ID, err)
	}
	t.CreatedAt = fromMS(created)
	return &t, nil
}

func nonNil(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

func (s *Store) CreateTeam(ctx context.Context, t *store.Team) error {
	members, err := jsonText(nonNil(t.Members))
	if err != nil {
		return err
	}
	spaces, err := jsonText(nonNil(t.SpaceIDs))
	if err != nil {
		return err
	}
	return s.insert(ctx, "team", `INSERT INTO teams (`+teamColumns+`) VALUES ($1, $2, $3, $4, $5, $6)`,
		t.ID, t.OrgID, t.Name, members, spaces, ms(t.CreatedAt))
}

func (s *Store) GetTeam(ctx context.Context, orgID, id string) (*store.Team, error) {
	t, err := scanTeam(s.q.QueryRowContext(ctx, `SELECT `+teamColumns+` FROM teams WHERE org_id = $1 AND id = $2`, orgID, id))
	if err != nil {
		return nil, notFound(err, "team")
	}
	return t, nil
}

func (s *Store) ListTeams(ctx context.Context, orgID string) ([]*store.Team, error) {
	return list(ctx, s, scanTeam, `SELECT `+teamColumns+` FROM teams WHERE org_id = $1 ORDER BY id`, orgID)
}

func (s *Store) UpdateTeam(ctx context.Context, t *store.Team) error {
	members, err := jsonText(nonNil(t.Members))
	if err != nil {
		return err
	}
	spaces, err := jsonText(nonNil(t.SpaceIDs))
	if err != nil {
		return err
	}
	res, err := s.q.ExecContext(ctx, `UPDATE teams SET name = $3, members = $4, space_ids = $5 WHERE org_id = $1 AND id = $2`,
		t.OrgID, t.ID, t.Name, members, spaces)
	if isUnique(err) {
		return fmt.Errorf("team: %w", store.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("update team: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("update team: %w", err)
	} else if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

func (s *Store) DeleteTeam(ctx context.Context, orgID, id string) error {
	if err := s.deleteOne(ctx, "team", `DELETE FROM teams WHERE org_id = $1 AND id = $2`, orgID, id); err != nil {
		return err
	}
	// Assignments scoped to a team that is gone would reach nothing; remove them with it.
	if _, err := s.q.ExecContext(ctx, `DELETE FROM role_assignments WHERE org_id = $1 AND scope = $2`, orgID, "team:"+id); err != nil {
		return fmt.Errorf("delete team: %w", err)
	}
	return nil
}

const tokenColumns = `id, org_id, email, name, secret_sha256, expires_at, revoked_at, created_at`

func optMS(t *time.Time) any {
	if t == nil {
		return nil
	}
	return ms(*t)
}

func optTime(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMS(v.Int64)
	return &t
}

func scanToken(r scanner) (*store.Token, error) {
	var t store.Token
	var exp, rev sql.NullInt64
	var created int64
	if err := r.Scan(&t.ID, &t.OrgID, &t.Email, &t.Name, &t.Hash, &exp, &rev, &created); err != nil {
		return nil, err
	}
	t.ExpiresAt, t.RevokedAt, t.CreatedAt = optTime(exp), optTime(rev), fromMS(created)
	return &t, nil
}

func (s *Store) CreateToken(ctx context.Context, t *store.Token) error {
	if t.Hash == "" {
		return errors.New("token without a hash")
	}
	return s.insert(ctx, "token", `INSERT INTO api_tokens (`+tokenColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		t.ID, t.OrgID, t.Email, t.Name, t.Hash, optMS(t.ExpiresAt), optMS(t.RevokedAt), ms(t.CreatedAt))
}

func (s *Store) GetTokenByHash(ctx context.Context, hash string) (*store.Token, error) {
	t, err := scanToken(s.q.QueryRowContext(ctx, `SELECT `+tokenColumns+` FROM api_tokens WHERE secret_sha256 = $1`, hash))
	if err != nil {
		return nil, notFound(err, "token")
	}
	return t, nil
}

func (s *Store) ListTokens(ctx context.Context, orgID, email string) ([]*store.Token, error) {
	return list(ctx, s, scanToken, `SELECT `+tokenColumns+` FROM api_tokens
		WHERE org_id = $1 AND ($2 = '' OR email = $2) ORDER BY id`, orgID, email)
}

func (s *Store) RevokeToken(ctx context.Context, orgID, id string, now time.Time) (*store.Token, bool, error) {
	t, err := scanToken(s.q.QueryRowContext(ctx, `UPDATE api_tokens SET revoked_at = $3
		WHERE org_id = $1 AND id = $2 AND revoked_at IS NULL RETURNING `+tokenColumns, orgID, id, ms(now)))
	if err == nil {
		return t, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, false, err
	}
	// Already revoked, or not this org's: tell them apart without touching the row.
	t, err = scanToken(s.q.QueryRowContext(ctx, `SELECT `+tokenColumns+` FROM api_tokens WHERE org_id = $1 AND id = $2`, orgID, id))
	if err != nil {
		return nil, false, notFound(err, "token")
	}
	return t, false, nil
}

const roleColumns = `id, org_id, name, description, policies, created_at`

func scanRole(r scanner) (*store.Role, error) {
	var ro store.Role
	var pols string
	var created int64
	if err := r.Scan(&ro.ID, &ro.OrgID, &ro.Name, &ro.Description, &pols, &created); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(pols), &ro.Policies); err != nil {
		return nil, fmt.Errorf("decode policies of %s: %w", ro.ID, err)
	}
	ro.CreatedAt = fromMS(created)
	return &ro, nil
}

func (s *Store) CreateRole(ctx context.Context, r *store.Role) error {
	pols, err := jsonText(nonNil(r.Policies))
	if err != nil {
		return err
	}
	return s.insert(ctx, "role", `INSERT INTO roles (`+roleColumns+`) VALUES ($1, $2, $3, $4, $5, $6)`,
		r.ID, r.OrgID, r.Name, r.Description, pols, ms(r.CreatedAt))
}

func (s *Store) GetRole(ctx context.Context, orgID, id string) (*store.Role, error) {
	r, err := scanRole(s.q.QueryRowContext(ctx, `SELECT `+roleColumns+` FROM roles WHERE org_id = $1 AND id = $2`, orgID, id))
	if err != nil {
		return nil, notFound(err, "role")
	}
	return r, nil
}

func (s *Store) ListRoles(ctx context.Context, orgID string) ([]*store.Role, error) {
	return list(ctx, s, scanRole, `SELECT `+roleColumns+` FROM roles WHERE org_id = $1 ORDER BY id`, orgID)
}

func (s *Store) DeleteRole(ctx context.Context, orgID, id string) error {
	if _, err := s.GetRole(ctx, orgID, id); err != nil {
		return err
	}
	var n int
	if err := s.q.QueryRowContext(ctx, `SELECT COUNT(*) FROM role_assignments WHERE org_id = $1 AND role_id = $2`,
		orgID, id).Scan(&n); err != nil {
		return fmt.Errorf("delete role: %w", err)
	}
	if n > 0 {
		return fmt.Errorf("%w: %d assignment(s) grant this role", store.ErrInUse, n)
	}
	return s.deleteOne(ctx, "role", `DELETE FROM roles WHERE org_id = $1 AND id = $2`, orgID, id)
}

const assignmentColumns = `id, org_id, email, role_id, scope, created_at`

func scanAssignment(r scanner) (*store.RoleAssignment, error) {
	var a store.RoleAssignment
	var created int64
	if err := r.Scan(&a.ID, &a.OrgID, &a.Email, &a.RoleID, &a.Scope, &created); err != nil {
		return nil, err
	}
	a.CreatedAt = fromMS(created)
	return &a, nil
}

func (s *Store) CreateAssignment(ctx context.Context, a *store.RoleAssignment) error {
	return s.insert(ctx, "role assignment", `INSERT INTO role_assignments (`+assignmentColumns+`) VALUES ($1, $2, $3, $4, $5, $6)`,
		a.ID, a.OrgID, a.Email, a.RoleID, a.Scope, ms(a.CreatedAt))
}

func (s *Store) ListAssignments(ctx context.Context, orgID, email string) ([]*store.RoleAssignment, error) {
	return list(ctx, s, scanAssignment, `SELECT `+assignmentColumns+` FROM role_assignments
		WHERE org_id = $1 AND ($2 = '' OR email = $2) ORDER BY id`, orgID, email)
}

func (s *Store) DeleteAssignment(ctx context.Context, orgID, id string) (*store.RoleAssignment, error) {
	a, err := scanAssignment(s.q.QueryRowContext(ctx, `DELETE FROM role_assignments WHERE org_id = $1 AND id = $2
		RETURNING `+assignmentColumns, orgID, id))
	if err != nil {
		return nil, notFound(err, "role assignment")
	}
	return a, nil
}

func (s *Store) UpdateCloudAccount(ctx context.Context, p *store.UpdateCloudAccountParams) (*store.CloudAccount, error) {
	a, err := scanAccount(s.q.QueryRowContext(ctx, `UPDATE cloud_accounts SET name = COALESCE($3, name),
		permission_level = COALESCE($4, permission_level) WHERE org_id = $1 AND id = $2 RETURNING `+accountColumns,
		p.OrgID, p.ID, p.Name, p.PermissionLevel))
	if err != nil {
		return nil, notFound(err, "cloud account")
	}
	return a, nil
}

// DeleteCloudAccount refuses while a space names the account: its jobs could no longer reach
// the cloud, not even to tear down what they made.
func (s *Store) DeleteCloudAccount(ctx context.Context, orgID, id string) error {
	if _, err := s.GetCloudAccount(ctx, orgID, id); err != nil {
		return err
	}
	var n int
	if err := s.q.QueryRowContext(ctx, `SELECT COUNT(*) FROM spaces WHERE org_id = $1 AND cloud_account_id = $2`,
		orgID, id).Scan(&n); err != nil {
		return fmt.Errorf("delete cloud account: %w", err)
	}
	if n > 0 {
		return fmt.Errorf("%w: %d space(s) use this account", store.ErrInUse, n)
	}
	return s.deleteOne(ctx, "cloud account", `DELETE FROM cloud_accounts WHERE org_id = $1 AND id = $2`, orgID, id)
}
