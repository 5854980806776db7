package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/store"
)

func newSpaces(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "spaces", Short: "Manage spaces (where jobs provision)"}
	var req struct {
		Name           string `json:"name"`
		Provider       string `json:"provider"`
		Region         string `json:"region"`
		CloudAccountID string `json:"cloudAccountID,omitempty"`
	}
	create := &cobra.Command{
		Use: "create", Short: "Create a space", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var sp store.Space
			if err := g.client().Do(ctxOf(cmd), "POST", "/api/spaces", req, &sp); err != nil {
				return err
			}
			return g.printOut(cmd.OutOrStdout(), sp, []string{"ID", "NAME", "PROVIDER", "REGION"}, func(add func(...any)) {
				add(sp.ID, sp.Name, sp.Provider, sp.Region)
			})
		},
	}
	create.Flags().StringVar(&req.Name, "name", "", "space name")
	create.Flags().StringVar(&req.Provider, "provider", "local", "aws, gcp, azure or local")
	create.Flags().StringVar(&req.Region, "region", "local", "region")
	create.Flags().StringVar(&req.CloudAccountID, "cloud-account", "", "cloud account ID (not for local)")
	list := &cobra.Command{
		Use: "list", Short: "List spaces", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var out struct {
				Data []store.Space `json:"data"`
			}
			if err := g.client().Do(ctxOf(cmd), "GET", "/api/spaces", nil, &out); err != nil {
				return err
			}
			return g.printOut(cmd.OutOrStdout(), out, []string{"ID", "NAME", "PROVIDER", "REGION", "STATUS"}, func(add func(...any)) {
				for _, s := range out.Data {
					add(s.ID, s.Name, s.Provider, s.Region, s.Status)
				}
			})
		},
	}
	get := &cobra.Command{
		Use: "get SPACE_ID", Short: "Show a space", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var sp store.Space
			if err := g.client().Do(ctxOf(cmd), "GET", "/api/spaces/"+args[0], nil, &sp); err != nil {
				return err
			}
			return g.printOut(cmd.OutOrStdout(), sp, nil, nil)
		},
	}
	del := &cobra.Command{
		Use: "delete SPACE_ID", Short: "Delete a space with no live jobs", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.client().Do(ctxOf(cmd), "DELETE", "/api/spaces/"+url.PathEscape(args[0]), nil, nil); err != nil {
				return err
			}
			return g.done(cmd, "deleted", args[0])
		},
	}
	cmd.AddCommand(create, list, get, del, newRegisterCluster(g))
	return cmd
}

