// Package rbac is the access model: policies "resource:action", roles that list policies, and
// assignments that grant a role to a user (by email) org-wide, within a team, or on one
// resource. It is pure: the store keeps roles and assignments, the API asks Permissions.
package rbac

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/groundworkhq/groundwork/internal/store"
)

// Actions.
const (
	View   = "view"
	Create = "create"
	Update = "update"
	Delete = "delete"
	Reveal = "reveal"
	// Approve decides a remediation workflow's approval gate, or a provisioning job's config
	// update that drops data.
	Approve = "approve"
	// Write is shorthand for create, update and delete; it expands when a role is read.
	Write = "write"
)

var crud = []string{View, Create, Update, Delete}

// Resource is one kind of thing a policy governs.
type Resource struct {
	Name    string   `json:"resource"`
	Actions []string `json:"actions"`
	// AdminOnly resources are left out of the Editor and Viewer system roles: they govern who
	// may do what (users, teams, roles, tokens) or read the record of it (the audit log).
	AdminOnly bool `json:"adminOnly"`
	// AdminActions are the actions on an otherwise shared resource that only the Admin role
	// holds: registering or removing a provisioner decides where every job of a pair sends
	// its settings, so it is a decision about the organisation, not one object.
	AdminActions []string `json:"adminActions,omitempty"`
	Description  string   `json:"description"`
}

// Resources lists every resource of the policy vocabulary, in a stable order.
var Resources = []Resource{
	{Name: "space", Actions: crud, Description: "Deployment spaces (cloud account + region, or a registered cluster)"},
	{Name: "provisioning", Actions: []string{View, Create, Update, Delete, Approve}, AdminActions: []string{Approve},
		Description: "Provisioning jobs: run, monitor, modify, tear down; approve or reject a config update that drops data (Admins by default)"},
	{Name: "remediation", Actions: []string{View, Create, Update, Delete, Approve}, AdminActions: []string{Approve},
		Description: "Remediation workflows: start, monitor, cancel; approve or reject their gates (Admins by default)"},
	{Name: "service", Actions: crud, Description: "In-cluster Helm components attached to a space"},
	{Name: "deployment", Actions: crud, Description: "Application deployments"},
	{Name: "cloud-account", Actions: crud, Description: "Cloud accounts (credentials by reference)"},
	{Name: "provisioner", Actions: crud, AdminActions: []string{Create, Update, Delete}, Description: "Remote provisioners and their (category, type) pairs"},
	{Name: "catalog", Actions: crud, Description: "The catalog of types and Helm components"},
	{Name: "secret", Actions: []string{View, Create, Update, Delete, Reveal}, Description: "Secret references; reveal reads a value"},
	{Name: "audit-log", Actions: []string{View}, AdminOnly: true, Description: "The audit log"},
	{Name: "user", Actions: crud, AdminOnly: true, Description: "Users of the organisation"},
	{Name: "team", Actions: crud, AdminOnly: true, Description: "Teams and the spaces they own"},
	{Name: "role", Actions: crud, AdminOnly: true, Description: "Custom roles and role assignments"},
	{Name: "token", Actions: crud, AdminOnly: true, Description: "API tokens"},
}

// Policy is one policy with its meaning, as GET /policies lists it.
type Policy struct {
	Policy      string `json:"policy"`
	Resource    string `json:"resource"`
	Action      string `json:"action"`
	Description string `json:"description"`
}

// Policies lists every concrete policy (write is shorthand, not listed).
func Policies() []Policy {
	var out []Policy
	for _, r := range Resources {
		for _, a := range r.Actions {
			out = append(out, Policy{Policy: r.Name + ":" + a, Resource: r.Name, Action: a, Description: r.Description})
		}
	}
	return out
}

func resource(name string) (Resource, bool) {
	for _, r := range Resources {
		if r.Name == name {
			return r, true
		}
	}
	return Resource{}, false
}

// Split returns the resource and action of "resource:action".
func Split(policy string) (res, action string) {
	res, action, _ = strings.Cut(policy, ":")
	return res, action
}

