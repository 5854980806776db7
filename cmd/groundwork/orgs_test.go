package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
)

// The operator makes a second org on a running server's database; its admin's token works at
// once, sees only its own org, and the org's audit log starts with its creation.
func TestOrgsCreateCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := apptest.Start(t, app.Options{DataDir: dir})
	cli := func(token string, args ...string) (string, error) { return run(t, srv.URL, token, args...) }

	if _, err := cli("", "orgs", "create", "--data-dir", dir, "--name", "Acme", "--admin-email", "not-an-email"); err == nil ||
		!strings.Contains(err.Error(), "--admin-email") {
		t.Fatalf("bad email: %v", err)
	}
	out, err := cli("", "orgs", "create", "--data-dir", dir, "--name", "Acme", "--admin-email", "Ops@Acme.example.com")
	if err != nil {
		t.Fatalf("orgs create: %v\n%s", err, out)
	}
	secret := regexp.MustCompile(`gw_[A-Za-z0-9_-]{40,}`).FindString(out)
	if secret == "" || !strings.Contains(out, "ops@acme.example.com") {
		t.Fatalf("no token or admin shown: %s", out)
	}
	if !regexp.MustCompile(`org org_[0-9A-Z]{26} \(Acme\)`).MatchString(out) {
		t.Fatalf("org id not in the style of every other id (prefix and ULID): %s", out)
	}
	if !strings.Contains(out, "database: SQLite "+filepath.Join(dir, "groundwork.db")) {
		t.Fatalf("the database used is not named: %s", out)
	}
	// The same command again is a duplicate, refused: no second Acme.
	if out, err := cli("", "orgs", "create", "--data-dir", dir, "--name", "acme", "--admin-email", "ops@acme.example.com"); err == nil ||
		!strings.Contains(err.Error(), "exists already") {
		t.Fatalf("duplicate org: %v\n%s", err, out)
	}
	out, err = cli("", "-o", "json", "orgs", "list", "--data-dir", dir)
	if err != nil || strings.Count(out, `"name": "Acme"`) != 1 || !strings.Contains(out, `"name": "Default"`) {
		t.Fatalf("orgs list: %v\n%s", err, out)
	}

	out, err = cli(srv.Token, "-o", "json", "spaces", "create", "--name", "default-org-space")
	if err != nil {
		t.Fatalf("spaces create: %v\n%s", err, out)
	}
	var sp struct{ ID string }
	if err := json.Unmarshal([]byte(out), &sp); err != nil {
		t.Fatal(err)
	}
	if _, err := cli(secret, "spaces", "get", sp.ID); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("the new org reads the default org's space: %v", err)
	}
	if out, err := cli(secret, "spaces", "create", "--name", "acme-dev"); err != nil {
		t.Fatalf("the new admin cannot create: %v\n%s", err, out)
	}
	out, err = cli(secret, "-o", "json", "spaces", "list")
	if err != nil || strings.Contains(out, sp.ID) || !strings.Contains(out, "acme-dev") {
		t.Fatalf("the new org's spaces: %v\n%s", err, out)
	}
	out, err = cli(secret, "audit-logs", "--format", "csv")
	if err != nil || !strings.Contains(out, "org.create,system:cli") || strings.Contains(out, "default-org-space") {
		t.Fatalf("the new org's audit log: %v\n%s", err, out)
	}
}

// Pointed at no server's database (a forgotten --data-dir), orgs create refuses instead of
// making a new database whose token no server accepts; --init is the explicit way to start one.
func TestOrgsCreateRefusesNewDatabase(t *testing.T) {
	t.Parallel()
	empty := filepath.Join(t.TempDir(), "nothing-here")
	out, err := run(t, "http://127.0.0.1:1", "", "orgs", "create", "--data-dir", empty, "--name", "Acme", "--admin-email", "ops@acme.example.com")
	if err == nil || !strings.Contains(err.Error(), "--init") || !strings.Contains(err.Error(), filepath.Join(empty, "groundwork.db")) {
		t.Fatalf("no database: %v\n%s", err, out)
	}
	if _, err := os.Stat(empty); !os.IsNotExist(err) {
		t.Fatalf("the refused command left %s behind: %v", empty, err)
	}
	out, err = run(t, "http://127.0.0.1:1", "", "orgs", "create", "--init", "--data-dir", empty, "--name", "Acme", "--admin-email", "ops@acme.example.com")
	if err != nil || !strings.Contains(out, "created") {
		t.Fatalf("--init: %v\n%s", err, out)
	}
	// Once an org is there the database is an installation's: no --init needed.
	if out, err := run(t, "http://127.0.0.1:1", "", "orgs", "list", "--data-dir", empty); err != nil || !strings.Contains(out, "Acme") {
		t.Fatalf("orgs list: %v\n%s", err, out)
	}
}
