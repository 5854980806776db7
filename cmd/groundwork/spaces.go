package main

import (
	"github.com/spf13/cobra"

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
			return g.client().Do(ctxOf(cmd), "DELETE", "/api/spaces/"+args[0], nil, nil)
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
			return g.printOut(cmd.OutOrStdout(), a, []string{"ID", "NAME", "PROVIDER", "REGION"}, func(add func(...any)) {
				add(a.ID, a.Name, a.Provider, a.Region)
			})
		},
	}
	create.Flags().StringVar(&req.Name, "name", "", "account name")
	create.Flags().StringVar(&req.Provider, "provider", "", "aws, gcp, azure or local")
	create.Flags().StringVar(&req.Region, "region", "", "default region")
	create.Flags().StringVar(&req.AuthMethod, "auth-method", "", "aws: static_keys|assume_role|temporary_credentials; gcp: service_account|oauth; azure: service_principal|workload_identity_federation; local: local (default: the SDK's default chain)")
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
			return g.printOut(cmd.OutOrStdout(), out, []string{"ID", "NAME", "PROVIDER", "REGION", "AUTH", "PERMISSION"}, func(add func(...any)) {
				for _, a := range out.Data {
					add(a.ID, a.Name, a.Provider, a.Region, a.AuthMethod, a.PermissionLevel)
				}
			})
		},
	}
	cmd.AddCommand(create, list)
	return cmd
}

func newCatalog(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "catalog", Short: "Browse the catalog of types"}
	types := &cobra.Command{
		Use: "types", Short: "List the (category, type) pairs and their settings", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var out struct {
				Data []struct {
					Kind        string `json:"kind"`
					Type        string `json:"type"`
					Description string `json:"description"`
				} `json:"data"`
			}
			if err := g.client().Do(ctxOf(cmd), "GET", "/api/catalog/types", nil, &out); err != nil {
				return err
			}
			return g.printOut(cmd.OutOrStdout(), out, []string{"CATEGORY", "TYPE", "DESCRIPTION"}, func(add func(...any)) {
				for _, t := range out.Data {
					add(t.Kind, t.Type, t.Description)
				}
			})
		},
	}
	cmd.AddCommand(types)
	return cmd
}
