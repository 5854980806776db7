package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/groundworkhq/groundwork/internal/app"
)

// newOrgs is an operator command: it works on the server's database directly (like migrate),
// because making an org is above any one org's admin.
func newOrgs() *cobra.Command {
	cmd := &cobra.Command{Use: "orgs", Short: "Make organisations (operator command: runs against the server's database)"}
	var database, dataDir, name, email string
	var ttl time.Duration
	create := &cobra.Command{
		Use:   "create --name NAME --admin-email EMAIL",
		Short: "Create an organisation with its first admin, and print that admin's API token once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := app.OpenStore(cmd.Context(), database, dataDir, newLogger())
			if err != nil {
				return err
			}
			defer st.Close()
			n, err := app.CreateOrg(cmd.Context(), st, name, email, ttl, time.Now())
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "org %s (%s) created; admin %s\n", n.Org.ID, n.Org.Name, n.AdminEmail)
			fmt.Fprintf(w, "admin token %s (shown once; store it now):\n%s\n", n.TokenID, n.TokenSecret)
			return nil
		},
	}
	fl := create.Flags()
	fl.StringVar(&name, "name", "", "organisation name")
	fl.StringVar(&email, "admin-email", "", "email of the org's first admin")
	fl.DurationVar(&ttl, "token-expires-in", 0, "expiry of the admin's first token (0: none)")
	fl.StringVar(&database, "database", os.Getenv("GROUNDWORK_DATABASE"), "database URL (GROUNDWORK_DATABASE)")
	fl.StringVar(&dataDir, "data-dir", envOr("GROUNDWORK_DATA_DIR", "./groundwork-data"), "data directory (GROUNDWORK_DATA_DIR)")
	_ = create.MarkFlagRequired("name")
	_ = create.MarkFlagRequired("admin-email")
	cmd.AddCommand(create)
	return cmd
}
