package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/groundworkhq/groundwork/internal/backup"
	"github.com/groundworkhq/groundwork/internal/store/sqlite"
	"github.com/groundworkhq/groundwork/internal/store/sqlstore"
)

// errPostgresBackup says where a PostgreSQL installation's backup comes from instead.
var errPostgresBackup = errors.New("the job store is PostgreSQL: back it up with pg_dump and restore it with pg_restore " +
	"(pg_dump --format=custom --file=groundwork.dump \"$GROUNDWORK_DATABASE\"; pg_restore --clean --if-exists --dbname=\"$GROUNDWORK_DATABASE\" groundwork.dump), " +
	"and copy the data dir's secrets/ directory alongside; see docs/backup-and-upgrade.md")

// storePaths resolves --database/--data-dir the way serve does.
func storePaths(database, dataDir string) (backup.Paths, error) {
	if strings.HasPrefix(database, "postgres://") || strings.HasPrefix(database, "postgresql://") {
		return backup.Paths{}, errPostgresBackup
	}
	db := strings.TrimPrefix(database, "sqlite://")
	if db == "" {
		db = filepath.Join(dataDir, "groundwork.db")
	}
	return backup.Paths{DataDir: dataDir, DB: db}, nil
}

func storeFlags(cmd *cobra.Command, database, dataDir *string) {
	cmd.Flags().StringVar(database, "database", os.Getenv("GROUNDWORK_DATABASE"), "database URL (GROUNDWORK_DATABASE)")
	cmd.Flags().StringVar(dataDir, "data-dir", envOr("GROUNDWORK_DATA_DIR", "./groundwork-data"), "data directory (GROUNDWORK_DATA_DIR)")
}

func newBackup() *cobra.Command {
	var database, dataDir, to string
	var withKey bool
	cmd := &cobra.Command{
		Use:   "backup --to FILE",
		Short: "Write the SQLite job store and the local secret store to one archive (safe while the server runs)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := storePaths(database, dataDir)
			if err != nil {
				return err
			}
			// Written beside the target and renamed, so FILE is never a half-written archive.
			f, err := os.CreateTemp(filepath.Dir(to), "."+filepath.Base(to)+".*")
			if err != nil {
				return fmt.Errorf("--to: %w", err)
			}
			tmp := f.Name()
			defer os.Remove(tmp)
			m, err := backup.Create(cmd.Context(), p, f, backup.Options{IncludeSecretKey: withKey})
			if err := errors.Join(err, f.Sync(), f.Close()); err != nil {
				return err
			}
			if err := os.Rename(tmp, to); err != nil {
				return fmt.Errorf("--to: %w", err)
			}
			key := "not included: keep the secret key apart from this file"
			if m.SecretKey {
				key = "INCLUDED: this file opens every secret, guard it as the key"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "backup written to %s (schema version %d, %d secret files; secret key %s)\n", to, m.SchemaVersion, m.Secrets, key)
			return nil
		},
	}
	storeFlags(cmd, &database, &dataDir)
	cmd.Flags().StringVar(&to, "to", "", "archive file to write (required)")
	cmd.Flags().BoolVar(&withKey, "include-secret-key", false, "also put the secret key (data dir's secret.key) into the archive")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}

func newRestore() *cobra.Command {
	var database, dataDir, from string
	var force bool
	cmd := &cobra.Command{
		Use:   "restore --from FILE",
		Short: "Restore an archive written by backup into an empty data dir (the server must be stopped)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := storePaths(database, dataDir)
			if err != nil {
				return err
			}
			known, err := sqlstore.Latest(sqlite.Migrations())
			if err != nil {
				return err
			}
			f, err := os.Open(from)
			if err != nil {
				return fmt.Errorf("--from: %w", err)
			}
			defer f.Close()
			m, err := backup.Restore(cmd.Context(), f, p, backup.RestoreOptions{Force: force, SchemaVersion: known})
			if err != nil {
				return err
			}
			key := "the archive holds no secret key: put the original secret.key into the data dir or set GROUNDWORK_SECRET_KEY before serve"
			if m.SecretKey {
				key = "secret key restored"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored backup of %s (schema version %d) into %s; %s\n",
				m.CreatedAt.Format("2006-01-02T15:04:05Z"), m.SchemaVersion, p.DataDir, key)
			return nil
		},
	}
	storeFlags(cmd, &database, &dataDir)
	cmd.Flags().StringVar(&from, "from", "", "archive file to read (required)")
	cmd.Flags().BoolVar(&force, "force", false, "replace the database and secret store already in the data dir")
	_ = cmd.MarkFlagRequired("from")
	return cmd
}