func newAccounts(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "cloud-accounts", Aliases: []string{"accounts"}, Short: "Manage cloud accounts"}
	var req struct {
		Name            string            `json:"name"`
		Provider        string            `json:"provider"`
		Region          string            `json:"region"`
		AuthMethod      string            `json:"authMethod,omitempty"`
		CredentialsRef  string            `json:"credentialsRef,omitempty"`
		Credentials     map[string]string `json:"credentials,omitempty"`
		PermissionLevel string            `json:"permissionLevel,omitempty"`
	}
	create := &cobra.Command{
		Use: "create", Short: "Register a cloud account (credentials by secret reference only)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var a store.CloudAccount
			if err := g.client().Do(ctxOf(cmd), "POST", "/api/cloud-accounts", req, &a); err != nil {
				return err
			}
			return g.printOut(cmd.OutOrStdout(), a, accountHeader, func(add func(...any)) { addAccount(add, a) })
		},
	}
	create.Flags().StringVar(&req.Name, "name", "", "account name")
	create.Flags().StringVar(&req.Provider, "provider", "", "aws, gcp, azure or local")
	create.Flags().StringVar(&req.Region, "region", "", "default region")
	create.Flags().StringVar(&req.AuthMethod, "auth-method", "", "aws: static_keys|assume_role|temporary_credentials; gcp: service_account|oauth; azure: service_principal|workload_identity_federation|none (test targets, with config.endpoint); local: local (default: the SDK's default chain)")
	create.Flags().StringVar(&req.CredentialsRef, "credentials-ref", "", "secret reference holding the credentials")
	create.Flags().StringVar(&req.PermissionLevel, "permission-level", "", "read_only or read_write (default)")
	create.Flags().StringToStringVar(&req.Credentials, "credential", nil,
		"credential field for the auth method, e.g. accessKeyId=… (repeat); stored in the secret store, never shown again")
	list := &cobra.Command{
		Use: "list", Short: "List cloud accounts", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var out struct {
				Data []store.CloudAccount `json:"data"`
			}
			if err := g.client().Do(ctxOf(cmd), "GET", "/api/cloud-accounts", nil, &out); err != nil {
				return err
			}
			return g.printOut(cmd.OutOrStdout(), out, accountHeader, func(add func(...any)) {
				for _, a := range out.Data {
					addAccount(add, a)
				}
			})
		},
	}
	get := &cobra.Command{
		Use: "get ACCOUNT_ID", Short: "Show a cloud account (never its credentials)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var a store.CloudAccount
			if err := g.client().Do(ctxOf(cmd), "GET", "/api/cloud-accounts/"+url.PathEscape(args[0]), nil, &a); err != nil {
				return err
			}
			return g.printOut(cmd.OutOrStdout(), a, accountHeader, func(add func(...any)) { addAccount(add, a) })
		},
	}
	var upd struct {
		Name            *string `json:"name,omitempty"`
		PermissionLevel *string `json:"permissionLevel,omitempty"`
	}
	var newName, level string
	update := &cobra.Command{
		Use: "update ACCOUNT_ID [--name N] [--permission-level read_only|read_write]", Short: "Rename a cloud account or change its permission level",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("name") {
				upd.Name = &newName
			}
			if cmd.Flags().Changed("permission-level") {
				upd.PermissionLevel = &level
			}
			if upd.Name == nil && upd.PermissionLevel == nil {
				return fmt.Errorf("nothing to change: give --name or --permission-level")
			}
			var a store.CloudAccount
			if err := g.client().Do(ctxOf(cmd), "PATCH", "/api/cloud-accounts/"+url.PathEscape(args[0]), upd, &a); err != nil {
				return err
			}
			return g.printOut(cmd.OutOrStdout(), a, accountHeader, func(add func(...any)) { addAccount(add, a) })
		},
	}
	update.Flags().StringVar(&newName, "name", "", "new name")
	update.Flags().StringVar(&level, "permission-level", "", "read_only or read_write")
	policy := &cobra.Command{
		Use: "upgrade-policy ACCOUNT_ID", Short: "Show what to grant a read-only account before setting it read_write", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out struct {
				AccountID       string          `json:"accountID"`
				Provider        string          `json:"provider"`
				PermissionLevel string          `json:"permissionLevel"`
				Instruction     string          `json:"instruction"`
				Policy          json.RawMessage `json:"policy,omitempty"`
			}
			if err := g.client().Do(ctxOf(cmd), "GET", "/api/cloud-accounts/"+url.PathEscape(args[0])+"/upgrade-policy", nil, &out); err != nil {
				return err
			}
			if g.output != "table" {
				return g.printOut(cmd.OutOrStdout(), out, nil, nil)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%s (%s, %s)\n%s\n", out.AccountID, out.Provider, out.PermissionLevel, out.Instruction)
			if len(out.Policy) > 0 {
				var pretty bytes.Buffer
				if json.Indent(&pretty, out.Policy, "", "  ") == nil {
					fmt.Fprintln(w, pretty.String())
				}
			}
			return nil
		},
	}
	del := &cobra.Command{
		Use: "delete ACCOUNT_ID", Short: "Delete a cloud account no space uses", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.client().Do(ctxOf(cmd), "DELETE", "/api/cloud-accounts/"+url.PathEscape(args[0]), nil, nil); err != nil {
				return err
			}
			return g.done(cmd, "deleted", args[0])
		},
	}
	cmd.AddCommand(create, list, get, update, policy, del)
	return cmd
}

