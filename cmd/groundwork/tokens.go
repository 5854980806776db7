package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/groundworkhq/groundwork/internal/client"
)

type tokenView struct {
	ID        string     `json:"id"`
	Email     string     `json:"email"`
	Name      string     `json:"name"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
	CreatedAt time.Time  `json:"createdAt"`
	Secret    string     `json:"secret,omitempty"`
}

func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Local().Format(time.RFC3339)
}

func newTokens(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "tokens", Short: "Manage API tokens (the secret is shown once, at creation)"}
	var req struct {
		Name      string `json:"name"`
		Email     string `json:"email,omitempty"`
		ExpiresIn string `json:"expiresIn,omitempty"`
	}
	create := &cobra.Command{
		Use: "create", Short: "Create a token for you, or for --email", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var t tokenView
			if err := g.client().Do(ctxOf(cmd), "POST", "/api/tokens", req, &t); err != nil {
				return err
			}
			if g.output != "table" {
				return g.printOut(cmd.OutOrStdout(), t, nil, nil)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Token %s for %s (expires %s). Its secret is shown only now:\n\n  %s\n\n",
				t.ID, t.Email, when(t.ExpiresAt), t.Secret)
			return nil
		},
	}
	create.Flags().StringVar(&req.Name, "name", "", "what the token is for (required)")
	create.Flags().StringVar(&req.Email, "email", "", "whose token (default: yours; others need token:create)")
	create.Flags().StringVar(&req.ExpiresIn, "expires-in", "", "lifetime such as 720h (default: no expiry)")
	var email string
	list := &cobra.Command{
		Use: "list", Short: "List tokens (never their secrets)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var out struct {
				Data []tokenView `json:"data"`
			}
			path := "/api/tokens"
			if email != "" {
				path += "?email=" + url.QueryEscape(email)
			}
			if err := g.client().Do(ctxOf(cmd), "GET", path, nil, &out); err != nil {
				return err
			}
			return g.printOut(cmd.OutOrStdout(), out, []string{"ID", "EMAIL", "NAME", "EXPIRES", "REVOKED"}, func(add func(...any)) {
				for _, t := range out.Data {
					add(t.ID, t.Email, t.Name, when(t.ExpiresAt), when(t.RevokedAt))
				}
			})
		},
	}
	list.Flags().StringVar(&email, "email", "", "only this user's tokens")
	revoke := &cobra.Command{
		Use: "revoke TOKEN_ID", Short: "Revoke a token at once", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.client().Do(ctxOf(cmd), "DELETE", "/api/tokens/"+url.PathEscape(args[0]), nil, nil); err != nil {
				return err
			}
			return g.done(cmd, "revoked", args[0])
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

func newUsers(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "users", Short: "Manage users and see what they may do"}
	var req struct {
		Email  string `json:"email"`
		Name   string `json:"name,omitempty"`
		RoleID string `json:"roleID,omitempty"`
	}
	create := &cobra.Command{
		Use: "create", Short: "Add a user, optionally with an org-wide role", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var out map[string]any
			if err := g.client().Do(ctxOf(cmd), "POST", "/api/users", req, &out); err != nil {
				return err
			}
			return g.printOut(cmd.OutOrStdout(), out, nil, nil)
		},
	}
	create.Flags().StringVar(&req.Email, "email", "", "the user's email")
	create.Flags().StringVar(&req.Name, "name", "", "display name")
	create.Flags().StringVar(&req.RoleID, "role", "", "role to assign org-wide (role_admin, role_editor, role_viewer or a custom role id)")
	list := &cobra.Command{
		Use: "list", Short: "List users", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var out struct {
				Data []struct {
					Email, Name string
					CreatedAt   time.Time
				} `json:"data"`
			}
			if err := g.client().Do(ctxOf(cmd), "GET", "/api/users", nil, &out); err != nil {
				return err
			}
			return g.printOut(cmd.OutOrStdout(), out, []string{"EMAIL", "NAME", "CREATED"}, func(add func(...any)) {
				for _, u := range out.Data {
					add(u.Email, u.Name, u.CreatedAt.Local().Format(time.RFC3339))
				}
			})
		},
	}
	del := &cobra.Command{
		Use: "delete EMAIL", Short: "Remove a user, their role assignments and tokens", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.client().Do(ctxOf(cmd), "DELETE", "/api/users/"+url.PathEscape(args[0]), nil, nil); err != nil {
				return err
			}
			return g.done(cmd, "deleted", args[0])
		},
	}
	perms := &cobra.Command{
		Use: "permissions EMAIL", Short: "Show a user's effective permissions", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out struct {
				OrgWide []string            `json:"orgWide"`
				Scoped  map[string][]string `json:"scoped"`
			}
			if err := g.client().Do(ctxOf(cmd), "GET", "/api/users/"+url.PathEscape(args[0])+"/permissions", nil, &out); err != nil {
				return err
			}
			return g.printOut(cmd.OutOrStdout(), out, []string{"SCOPE", "POLICIES"}, func(add func(...any)) {
				add("org", strings.Join(out.OrgWide, " "))
				for scope, ps := range out.Scoped {
					add(scope, strings.Join(ps, " "))
				}
			})
		},
	}
	cmd.AddCommand(create, list, del, perms)
	return cmd
}

func newRoles(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "roles", Short: "List roles, create custom roles, assign and unassign them"}
	list := &cobra.Command{
		Use: "list", Short: "List system and custom roles", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var out struct {
				Data []struct {
					ID, Name string
					Policies []string
					System   bool
				} `json:"data"`
			}
			if err := g.client().Do(ctxOf(cmd), "GET", "/api/roles", nil, &out); err != nil {
				return err
			}
			return g.printOut(cmd.OutOrStdout(), out, []string{"ID", "NAME", "SYSTEM", "POLICIES"}, func(add func(...any)) {
				for _, r := range out.Data {
					add(r.ID, r.Name, r.System, len(r.Policies))
				}
			})
		},
	}
	var role struct {
		Name        string   `json:"name"`
		Description string   `json:"description,omitempty"`
		Policies    []string `json:"policies"`
	}
	create := &cobra.Command{
		Use: "create", Short: "Create a custom role from resource:action policies", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var out map[string]any
			if err := g.client().Do(ctxOf(cmd), "POST", "/api/roles", role, &out); err != nil {
				return err
			}
			return g.printOut(cmd.OutOrStdout(), out, nil, nil)
		},
	}
	create.Flags().StringVar(&role.Name, "name", "", "role name")
	create.Flags().StringVar(&role.Description, "description", "", "what the role is for")
	create.Flags().StringSliceVar(&role.Policies, "policy", nil, "a policy such as provisioning:write (repeat)")
	var as struct {
		Email  string `json:"email"`
		RoleID string `json:"roleID"`
		Scope  string `json:"scope,omitempty"`
	}
	assign := &cobra.Command{
		Use: "assign", Short: "Grant a role to a user, org-wide, in a team (team:<id>) or on one resource (space:<id>)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var out map[string]any
			if err := g.client().Do(ctxOf(cmd), "POST", "/api/role-assignments", as, &out); err != nil {
				return err
			}
			return g.printOut(cmd.OutOrStdout(), out, nil, nil)
		},
	}
	assign.Flags().StringVar(&as.Email, "email", "", "the user")
	assign.Flags().StringVar(&as.RoleID, "role", "", "the role id")
	assign.Flags().StringVar(&as.Scope, "scope", "", "team:<id> or <resource>:<id> (default: org-wide)")
	unassign := &cobra.Command{
		Use: "unassign ASSIGNMENT_ID", Short: "Remove a role assignment", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.client().Do(ctxOf(cmd), "DELETE", "/api/role-assignments/"+url.PathEscape(args[0]), nil, nil); err != nil {
				return err
			}
			return g.done(cmd, "deleted", args[0])
		},
	}
	policies := &cobra.Command{
		Use: "policies", Short: "List every policy (resource:action) roles are made of", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var out struct {
				Data      []string `json:"data"`
				Resources []struct {
					Resource    string   `json:"resource"`
					Actions     []string `json:"actions"`
					AdminOnly   bool     `json:"adminOnly"`
					Description string   `json:"description"`
				} `json:"resources"`
			}
			if err := g.client().Do(ctxOf(cmd), "GET", "/api/policies", nil, &out); err != nil {
				return err
			}
			return g.printOut(cmd.OutOrStdout(), out, []string{"RESOURCE", "ACTIONS", "ADMIN_ONLY", "DESCRIPTION"}, func(add func(...any)) {
				for _, r := range out.Resources {
					add(r.Resource, strings.Join(r.Actions, ","), r.AdminOnly, r.Description)
				}
			})
		},
	}
	cmd.AddCommand(list, create, assign, unassign, policies)
	return cmd
}

// newRoleAssignments is `groundwork role-assignments`: who holds which role where.
func newRoleAssignments(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "role-assignments", Short: "List, grant and remove role assignments"}
	var email string
	list := &cobra.Command{
		Use: "list", Short: "List role assignments (of one user with --email)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var out struct {
				Data []struct {
					ID     string `json:"id"`
					Email  string `json:"email"`
					RoleID string `json:"roleID"`
					Scope  string `json:"scope"`
				} `json:"data"`
			}
			path := "/api/role-assignments"
			if email != "" {
				path += "?email=" + url.QueryEscape(email)
			}
			if err := g.client().Do(ctxOf(cmd), "GET", path, nil, &out); err != nil {
				return err
			}
			return g.printOut(cmd.OutOrStdout(), out, []string{"ID", "EMAIL", "ROLE", "SCOPE"}, func(add func(...any)) {
				for _, a := range out.Data {
					scope := a.Scope
					if scope == "" {
						scope = "(org)"
					}
					add(a.ID, a.Email, a.RoleID, scope)
				}
			})
		},
	}
	list.Flags().StringVar(&email, "email", "", "only this user's assignments")
	var as struct {
		Email  string `json:"email"`
		RoleID string `json:"roleID"`
		Scope  string `json:"scope,omitempty"`
	}
	create := &cobra.Command{
		Use: "create --email E --role ROLE_ID [--scope S]", Short: "Grant a role, org-wide, in a team (team:<id>) or on one resource (space:<id>)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var out map[string]any
			if err := g.client().Do(ctxOf(cmd), "POST", "/api/role-assignments", as, &out); err != nil {
				return err
			}
			return g.printOut(cmd.OutOrStdout(), out, []string{"ID", "EMAIL", "ROLE", "SCOPE"}, func(add func(...any)) {
				add(out["id"], out["email"], out["roleID"], out["scope"])
			})
		},
	}
	create.Flags().StringVar(&as.Email, "email", "", "the user")
	create.Flags().StringVar(&as.RoleID, "role", "", "the role id")
	create.Flags().StringVar(&as.Scope, "scope", "", "team:<id> or <resource>:<id> (default: org-wide)")
	del := &cobra.Command{
		Use: "delete ASSIGNMENT_ID", Short: "Remove a role assignment", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.client().Do(ctxOf(cmd), "DELETE", "/api/role-assignments/"+url.PathEscape(args[0]), nil, nil); err != nil {
				return err
			}
			return g.done(cmd, "deleted", args[0])
		},
	}
	cmd.AddCommand(list, create, del)
	return cmd
}

// auditExports are the -o values audit-logs takes besides the common ones: every matching entry,
// streamed as the server writes it.
var auditExports = []string{"csv", "ndjson"}

func newAuditLogs(g *globals) *cobra.Command {
	// flag name (kebab-case, as typed) -> query parameter
	params := []struct{ flag, param, help string }{
		{"scope", "scope", "comma-separated scopes"}, {"action", "action", "action, e.g. provisioning-job.create"},
		{"actor", "actor", "an email or system:<component>"}, {"resource-type", "resourceType", "resource type"},
		{"resource-id", "resourceID", "resource id"}, {"from", "from", "RFC 3339 start"}, {"to", "to", "RFC 3339 end"},
	}
	vals := map[string]*string{}
	var page, limit int
	var format string
	cmd := &cobra.Command{
		Use: "audit-logs", Short: "Read or export the audit log (-o csv or -o ndjson exports every matching entry)", Args: cobra.NoArgs,
		Annotations: map[string]string{extraOutputs: strings.Join(auditExports, ",")},
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := url.Values{}
			for _, p := range params {
				if s := *vals[p.flag]; s != "" {
					v.Set(p.param, s)
				}
			}
			if page > 0 {
				v.Set("page", fmt.Sprint(page))
			}
			if limit > 0 {
				v.Set("limit", fmt.Sprint(limit))
			}
			if format != "" {
				g.output = format
			}
			if slices.Contains(auditExports, g.output) {
				v.Set("format", g.output)
				return export(cmd, g.client(), "/api/audit-logs?"+v.Encode(), cmd.OutOrStdout())
			}
			var out struct {
				Data []struct {
					ID           string          `json:"id"`
					Scope        string          `json:"scope"`
					Action       string          `json:"action"`
					Actor        string          `json:"actor"`
					ResourceType string          `json:"resourceType"`
					ResourceID   string          `json:"resourceID"`
					Metadata     json.RawMessage `json:"metadata,omitempty"`
					CreatedAt    time.Time       `json:"createdAt"`
				} `json:"data"`
				Total int `json:"total"`
			}
			if err := g.client().Do(ctxOf(cmd), "GET", "/api/audit-logs?"+v.Encode(), nil, &out); err != nil {
				return err
			}
			return g.printOut(cmd.OutOrStdout(), out, []string{"TIME", "ACTOR", "ACTION", "RESOURCE"}, func(add func(...any)) {
				for _, e := range out.Data {
					add(e.CreatedAt.Local().Format(time.RFC3339), e.Actor, e.Action, e.ResourceType+" "+e.ResourceID)
				}
			})
		},
	}
	for _, p := range params {
		vals[p.flag] = cmd.Flags().String(p.flag, "", p.help)
	}
	cmd.Flags().IntVar(&page, "page", 0, "page, from 1")
	cmd.Flags().IntVar(&limit, "limit", 0, "entries per page (at most 200)")
	// --format was the export switch before -o took it; kept so that scripts keep working.
	cmd.Flags().StringVar(&format, "format", "", "csv or ndjson (same as -o)")
	_ = cmd.Flags().MarkDeprecated("format", "use -o csv or -o ndjson")
	return cmd
}

// export streams a non-JSON answer (CSV, NDJSON) to w.
func export(cmd *cobra.Command, c *client.Client, path string, w io.Writer) error {
	req, err := http.NewRequestWithContext(ctxOf(cmd), "GET", c.BaseURL+path, nil)
	if err != nil {
		return err
	}
	if c.Token == "" {
		return client.ErrNoToken
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach Groundwork at %s: %w", c.BaseURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e := &client.Error{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode)}
		_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(e)
		return e
	}
	_, err = io.Copy(w, resp.Body)
	return err
}
