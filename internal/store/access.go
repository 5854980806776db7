package store

import (
	"context"
	"errors"
	"time"
)

// ErrConflict: a row with the same key exists.
var ErrConflict = errors.New("already exists")

// Org is a tenant: every other row belongs to exactly one.
type Org struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
}

// User is a person, known by email within an org.
type User struct {
	OrgID     string    `json:"orgID"`
	Email     string    `json:"email"`
	Name      string    `json:"name,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// Team groups users and owns spaces; an assignment scoped "team:<id>" reaches what it owns.
type Team struct {
	ID        string    `json:"id"`
	OrgID     string    `json:"orgID"`
	Name      string    `json:"name"`
	Members   []string  `json:"members"`
	SpaceIDs  []string  `json:"spaceIDs"`
	CreatedAt time.Time `json:"createdAt"`
}

// Token is an API token. Only the SHA-256 of its secret is kept; the secret is shown once.
type Token struct {
	ID        string     `json:"id"`
	OrgID     string     `json:"orgID"`
	Email     string     `json:"email"`
	Name      string     `json:"name"`
	Hash      string     `json:"-"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
	CreatedAt time.Time  `json:"createdAt"`
}

// AccessStore keeps orgs, users, teams, tokens, custom roles and role assignments. Lookups
// take the org and answer ErrNotFound for another org's row.
type AccessStore interface {
	CreateOrg(ctx context.Context, o *Org) error
	GetOrg(ctx context.Context, id string) (*Org, error)
	// ListOrgs lists every org, oldest first (an operator's view, above any one org).
	ListOrgs(ctx context.Context) ([]*Org, error)

	CreateUser(ctx context.Context, u *User) error
	GetUser(ctx context.Context, orgID, email string) (*User, error)
	ListUsers(ctx context.Context, orgID string) ([]*User, error)
	// DeleteUser removes the user, their role assignments and tokens.
	DeleteUser(ctx context.Context, orgID, email string) error

	CreateTeam(ctx context.Context, t *Team) error
	GetTeam(ctx context.Context, orgID, id string) (*Team, error)
	ListTeams(ctx context.Context, orgID string) ([]*Team, error)
	// UpdateTeam replaces the name, members and spaces of a team.
	UpdateTeam(ctx context.Context, t *Team) error
	DeleteTeam(ctx context.Context, orgID, id string) error

	CreateToken(ctx context.Context, t *Token) error
	// GetTokenByHash finds a token of any org by the hash of its secret (authentication).
	GetTokenByHash(ctx context.Context, hash string) (*Token, error)
	// ListTokens lists the org's tokens, or one user's when email is set.
	ListTokens(ctx context.Context, orgID, email string) ([]*Token, error)
	// RevokeToken marks the token revoked at now and reports whether this call revoked it;
	// revoking it again is no error, keeps the first time and reports false.
	RevokeToken(ctx context.Context, orgID, id string, now time.Time) (*Token, bool, error)

	// CreateRole stores a custom role (system roles are not stored).
	CreateRole(ctx context.Context, r *Role) error
	GetRole(ctx context.Context, orgID, id string) (*Role, error)
	ListRoles(ctx context.Context, orgID string) ([]*Role, error)
	// DeleteRole refuses with ErrInUse while assignments name the role.
	DeleteRole(ctx context.Context, orgID, id string) error

	CreateAssignment(ctx context.Context, a *RoleAssignment) error
	// ListAssignments lists the org's assignments, or one user's when email is set.
	ListAssignments(ctx context.Context, orgID, email string) ([]*RoleAssignment, error)
	DeleteAssignment(ctx context.Context, orgID, id string) (*RoleAssignment, error)

	// UpdateCloudAccount changes the fields set in p and returns the account.
	UpdateCloudAccount(ctx context.Context, p *UpdateCloudAccountParams) (*CloudAccount, error)
	// DeleteCloudAccount refuses with ErrInUse while spaces use the account.
	DeleteCloudAccount(ctx context.Context, orgID, id string) error
}

// UpdateCloudAccountParams names what to change; nil fields stay.
type UpdateCloudAccountParams struct {
	OrgID, ID       string
	Name            *string
	PermissionLevel *string
}

// AuditStore writes the audit log only alongside the change it records and reads it back.
// There is deliberately no method that updates or deletes an entry.
type AuditStore interface {
	// Audited runs fn against a store bound to one transaction and, if fn succeeds, appends e
	// in that same transaction before committing: a change and its record commit together or
	// not at all. fn may fill e (e.g. the ID of what it created) before returning.
	Audited(ctx context.Context, e *AuditEntry, fn func(tx Tx) error) error
	// ListAudit returns one page of entries matching f, newest first, and the total count.
	ListAudit(ctx context.Context, f *AuditFilter) ([]*AuditEntry, int, error)
}