var accountHeader = []string{"ID", "NAME", "PROVIDER", "REGION", "AUTH", "PERMISSION"}

func addAccount(add func(...any), a store.CloudAccount) {
	add(a.ID, a.Name, a.Provider, a.Region, a.AuthMethod, a.PermissionLevel)
}

func newCatalog(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "catalog", Short: "Browse the catalog of types"}
	types := &cobra.Command{
		Use:   "types [CATEGORY/TYPE]",
		Short: "List the (category, type) pairs, or show one pair's settings and outputs",
		Example: "  groundwork catalog types\n" +
			"  groundwork catalog types managed-resource/postgres",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				return g.showType(cmd, args[0])
			}
			var out struct {
				Data []struct {
					Kind        string `json:"kind"`
					Type        string `json:"type"`
					Title       string `json:"title"`
					Description string `json:"description"`
				} `json:"data"`
			}
			if err := g.client().Do(ctxOf(cmd), "GET", "/api/catalog/types", nil, &out); err != nil {
				return err
			}
			return g.printOut(cmd.OutOrStdout(), out, []string{"PAIR", "TITLE", "DESCRIPTION"}, func(add func(...any)) {
				for _, t := range out.Data {
					add(t.Kind+"/"+t.Type, t.Title, t.Description)
				}
			})
		},
	}
	cmd.AddCommand(types)
	return cmd
}

// showType prints one catalog type: its settings (from the JSON Schema: name, type, default,
// whether required) and its outputs.
func (g *globals) showType(cmd *cobra.Command, pair string) error {
	p, err := catalog.ParsePair(pair)
	if err != nil {
		return err
	}
	var t struct {
		Kind        string           `json:"kind"`
		Type        string           `json:"type"`
		Title       string           `json:"title"`
		Description string           `json:"description,omitempty"`
		Settings    json.RawMessage  `json:"settings"`
		Outputs     []catalog.Output `json:"outputs"`
	}
	if err := g.client().Do(ctxOf(cmd), "GET", "/api/catalog/types/"+string(p.Kind)+"/"+p.Type, nil, &t); err != nil {
		return err
	}
	if g.output != "table" {
		return g.printOut(cmd.OutOrStdout(), t, nil, nil)
	}
	var schema struct {
		Required   []string `json:"required"`
		Properties map[string]struct {
			Type        string `json:"type"`
			Default     any    `json:"default"`
			Description string `json:"description"`
			Enum        []any  `json:"enum"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(t.Settings, &schema) // a schema without properties shows no rows
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "%s/%s  %s\n%s\n\nSETTINGS\n", t.Kind, t.Type, t.Title, t.Description)
	names := make([]string, 0, len(schema.Properties))
	for n := range schema.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	err = g.printOut(w, nil, []string{"NAME", "TYPE", "REQUIRED", "DEFAULT", "DESCRIPTION"}, func(add func(...any)) {
		for _, n := range names {
			ps := schema.Properties[n]
			def := "-"
			if ps.Default != nil {
				b, _ := json.Marshal(ps.Default)
				def = string(b)
			}
			desc := ps.Description
			if len(ps.Enum) > 0 {
				b, _ := json.Marshal(ps.Enum)
				desc = strings.TrimSpace("one of " + string(b) + " " + desc)
			}
			add(n, ps.Type, slices.Contains(schema.Required, n), def, desc)
		}
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "\nOUTPUTS")
	return g.printOut(w, nil, []string{"NAME", "TYPE", "SECRET", "DESCRIPTION"}, func(add func(...any)) {
		for _, o := range t.Outputs {
			add(o.Name, o.Type, o.Secret, o.Description)
		}
	})
}
