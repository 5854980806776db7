package store

import "time"

// Role is a named list of policies (rbac.Role). System roles exist in every org and cannot be
// changed; only custom roles are stored.
type Role struct {
	ID          string    `json:"id"`
	OrgID       string    `json:"orgID,omitempty"`
	Name        string    `json:"name"`
	Description string    `json:"description,omitempty"`
	Policies    []string  `json:"policies"`
	System      bool      `json:"system"`
	CreatedAt   time.Time `json:"createdAt,omitzero"`
}

// RoleAssignment grants a role to a user within a scope (rbac.Assignment).
type RoleAssignment struct {
	ID     string `json:"id"`
	OrgID  string `json:"orgID,omitempty"`
	Email  string `json:"email"`
	RoleID string `json:"roleID"`
	// Scope is "" (org-wide), "team:<id>" (the resources the team owns) or "<resource>:<id>"
	// (one resource and what it contains, e.g. a space and its jobs).
	Scope     string    `json:"scope"`
	CreatedAt time.Time `json:"createdAt,omitzero"`
}
