package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/client"
	"github.com/groundworkhq/groundwork/internal/netguard"
)

type globals struct {
	url, token, output string
	quiet              bool
}

// outputs are the values -o takes. "id" prints only the ids of what the command shows, one a
// line, so that a script can capture them (-q is its short form).
var outputs = []string{"table", "json", "yaml", "id"}

// extraOutputs is the annotation in which a command lists the -o values it takes besides
// outputs, comma-separated.
const extraOutputs = "groundwork/extra-outputs"

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
	// The token's default is read when a command runs, not shown as the flag's default: help
	// output is pasted into tickets and chats, and must never carry the secret.
	root.PersistentFlags().StringVar(&g.token, "token", "", "API token (default: $GROUNDWORK_TOKEN)")
	root.PersistentFlags().StringVarP(&g.output, "output", "o", "table", "output format: "+strings.Join(outputs, ", "))
	root.PersistentFlags().BoolVarP(&g.quiet, "quiet", "q", false, "print only ids (same as -o id)")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if !cmd.Flags().Changed("token") {
			g.token = os.Getenv("GROUNDWORK_TOKEN")
		}
		if g.quiet {
			if cmd.Flags().Changed("output") && g.output != "id" {
				return fmt.Errorf("-q prints ids only; it cannot be combined with -o %s", g.output)
			}
			g.output = "id"
		}
		allowed := outputs
		if extra := cmd.Annotations[extraOutputs]; extra != "" {
			allowed = append(slices.Clone(outputs), strings.Split(extra, ",")...)
		}
		if !slices.Contains(allowed, g.output) {
			return fmt.Errorf("-o %q: want one of %s", g.output, strings.Join(allowed, ", "))
		}
		return nil
	}
	root.AddCommand(newServe(), newMigrate(), newOrgs(g), newJobs(g), newSpaces(g), newAccounts(g), newCatalog(g))
	root.AddCommand(newProvisioners(g), newComponents(g), newPlan(g), newDiscover(g))
	root.AddCommand(newTokens(g), newUsers(g), newRoles(g), newRoleAssignments(g), newAuditLogs(g))
	root.AddCommand(newDatabases(g), newConnections(g), newSecrets(g), newRemediations(g), newCredentials(g))
	refuseUnknownSubcommands(root)
	root.AddCommand(newOpenAPI(), newPricing())
	root.AddCommand(newBackup(), newRestore())
	return root
}

// refuseUnknownSubcommands makes every command group (a command that only holds others) fail
// on an argument that names none of them, suggesting the nearest: cobra itself only checks
// that at the root, and a group without a Run prints its help and exits 0, so a script with
// a typo ("jobs lst") would pass.
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if !c.HasSubCommands() || c.Runnable() || c.Parent() == nil {
		return
	}
	c.Args = cobra.ArbitraryArgs
	c.SuggestionsMinimumDistance = 2 // cobra sets it on the root only
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
		}
		return fmt.Errorf("%s\n\nRun '%s --help' for usage", msg, cmd.CommandPath())
	}
}

func (g *globals) client() *client.Client { return client.New(g.url, g.token) }

