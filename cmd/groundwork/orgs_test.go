package main

import (
	"encoding/json"
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
