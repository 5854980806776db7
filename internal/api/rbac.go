package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/oklog/ulid/v2"

	"github.com/groundworkhq/groundwork/internal/audit"
	"github.com/groundworkhq/groundwork/internal/rbac"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/validation"
)

func (s *Server) listPolicies(w http.ResponseWriter, r *http.Request, p *Principal) error {
	writeJSON(w, http.StatusOK, policyList{Data: rbac.Policies(), Resources: rbac.Resources})
	return nil
}

func (s *Server) listRoles(w http.ResponseWriter, r *http.Request, p *Principal) error {
	custom, err := s.cfg.Store.ListRoles(r.Context(), p.OrgID)
	if err != nil {
		return err
	}
	out := []*rbac.Role{}
	for _, ro := range rbac.SystemRoles() {
		out = append(out, &ro)
	}
	writeJSON(w, http.StatusOK, roleList{Data: append(out, custom...)})
	return nil
}

// role finds a system role or one of the org's custom roles.
func (s *Server) role(r *http.Request, org, id string) (*rbac.Role, error) {
	if ro, ok := rbac.SystemRole(id); ok {
		return &ro, nil
	}
	ro, err := s.cfg.Store.GetRole(r.Context(), org, id)
	if err != nil {
		return nil, storeErr(err, "role")
	}
	return ro, nil
}

func (s *Server) getRole(w http.ResponseWriter, r *http.Request, p *Principal) error {
	ro, err := s.role(r, p.OrgID, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ro)
	return nil
}

type createRoleRequest struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Policies    []string `json:"policies"`
}

func (s *Server) createRole(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var req createRoleRequest
	if pr := decode(r, &req); pr != nil {
		return pr
	}
	var fields []FieldError
	if strings.TrimSpace(req.Name) == "" || len(req.Name) > 100 {
		fields = append(fields, FieldError{Field: "name", Rule: "required", Message: "is required, at most 100 characters"})
	}
	for _, sys := range rbac.SystemRoles() {
		if strings.EqualFold(sys.Name, req.Name) {
			fields = append(fields, FieldError{Field: "name", Rule: "unique", Message: "is the name of a system role"})
		}
	}
	if len(req.Policies) == 0 {
		fields = append(fields, FieldError{Field: "policies", Rule: "required", Message: "list at least one resource:action policy"})
	} else if _, err := rbac.Expand(req.Policies); err != nil {
		fields = append(fields, FieldError{Field: "policies", Rule: "enum", Message: err.Error() + "; GET /api/policies lists them"})
	}
	if len(fields) > 0 {
		return badRequest("the role is invalid", fields...)
	}
	ro := &rbac.Role{ID: "role_" + ulid.Make().String(), OrgID: p.OrgID, Name: req.Name, Description: req.Description,
		Policies: req.Policies, CreatedAt: s.cfg.Now()}
	err := s.audited(r.Context(), p, entry(audit.ScopePlatform, "role.create", "role", ro.ID, map[string]any{"name": ro.Name, "policies": ro.Policies}),
		func(tx store.Tx) error { return tx.CreateRole(r.Context(), ro) })
	if errors.Is(err, store.ErrConflict) {
		return problem(http.StatusConflict, "a role named "+req.Name+" exists", FieldError{Field: "name", Rule: "unique", Message: "is taken"})
	}
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/roles/"+ro.ID)
	writeJSON(w, http.StatusCreated, ro)
	return nil
}

