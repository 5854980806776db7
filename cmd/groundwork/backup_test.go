package main

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
)

// The operator backs up a running server through the CLI, restores into an empty dir, is
// refused a second restore over it, and is pointed at pg_dump for PostgreSQL.
func TestBackupRestoreCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := apptest.Start(t, app.Options{DataDir: dir})
	cli := func(args ...string) (string, error) { return run(t, srv.URL, srv.Token, args...) }
	if out, err := cli("spaces", "create", "--name", "kept"); err != nil {
		t.Fatalf("spaces create: %v\n%s", err, out)
	}

	archive := filepath.Join(t.TempDir(), "gw.tar.gz")
	out, err := cli("backup", "--data-dir", dir, "--to", archive)
	if err != nil || !strings.Contains(out, "not included") {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	restored := filepath.Join(t.TempDir(), "restored")
	if out, err := cli("restore", "--data-dir", restored, "--from", archive); err != nil || !strings.Contains(out, "no secret key") {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	if _, err := cli("restore", "--data-dir", restored, "--from", archive); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("restore over a restored dir: %v", err)
	}
	if out, err := cli("restore", "--data-dir", restored, "--from", archive, "--force"); err != nil {
		t.Fatalf("restore --force: %v\n%s", err, out)
	}
	if err := copyFile(filepath.Join(dir, "secret.key"), filepath.Join(restored, "secret.key")); err != nil {
		t.Fatal(err)
	}
	again := apptest.Start(t, app.Options{DataDir: restored, BootstrapToken: srv.Token})
	out, err = run(t, again.URL, srv.Token, "spaces", "list")
	if err != nil || !strings.Contains(out, "kept") {
		t.Fatalf("restored server's spaces: %v\n%s", err, out)
	}

	for _, cmd := range []string{"backup", "restore"} {
		flag := map[string]string{"backup": "--to", "restore": "--from"}[cmd]
		_, err := cli(cmd, "--database", "postgres://gw@localhost/gw", "--data-dir", dir, flag, archive)
		if err == nil || !strings.Contains(err.Error(), "pg_dump") {
			t.Errorf("%s on PostgreSQL: %v", cmd, err)
		}
	}
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o600)
}

// A binary refuses, at start, a database a newer release has migrated, and says which
// versions meet.
func TestServeRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, err := app.OpenStore(context.Background(), "", dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	db := st.(interface{ DB() *sql.DB }).DB()
	if _, err := db.Exec(`INSERT INTO schema_migrations (name, applied_at) VALUES ('0099_from_the_future.sql', 0)`); err != nil {
		t.Fatal(err)
	}
	st.Close()
	for _, args := range [][]string{{"migrate", "--data-dir", dir}, {"serve", "--data-dir", dir, "--addr", "127.0.0.1:0"}} {
		_, err := run(t, "http://unused", "", args...)
		if err == nil || !strings.Contains(err.Error(), "database schema version 99 (migration 0099_from_the_future.sql) is newer than this binary's schema version") {
			t.Errorf("%s on a newer schema: %v", args[0], err)
		}
	}
}
