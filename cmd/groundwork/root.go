package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/client"
)

type globals struct {
	url, token, output string
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "groundwork",
		Short:         "Self-hosted multi-cloud infrastructure provisioner",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.url, "url", envOr("GROUNDWORK_URL", "http://localhost:5087"), "server URL (GROUNDWORK_URL)")
	root.PersistentFlags().StringVar(&g.token, "token", os.Getenv("GROUNDWORK_TOKEN"), "API token (GROUNDWORK_TOKEN)")
	root.PersistentFlags().StringVarP(&g.output, "output", "o", "table", "output format: table or json")
	root.AddCommand(newServe(), newMigrate(), newOrgs(), newJobs(g), newSpaces(g), newAccounts(g), newCatalog(g))
	root.AddCommand(newProvisioners(g), newComponents(g))
	root.AddCommand(newTokens(g), newUsers(g), newRoles(g), newAuditLogs(g))
	root.AddCommand(newDatabases(g), newConnections(g), newSecrets(g))
	return root
}

func (g *globals) client() *client.Client { return client.New(g.url, g.token) }

func newLogger() *slog.Logger {
	var h slog.Handler
	if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		h = slog.NewTextHandler(os.Stderr, nil)
	} else {
		h = slog.NewJSONHandler(os.Stderr, nil)
	}
	return slog.New(h)
}

func newServe() *cobra.Command {
	o := app.Options{}
	workers := 0
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the API server and the job engine",
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Logger = newLogger()
			o.Workers = workers
			o.BootstrapToken = os.Getenv("GROUNDWORK_BOOTSTRAP_TOKEN")
			if v := os.Getenv("GROUNDWORK_POLL_INTERVAL"); v != "" {
				d, err := time.ParseDuration(v)
				if err != nil {
					return fmt.Errorf("GROUNDWORK_POLL_INTERVAL: %w", err)
				}
				o.PollInterval = d
			}
			return app.Run(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.Addr, "addr", envOr("GROUNDWORK_ADDR", ":5087"), "listen address (GROUNDWORK_ADDR)")
	cmd.Flags().StringVar(&o.Database, "database", os.Getenv("GROUNDWORK_DATABASE"), "postgres://… for PostgreSQL; default SQLite in the data dir (GROUNDWORK_DATABASE)")
	cmd.Flags().StringVar(&o.DataDir, "data-dir", envOr("GROUNDWORK_DATA_DIR", "./groundwork-data"), "data directory (GROUNDWORK_DATA_DIR)")
	cmd.Flags().IntVar(&workers, "workers", envInt("GROUNDWORK_WORKERS", 8), "concurrent jobs this replica runs (GROUNDWORK_WORKERS)")
	addComponentFlags(cmd, &o.Components)
	return cmd
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func newMigrate() *cobra.Command {
	var database, dataDir string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply database migrations and exit",
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := app.OpenStore(cmd.Context(), database, dataDir, newLogger())
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "migrations applied")
			return st.Close()
		},
	}
	cmd.Flags().StringVar(&database, "database", os.Getenv("GROUNDWORK_DATABASE"), "database URL (GROUNDWORK_DATABASE)")
	cmd.Flags().StringVar(&dataDir, "data-dir", envOr("GROUNDWORK_DATA_DIR", "./groundwork-data"), "data directory (GROUNDWORK_DATA_DIR)")
	return cmd
}

// printOut writes v as JSON, or as a table built by rows when the output is a table.
func (g *globals) printOut(w io.Writer, v any, header []string, rows func(add func(cols ...any))) error {
	if g.output == "json" || rows == nil {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i, h := range header {
		if i > 0 {
			fmt.Fprint(tw, "\t")
		}
		fmt.Fprint(tw, h)
	}
	fmt.Fprintln(tw)
	rows(func(cols ...any) {
		for i, c := range cols {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			fmt.Fprint(tw, c)
		}
		fmt.Fprintln(tw)
	})
	return tw.Flush()
}

func ctxOf(cmd *cobra.Command) context.Context { return cmd.Context() }
