package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/groundworkhq/groundwork/internal/app"
	orgsvc "github.com/groundworkhq/groundwork/internal/orgs"
	"github.com/groundworkhq/groundwork/internal/store"
)

// operatorDB is the database an operator command works on: the server's, named by the same
// flags (and environment) as serve's.
type operatorDB struct {
	database, dataDir string
	init              bool
}

func (d *operatorDB) flags(cmd *cobra.Command, withInit bool) {
	fl := cmd.Flags()
	fl.StringVar(&d.database, "database", os.Getenv("GROUNDWORK_DATABASE"), "the server's database URL (GROUNDWORK_DATABASE)")
	fl.StringVar(&d.dataDir, "data-dir", envOr("GROUNDWORK_DATA_DIR", "./groundwork-data"), "the server's data directory, for its SQLite database (GROUNDWORK_DATA_DIR)")
	if withInit {
		fl.BoolVar(&d.init, "init", false, "create the database when there is none yet (a new installation)")
	}
}

func isPostgres(database string) bool {
	return strings.HasPrefix(database, "postgres://") || strings.HasPrefix(database, "postgresql://")
}

// describe names the database for the operator, without a password.
func (d *operatorDB) describe() string {
	if isPostgres(d.database) {
		if u, err := url.Parse(d.database); err == nil {
			return "PostgreSQL " + u.Redacted()
		}
		return "PostgreSQL (unparsable URL)"
	}
	return "SQLite " + d.sqlitePath()
}

// sqlitePath is where app.OpenStore keeps the SQLite database, made absolute.
func (d *operatorDB) sqlitePath() string {
	path := strings.TrimPrefix(d.database, "sqlite://")
	if path == "" {
		path = filepath.Join(d.dataDir, "groundwork.db")
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return path
}

// open opens the server's database. A database that does not exist yet, or that no server
// has started on (it holds no organisation), is refused unless init is set: an operator who
// forgot --data-dir would otherwise get a new database in the current directory and a token
// the running server rejects.
func (d *operatorDB) open(ctx context.Context, w io.Writer) (store.Store, error) {
	where := d.describe()
	notServers := fmt.Sprintf("%s is not a Groundwork server's database; point --data-dir or --database "+
		"(GROUNDWORK_DATA_DIR, GROUNDWORK_DATABASE) at the server's", where)
	if !isPostgres(d.database) {
		if _, err := os.Stat(d.sqlitePath()); errors.Is(err, os.ErrNotExist) && !d.init {
			return nil, errors.New(notServers + ", or pass --init to create a new one")
		}
	}
	st, err := app.OpenStore(ctx, d.database, d.dataDir, newLogger())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	orgs, err := st.ListOrgs(ctx)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if len(orgs) == 0 && !d.init {
		st.Close()
		return nil, errors.New(notServers + " (it holds no organisation), or pass --init to start a new installation on it")
	}
	fmt.Fprintf(w, "database: %s\n", where)
	return st, nil
}

// newOrgs is an operator command: it works on the server's database directly (like migrate),
// because making an org is above any one org's admin.
func newOrgs(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "orgs", Short: "Make and list organisations (operator command: runs against the server's database)"}
	var db operatorDB
	var name, email string
	var ttl time.Duration
	create := &cobra.Command{
		Use:   "create --name NAME --admin-email EMAIL",
		Short: "Create an organisation with its first admin, and print that admin's API token once",
		Long: "Create an organisation with its first admin, and print that admin's API token once.\n" +
			"It works on the server's database (the same --data-dir or --database as serve) and refuses\n" +
			"one that does not exist or that no server has used, unless --init is given; a second org\n" +
			"of the same name is refused.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			st, err := db.open(cmd.Context(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer st.Close()
			n, err := orgsvc.Create(cmd.Context(), st, name, email, ttl, time.Now())
			if err != nil {
				return err
			}
			if g.output != "table" {
				return g.printOut(w, map[string]any{"id": n.Org.ID, "name": n.Org.Name, "adminEmail": n.AdminEmail,
					"tokenID": n.TokenID, "token": n.TokenSecret}, nil, nil)
			}
			fmt.Fprintf(w, "org %s (%s) created; admin %s\n", n.Org.ID, n.Org.Name, n.AdminEmail)
			fmt.Fprintf(w, "admin token %s (shown once; store it now):\n%s\n", n.TokenID, n.TokenSecret)
			return nil
		},
	}
	fl := create.Flags()
	fl.StringVar(&name, "name", "", "organisation name")
	fl.StringVar(&email, "admin-email", "", "email of the org's first admin")
	fl.DurationVar(&ttl, "token-expires-in", 0, "expiry of the admin's first token (0: none)")
	db.flags(create, true)
	_ = create.MarkFlagRequired("name")
	_ = create.MarkFlagRequired("admin-email")

	var listDB operatorDB
	list := &cobra.Command{
		Use: "list", Short: "List the organisations on the server's database", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := listDB.open(cmd.Context(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer st.Close()
			orgs, err := st.ListOrgs(cmd.Context())
			if err != nil {
				return err
			}
			out := struct {
				Data []*store.Org `json:"data"`
			}{Data: orgs}
			return g.printOut(cmd.OutOrStdout(), out, []string{"ID", "NAME", "CREATED"}, func(add func(...any)) {
				for _, o := range orgs {
					add(o.ID, o.Name, o.CreatedAt.Local().Format(time.RFC3339))
				}
			})
		},
	}
	listDB.flags(list, false)
	cmd.AddCommand(create, list)
	return cmd
}