// structured reports whether the output is a document (json, yaml) rather than for a human.
func (g *globals) structured() bool { return g.output == "json" || g.output == "yaml" }

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
	outboundAllow := ""
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the API server and the job engine",
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Logger = newLogger()
			o.Workers = workers
			o.BootstrapToken = os.Getenv("GROUNDWORK_BOOTSTRAP_TOKEN")
			o.Remediation = app.RemediationFromEnv(os.Getenv)
			if err := durationFromEnv(cmd, "", "GROUNDWORK_POLL_INTERVAL", &o.PollInterval); err != nil {
				return err
			}
			allow, err := netguard.ParseAllow(outboundAllow)
			if err != nil {
				return fmt.Errorf("--outbound-allow: %w", err)
			}
			o.Outbound = netguard.New(allow)
			if err := durationFromEnv(cmd, "job-retention", "GROUNDWORK_JOB_RETENTION", &o.JobRetention); err != nil {
				return err
			}
			if o.JobRetention < 0 {
				return fmt.Errorf("--job-retention: %s is negative; 0 keeps every job", o.JobRetention)
			}
			if err := durationFromEnv(cmd, "max-token-ttl", "GROUNDWORK_MAX_TOKEN_TTL", &o.MaxTokenTTL); err != nil {
				return err
			}
			return app.Run(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.Addr, "addr", envOr("GROUNDWORK_ADDR", ":5087"), "listen address (GROUNDWORK_ADDR)")
	cmd.Flags().StringVar(&o.Database, "database", os.Getenv("GROUNDWORK_DATABASE"), "postgres://… for PostgreSQL; default SQLite in the data dir (GROUNDWORK_DATABASE)")
	cmd.Flags().StringVar(&o.DataDir, "data-dir", envOr("GROUNDWORK_DATA_DIR", "./groundwork-data"), "data directory (GROUNDWORK_DATA_DIR)")
	cmd.Flags().IntVar(&workers, "workers", envInt("GROUNDWORK_WORKERS", 8), "concurrent jobs this replica runs (GROUNDWORK_WORKERS)")
	cmd.Flags().StringVar(&outboundAllow, "outbound-allow", os.Getenv(netguard.EnvAllow),
		"comma-separated CIDRs that user-given addresses (provisioners, charts, clusters, adopted hosts) must be in; empty: any but link-local and metadata ("+netguard.EnvAllow+")")
	cmd.Flags().DurationVar(&o.JobRetention, "job-retention", 0,
		"how long a cancelled or torn-down job stays in the ledger before it is pruned, e.g. 2160h; 0: kept for good (GROUNDWORK_JOB_RETENTION)")
	cmd.Flags().DurationVar(&o.MaxTokenTTL, "max-token-ttl", 0,
		"longest lifetime of an API token, e.g. 720h; 0: no cap (GROUNDWORK_MAX_TOKEN_TTL)")
	cmd.Flags().StringVar(&o.PriceBook, "price-book", os.Getenv("GROUNDWORK_PRICE_BOOK"),
		"price book file written by 'groundwork pricing refresh'; default: the built-in one (GROUNDWORK_PRICE_BOOK)")
	addComponentFlags(cmd, &o.Components)
	return cmd
}

// durationFromEnv sets *dst from the environment variable env, unless the flag (none when
// "") was given on the command line, which wins.
func durationFromEnv(cmd *cobra.Command, flag, env string, dst *time.Duration) error {
	v := os.Getenv(env)
	if v == "" || flag != "" && cmd.Flags().Changed(flag) {
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%s: %w", env, err)
	}
	*dst = d
	return nil
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

// printOut writes v as JSON or YAML, its ids (-o id), or as a table built by rows when the
// output is a table. A command without a table shows JSON for -o table.
func (g *globals) printOut(w io.Writer, v any, header []string, rows func(add func(cols ...any))) error {
	switch {
	case g.output == "yaml":
		b, err := sigsyaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case g.output == "id":
		return printIDs(w, v)
	case g.output == "json" || rows == nil:
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

// done reports a change that answers no document (a deletion): a line for a person, or
// {"id", "status"} in the output asked for.
func (g *globals) done(cmd *cobra.Command, status, id string) error {
	if g.output == "table" {
		_, err := fmt.Fprintln(cmd.OutOrStdout(), status, id)
		return err
	}
	return g.printOut(cmd.OutOrStdout(), map[string]string{"id": id, "status": status}, nil, nil)
}

// printIDs prints the "id" of v, or of each element of its "data" list, one a line.
func printIDs(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var doc struct {
		ID   string `json:"id"`
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("-o id: this command's answer has no id")
	}
	if doc.ID != "" {
		_, err := fmt.Fprintln(w, doc.ID)
		return err
	}
	if doc.Data == nil {
		return fmt.Errorf("-o id: this command's answer has no id")
	}
	for _, d := range doc.Data {
		if _, err := fmt.Fprintln(w, d.ID); err != nil {
			return err
		}
	}
	return nil
}
