package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/groundworkhq/groundwork/internal/datastore"
)

func jobPath(jobID string) string { return "/api/provisioning-jobs/" + jobID }

func newDatabases(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "databases", Short: "Databases (and their owners) on a datastore job's server"}
	var owner string
	create := &cobra.Command{
		Use: "create JOB_ID NAME --owner USER", Short: "Create a database and its owner (password kept in the secret store)",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var d datastore.Database
			req := map[string]string{"name": args[1], "owner": owner}
			if err := g.client().Do(ctxOf(cmd), "POST", jobPath(args[0])+"/databases", req, &d); err != nil {
				return err
			}
			return g.printDatabases(cmd, d, []datastore.Database{d})
		},
	}
	create.Flags().StringVar(&owner, "owner", "", "the user that owns the database")
	_ = create.MarkFlagRequired("owner")
	list := &cobra.Command{
		Use: "list JOB_ID", Short: "List a datastore job's databases", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out struct {
				Data []datastore.Database `json:"data"`
			}
			if err := g.client().Do(ctxOf(cmd), "GET", jobPath(args[0])+"/databases", nil, &out); err != nil {
				return err
			}
			return g.printDatabases(cmd, out, out.Data)
		},
	}
	del := &cobra.Command{
		Use: "delete JOB_ID DATABASE_ID", Short: "Drop a database and its owner", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.client().Do(ctxOf(cmd), "DELETE", jobPath(args[0])+"/databases/"+args[1], nil, nil); err != nil {
				return err
			}
			return g.done(cmd, "deleted", args[1])
		},
	}
	cmd.AddCommand(create, list, del)
	return cmd
}

func (g *globals) printDatabases(cmd *cobra.Command, v any, list []datastore.Database) error {
	return g.printOut(cmd.OutOrStdout(), v, []string{"ID", "NAME", "OWNER", "STATUS", "HOST", "PORT", "SECRET_REF"}, func(add func(...any)) {
		for _, d := range list {
			add(d.ID, d.Name, d.Owner, d.Status, d.Endpoint.Host, d.Endpoint.Port, d.Endpoint.SecretRef)
		}
	})
}

// connectionsPath is a job's connections, or a database's when databaseID is set.
func connectionsPath(jobID, databaseID string) string {
	if databaseID == "" {
		return jobPath(jobID) + "/connections"
	}
	return jobPath(jobID) + "/databases/" + databaseID + "/connections"
}

func newConnections(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "connections", Short: "Connections (host, port, user, secret reference) to a datastore job or one of its databases"}
	var databaseID, name string
	create := &cobra.Command{
		Use: "create JOB_ID [--database DATABASE_ID]", Short: "Create a connection (job-scoped: the admin; database-scoped: the owner)",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var c datastore.Connection
			req := map[string]string{}
			if name != "" {
				req["name"] = name
			}
			if err := g.client().Do(ctxOf(cmd), "POST", connectionsPath(args[0], databaseID), req, &c); err != nil {
				return err
			}
			return g.printConnections(cmd, c, []datastore.Connection{c})
		},
	}
	create.Flags().StringVar(&name, "name", "", "a name for the connection")
	list := &cobra.Command{
		Use: "list JOB_ID [--database DATABASE_ID]", Short: "List connections of one scope", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out struct {
				Data []datastore.Connection `json:"data"`
			}
			if err := g.client().Do(ctxOf(cmd), "GET", connectionsPath(args[0], databaseID), nil, &out); err != nil {
				return err
			}
			return g.printConnections(cmd, out, out.Data)
		},
	}
	del := &cobra.Command{
		Use: "delete JOB_ID CONNECTION_ID [--database DATABASE_ID]", Short: "Delete a connection (the user stays)", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.client().Do(ctxOf(cmd), "DELETE", connectionsPath(args[0], databaseID)+"/"+args[1], nil, nil); err != nil {
				return err
			}
			return g.done(cmd, "deleted", args[1])
		},
	}
	for _, c := range []*cobra.Command{create, list, del} {
		c.Flags().StringVar(&databaseID, "database", "", "database ID (database-scoped connections)")
	}
	cmd.AddCommand(create, list, del)
	return cmd
}

func (g *globals) printConnections(cmd *cobra.Command, v any, list []datastore.Connection) error {
	return g.printOut(cmd.OutOrStdout(), v, []string{"ID", "DATABASE_ID", "HOST", "PORT", "USER", "DATABASE", "SECRET_REF"}, func(add func(...any)) {
		for _, c := range list {
			add(c.ID, c.DatabaseID, c.Endpoint.Host, c.Endpoint.Port, c.Endpoint.User, c.Endpoint.Database, c.Endpoint.SecretRef)
		}
	})
}

func newSecrets(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "secrets", Short: "Secrets by reference"}
	reveal := &cobra.Command{
		Use: "reveal REF", Short: "Print the value behind a secret reference (admins; audited)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out struct {
				Value string `json:"value"`
			}
			if err := g.client().Do(ctxOf(cmd), "POST", "/api/secrets/reveal", map[string]string{"ref": args[0]}, &out); err != nil {
				return err
			}
			if g.output != "table" {
				return g.printOut(cmd.OutOrStdout(), out, nil, nil)
			}
			// The bare value, so that it can be piped without parsing.
			fmt.Fprintln(cmd.OutOrStdout(), out.Value)
			return nil
		},
	}
	cmd.AddCommand(reveal)
	return cmd
}