// Expand validates policies and returns the concrete set, with resource:write expanded.
func Expand(policies []string) ([]string, error) {
	set := map[string]bool{}
	for _, p := range policies {
		resName, action := Split(p)
		r, ok := resource(resName)
		if !ok {
			return nil, fmt.Errorf("%q: unknown resource %q", p, resName)
		}
		if action == Write {
			for _, a := range []string{Create, Update, Delete} {
				if has(r.Actions, a) {
					set[resName+":"+a] = true
				}
			}
			continue
		}
		if !has(r.Actions, action) {
			return nil, fmt.Errorf("%q: %s has no action %q (one of %s, or write)", p, resName, action, strings.Join(r.Actions, ", "))
		}
		set[p] = true
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out, nil
}

func has(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Role is a named list of policies. System roles exist in every org and cannot be changed.
// The store keeps custom roles, so the type is declared there.
type Role = store.Role

// IDs of the system roles.
const (
	RoleAdmin  = "role_admin"
	RoleEditor = "role_editor"
	RoleViewer = "role_viewer"
)

// SystemRoles returns Admin (every policy), Editor (view and write on every resource that is
// not admin-only, except the resource's admin actions) and Viewer (view on those).
func SystemRoles() []Role {
	var admin, editor, viewer []string
	for _, r := range Resources {
		for _, a := range r.Actions {
			p := r.Name + ":" + a
			admin = append(admin, p)
			if r.AdminOnly {
				continue
			}
			if a == View {
				viewer = append(viewer, p)
			}
			if a != Reveal && !has(r.AdminActions, a) {
				editor = append(editor, p)
			}
		}
	}
	return []Role{
		{ID: RoleAdmin, Name: "Admin", Description: "Everything, including users, roles, tokens and the audit log", Policies: admin, System: true},
		{ID: RoleEditor, Name: "Editor", Description: "View and change every resource except access control and the audit log", Policies: editor, System: true},
		{ID: RoleViewer, Name: "Viewer", Description: "View every resource except access control and the audit log", Policies: viewer, System: true},
	}
}

// SystemRole returns the system role with id.
func SystemRole(id string) (Role, bool) {
	for _, r := range SystemRoles() {
		if r.ID == id {
			return r, true
		}
	}
	return Role{}, false
}

// Assignment grants a role to a user within a scope: "" (org-wide), "team:<id>" (the
// resources the team owns) or "<resource>:<id>" (one resource and what it contains).
type Assignment = store.RoleAssignment

// ValidateScope checks the shape of an assignment's scope.
func ValidateScope(scope string) error {
	if scope == "" || scope == "org" {
		return nil
	}
	kind, id, ok := strings.Cut(scope, ":")
	if !ok || id == "" {
		return fmt.Errorf("scope %q must be empty (org-wide), team:<id> or <resource>:<id>", scope)
	}
	if kind == "team" {
		return nil
	}
	if _, ok := resource(kind); !ok {
		return fmt.Errorf("scope %q names no resource", scope)
	}
	return nil
}

// Grant is one policy held at one scope.
type Grant struct {
	Policy string `json:"policy"`
	Scope  string `json:"scope"` // "" org-wide
	RoleID string `json:"roleID"`
}

// Permissions is what one user may do: the union of the grants of their assignments.
type Permissions struct {
	byPolicy map[string]map[string]bool // policy → scopes
	grants   []Grant
}

// All returns permissions holding every policy org-wide (the bootstrap admin).
func All() *Permissions {
	admin, _ := SystemRole(RoleAdmin)
	return Compute([]Assignment{{RoleID: RoleAdmin}}, map[string]Role{RoleAdmin: admin})
}

// Compute unions the grants of assignments; roles maps role IDs to roles (system roles are
// found without it). An assignment to an unknown role grants nothing.
func Compute(assignments []Assignment, roles map[string]Role) *Permissions {
	p := &Permissions{byPolicy: map[string]map[string]bool{}}
	for _, a := range assignments {
		r, ok := roles[a.RoleID]
		if !ok {
			if r, ok = SystemRole(a.RoleID); !ok {
				continue
			}
		}
		pols, err := Expand(r.Policies)
		if err != nil {
			continue // a stored role was validated at creation; skip rather than widen
		}
		scope := a.Scope
		if scope == "org" {
			scope = ""
		}
		for _, pol := range pols {
			if p.byPolicy[pol] == nil {
				p.byPolicy[pol] = map[string]bool{}
			}
			if !p.byPolicy[pol][scope] {
				p.byPolicy[pol][scope] = true
				p.grants = append(p.grants, Grant{Policy: pol, Scope: scope, RoleID: r.ID})
			}
		}
	}
	sort.Slice(p.grants, func(i, j int) bool {
		if p.grants[i].Policy != p.grants[j].Policy {
			return p.grants[i].Policy < p.grants[j].Policy
		}
		return p.grants[i].Scope < p.grants[j].Scope
	})
	return p
}

// Any reports whether policy is held at any scope (enough to reach a route; the resource is
// checked next).
func (p *Permissions) Any(policy string) bool { return len(p.byPolicy[policy]) > 0 }

// OrgWide reports whether policy is held across the whole org.
func (p *Permissions) OrgWide(policy string) bool { return p.byPolicy[policy][""] }

// Allows reports whether policy is held org-wide or at one of scopes, the chain of scopes a
// resource sits in (itself, its space, the teams owning that space).
func (p *Permissions) Allows(policy string, scopes ...string) bool {
	held := p.byPolicy[policy]
	if held[""] {
		return true
	}
	for _, s := range scopes {
		if held[s] {
			return true
		}
	}
	return false
}

// Grants lists every (policy, scope) held, sorted.
func (p *Permissions) Grants() []Grant { return append([]Grant(nil), p.grants...) }

// Source is where Effective reads a user's assignments and the org's custom roles.
type Source interface {
	ListAssignments(ctx context.Context, orgID, email string) ([]*Assignment, error)
	ListRoles(ctx context.Context, orgID string) ([]*Role, error)
}

// Effective computes the permissions of email in org from the stored assignments.
func Effective(ctx context.Context, src Source, orgID, email string) (*Permissions, error) {
	as, err := src.ListAssignments(ctx, orgID, email)
	if err != nil {
		return nil, fmt.Errorf("assignments of %s: %w", email, err)
	}
	if len(as) == 0 {
		return Compute(nil, nil), nil
	}
	custom, err := src.ListRoles(ctx, orgID)
	if err != nil {
		return nil, fmt.Errorf("roles of %s: %w", orgID, err)
	}
	roles := map[string]Role{}
	for _, r := range custom {
		roles[r.ID] = *r
	}
	list := make([]Assignment, len(as))
	for i, a := range as {
		list[i] = *a
	}
	return Compute(list, roles), nil
}