func (s *Server) deleteRole(w http.ResponseWriter, r *http.Request, p *Principal) error {
	id := r.PathValue("id")
	if _, ok := rbac.SystemRole(id); ok {
		return problem(http.StatusConflict, "system roles cannot be deleted")
	}
	err := s.audited(r.Context(), p, entry(audit.ScopePlatform, "role.delete", "role", id, nil),
		func(tx store.Tx) error { return tx.DeleteRole(r.Context(), p.OrgID, id) })
	if err != nil {
		return storeErr(err, "role")
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listAssignments(w http.ResponseWriter, r *http.Request, p *Principal) error {
	list, err := s.cfg.Store.ListAssignments(r.Context(), p.OrgID, r.URL.Query().Get("email"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, assignmentList{Data: list})
	return nil
}

type createAssignmentRequest struct {
	Email  string `json:"email"`
	RoleID string `json:"roleID"`
	Scope  string `json:"scope"`
}

func (s *Server) createAssignment(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var req createAssignmentRequest
	if pr := decode(r, &req); pr != nil {
		return pr
	}
	if req.Scope == "org" {
		req.Scope = ""
	}
	if err := rbac.ValidateScope(req.Scope); err != nil {
		return badRequest("bad scope", FieldError{Field: "scope", Rule: "format", Message: err.Error()})
	}
	ctx := r.Context()
	if _, err := s.cfg.Store.GetUser(ctx, p.OrgID, req.Email); errors.Is(err, store.ErrNotFound) {
		return problem(http.StatusNotFound, "user not found", FieldError{Field: "email", Rule: "exists", Message: "no user " + req.Email + " in your organisation; POST /api/users first"})
	} else if err != nil {
		return err
	}
	if _, err := s.role(r, p.OrgID, req.RoleID); err != nil {
		return problem(http.StatusNotFound, "role not found", FieldError{Field: "roleID", Rule: "exists", Message: "no role " + req.RoleID})
	}
	if req.Scope != "" {
		kind, id, _ := strings.Cut(req.Scope, ":")
		if _, err := newScopes(s.cfg.Store, p.OrgID).of(ctx, kind, id); errors.Is(err, store.ErrNotFound) {
			return problem(http.StatusNotFound, "scope not found", FieldError{Field: "scope", Rule: "exists", Message: "no " + kind + " " + id + " in your organisation"})
		} else if err != nil {
			return err
		}
	}
	a := &rbac.Assignment{ID: "ras_" + ulid.Make().String(), OrgID: p.OrgID, Email: req.Email, RoleID: req.RoleID,
		Scope: req.Scope, CreatedAt: s.cfg.Now()}
	err := s.audited(ctx, p, entry(audit.ScopePlatform, "role-assignment.create", "role-assignment", a.ID,
		map[string]any{"email": a.Email, "roleID": a.RoleID, "scope": a.Scope}),
		func(tx store.Tx) error { return tx.CreateAssignment(ctx, a) })
	if errors.Is(err, store.ErrConflict) {
		return problem(http.StatusConflict, req.Email+" already holds "+req.RoleID+" at this scope")
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, a)
	return nil
}

func (s *Server) deleteAssignment(w http.ResponseWriter, r *http.Request, p *Principal) error {
	id := r.PathValue("id")
	e := entry(audit.ScopePlatform, "role-assignment.delete", "role-assignment", id, nil)
	err := s.audited(r.Context(), p, e, func(tx store.Tx) error {
		a, err := tx.DeleteAssignment(r.Context(), p.OrgID, id)
		if err == nil {
			e.Metadata, _ = json.Marshal(map[string]any{"email": a.Email, "roleID": a.RoleID, "scope": a.Scope})
		}
		return err
	})
	if err != nil {
		return storeErr(err, "role assignment")
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listUsers(w http.ResponseWriter, r *http.Request, p *Principal) error {
	list, err := s.cfg.Store.ListUsers(r.Context(), p.OrgID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, userList{Data: list})
	return nil
}

type createUserRequest struct {
	Email string `json:"email"`
	Name  string `json:"name"`
	// RoleID, if set, is assigned org-wide in the same change.
	RoleID string `json:"roleID"`
}

// ValidEmail is the rule for a user's email everywhere: one plain address, as RFC 5322 parses it.
func ValidEmail(s string) bool { return validation.Email(s) }

func (s *Server) createUser(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var req createUserRequest
	if pr := decode(r, &req); pr != nil {
		return pr
	}
	req.Email = strings.ToLower(strings.TrimSpace(req.Email))
	if !ValidEmail(req.Email) || strings.HasPrefix(req.Email, "system:") {
		return badRequest("bad email", FieldError{Field: "email", Rule: "format", Message: "must be an email address"})
	}
	if req.RoleID != "" {
		if _, err := s.role(r, p.OrgID, req.RoleID); err != nil {
			return problem(http.StatusNotFound, "role not found", FieldError{Field: "roleID", Rule: "exists", Message: "no role " + req.RoleID})
		}
	}
	now := s.cfg.Now()
	u := &store.User{OrgID: p.OrgID, Email: req.Email, Name: req.Name, CreatedAt: now}
	ctx := r.Context()
	err := s.audited(ctx, p, entry(audit.ScopePlatform, "user.create", "user", u.Email, map[string]any{"roleID": req.RoleID}),
		func(tx store.Tx) error {
			if err := tx.CreateUser(ctx, u); err != nil {
				return err
			}
			if req.RoleID == "" {
				return nil
			}
			return tx.CreateAssignment(ctx, &rbac.Assignment{ID: "ras_" + ulid.Make().String(), OrgID: p.OrgID,
				Email: u.Email, RoleID: req.RoleID, CreatedAt: now})
		})
	if errors.Is(err, store.ErrConflict) {
		return problem(http.StatusConflict, "user "+req.Email+" exists")
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, u)
	return nil
}

func (s *Server) deleteUser(w http.ResponseWriter, r *http.Request, p *Principal) error {
	email := r.PathValue("email")
	err := s.audited(r.Context(), p, entry(audit.ScopePlatform, "user.delete", "user", email, nil),
		func(tx store.Tx) error { return tx.DeleteUser(r.Context(), p.OrgID, email) })
	if err != nil {
		return storeErr(err, "user")
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// EffectivePermissions is the answer of GET /users/{email}/permissions.
type EffectivePermissions struct {
	Email       string              `json:"email"`
	Assignments []*rbac.Assignment  `json:"assignments"`
	Grants      []rbac.Grant        `json:"grants"`
	OrgWide     []string            `json:"orgWide"`
	Scoped      map[string][]string `json:"scoped"` // scope → policies held there only
}

func (s *Server) userPermissions(w http.ResponseWriter, r *http.Request, p *Principal) error {
	ctx := r.Context()
	email := r.PathValue("email")
	if _, err := s.cfg.Store.GetUser(ctx, p.OrgID, email); err != nil {
		return storeErr(err, "user")
	}
	perms, err := rbac.Effective(ctx, s.cfg.Store, p.OrgID, email)
	if err != nil {
		return err
	}
	as, err := s.cfg.Store.ListAssignments(ctx, p.OrgID, email)
	if err != nil {
		return err
	}
	out := EffectivePermissions{Email: email, Assignments: as, Grants: perms.Grants(), OrgWide: []string{}, Scoped: map[string][]string{}}
	for _, g := range out.Grants {
		if g.Scope == "" {
			out.OrgWide = append(out.OrgWide, g.Policy)
		} else if !perms.OrgWide(g.Policy) {
			out.Scoped[g.Scope] = append(out.Scoped[g.Scope], g.Policy)
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) listTeams(w http.ResponseWriter, r *http.Request, p *Principal) error {
	list, err := s.cfg.Store.ListTeams(r.Context(), p.OrgID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, teamList{Data: list})
	return nil
}

func (s *Server) getTeam(w http.ResponseWriter, r *http.Request, p *Principal) error {
	t, err := s.cfg.Store.GetTeam(r.Context(), p.OrgID, r.PathValue("id"))
	if err != nil {
		return storeErr(err, "team")
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

type createTeamRequest struct {
	Name     string   `json:"name"`
	Members  []string `json:"members"`
	SpaceIDs []string `json:"spaceIDs"`
}

func (s *Server) createTeam(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var req createTeamRequest
	if pr := decode(r, &req); pr != nil {
		return pr
	}
	if strings.TrimSpace(req.Name) == "" || len(req.Name) > 100 {
		return badRequest("bad name", FieldError{Field: "name", Rule: "required", Message: "is required, at most 100 characters"})
	}
	ctx := r.Context()
	if err := s.checkTeamRefs(ctx, p.OrgID, req.Members, req.SpaceIDs); err != nil {
		return err
	}
	if err := s.checkAddedSpaces(ctx, p, nil, req.SpaceIDs); err != nil {
		return err
	}
	t := &store.Team{ID: "team_" + ulid.Make().String(), OrgID: p.OrgID, Name: req.Name, Members: req.Members,
		SpaceIDs: req.SpaceIDs, CreatedAt: s.cfg.Now()}
	err := s.audited(ctx, p, entry(audit.ScopePlatform, "team.create", "team", t.ID, map[string]any{"name": t.Name}),
		func(tx store.Tx) error { return tx.CreateTeam(ctx, t) })
	if errors.Is(err, store.ErrConflict) {
		return problem(http.StatusConflict, "a team named "+req.Name+" exists")
	}
	if err != nil {
		return err
	}
	if t.Members == nil {
		t.Members = []string{}
	}
	if t.SpaceIDs == nil {
		t.SpaceIDs = []string{}
	}
	writeJSON(w, http.StatusCreated, t)
	return nil
}

type patchTeamRequest struct {
	Name     *string  `json:"name"`
	Members  []string `json:"members"`  // nil: unchanged
	SpaceIDs []string `json:"spaceIDs"` // nil: unchanged
}

func (s *Server) patchTeam(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var req patchTeamRequest
	if pr := decode(r, &req); pr != nil {
		return pr
	}
	ctx := r.Context()
	id := r.PathValue("id")
	// The team first: another org's team is 404 whatever the body names.
	t, err := s.cfg.Store.GetTeam(ctx, p.OrgID, id)
	if err != nil {
		return storeErr(err, "team")
	}
	if err := s.checkTeamRefs(ctx, p.OrgID, req.Members, req.SpaceIDs); err != nil {
		return err
	}
	// Checked before the transaction (the scopes read the store, which SQLite's one connection
	// cannot serve inside it) and confirmed unchanged within.
	var checked []string
	if req.SpaceIDs != nil {
		if err := s.checkAddedSpaces(ctx, p, t.SpaceIDs, req.SpaceIDs); err != nil {
			return err
		}
		checked = t.SpaceIDs
	}
	var out *store.Team
	err = s.audited(ctx, p, entry(audit.ScopePlatform, "team.update", "team", id,
		map[string]any{"name": req.Name, "members": req.Members, "spaceIDs": req.SpaceIDs}),
		func(tx store.Tx) error {
			t, err := tx.GetTeam(ctx, p.OrgID, id)
			if err != nil {
				return err
			}
			if req.Name != nil {
				if strings.TrimSpace(*req.Name) == "" || len(*req.Name) > 100 {
					return badRequest("bad name", FieldError{Field: "name", Rule: "required", Message: "is required, at most 100 characters"})
				}
				t.Name = *req.Name
			}
			if req.Members != nil {
				t.Members = req.Members
			}
			if req.SpaceIDs != nil {
				if !slices.Equal(t.SpaceIDs, checked) {
					return problem(http.StatusConflict, "the team's spaces changed while this request was checked; send it again")
				}
				t.SpaceIDs = req.SpaceIDs
			}
			out = t
			return tx.UpdateTeam(ctx, t)
		})
	if errors.Is(err, store.ErrConflict) {
		return problem(http.StatusConflict, "a team with that name exists")
	}
	if err != nil {
		return storeErr(err, "team")
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// checkAddedSpaces refuses a change of a team's spaces that adds a space the caller may not
// update: every grant scoped to the team reaches the team's spaces, so adding one widens them
// all, and team:update on one team must not be a way to reach the rest of the organisation.
func (s *Server) checkAddedSpaces(ctx context.Context, p *Principal, have, want []string) error {
	sc := newScopes(s.cfg.Store, p.OrgID)
	for i, id := range want {
		if slices.Contains(have, id) {
			continue
		}
		chain, err := sc.of(ctx, "space", id)
		if err != nil {
			return storeErr(err, "space")
		}
		if !p.Can("space:update", chain...) {
			return problem(http.StatusForbidden, "adding space "+id+" to a team needs the space:update permission on it",
				FieldError{Field: "spaceIDs[" + strconv.Itoa(i) + "]", Rule: "permission", Message: "you may not update space " + id})
		}
	}
	return nil
}

// checkTeamRefs answers 422 naming the first member or space that is not in the org. Not 404:
// on PATCH /api/teams/{id} that would say the team itself is missing.
func (s *Server) checkTeamRefs(ctx context.Context, org string, members, spaceIDs []string) error {
	for i, m := range members {
		if _, err := s.cfg.Store.GetUser(ctx, org, m); errors.Is(err, store.ErrNotFound) {
			return problem(http.StatusUnprocessableEntity, "member not found", FieldError{Field: "members[" + strconv.Itoa(i) + "]", Rule: "exists", Message: "no user " + m})
		} else if err != nil {
			return err
		}
	}
	for i, id := range spaceIDs {
		if _, err := s.cfg.Store.GetSpace(ctx, org, id); errors.Is(err, store.ErrNotFound) {
			return problem(http.StatusUnprocessableEntity, "space not found", FieldError{Field: "spaceIDs[" + strconv.Itoa(i) + "]", Rule: "exists", Message: "no space " + id})
		} else if err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) deleteTeam(w http.ResponseWriter, r *http.Request, p *Principal) error {
	id := r.PathValue("id")
	err := s.audited(r.Context(), p, entry(audit.ScopePlatform, "team.delete", "team", id, nil),
		func(tx store.Tx) error { return tx.DeleteTeam(r.Context(), p.OrgID, id) })
	if err != nil {
		return storeErr(err, "team")
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
