package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
)

func run(t *testing.T, url, token string, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"--url", url, "--token", token}, args...))
	err := execute(context.Background(), root)
	return out.String(), err
}

// The bootstrap token belongs to the first org's admin, who issues a token for a new user with
// the CLI; the user's token works until it is revoked, and the audit log shows who did what.
func TestTokensCLI(t *testing.T) {
	t.Parallel()
	srv := apptest.Start(t, app.Options{})
	if out, err := run(t, srv.URL, srv.Token, "users", "create", "--email", "dev@example.com", "--role", "role_editor"); err != nil {
		t.Fatalf("users create: %v\n%s", err, out)
	}
	out, err := run(t, srv.URL, srv.Token, "tokens", "create", "--name", "laptop", "--email", "dev@example.com", "--expires-in", "24h")
	if err != nil {
		t.Fatalf("tokens create: %v\n%s", err, out)
	}
	secret := regexp.MustCompile(`gw_[A-Za-z0-9_-]{40,}`).FindString(out)
	if secret == "" {
		t.Fatalf("no secret shown: %s", out)
	}
	if out, err := run(t, srv.URL, secret, "spaces", "create", "--name", "dev"); err != nil {
		t.Fatalf("editor token: %v\n%s", err, out)
	}
	if _, err := run(t, srv.URL, secret, "tokens", "list"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("editor lists tokens: %v", err)
	}
	out, err = run(t, srv.URL, srv.Token, "-o", "json", "tokens", "list", "--email", "dev@example.com")
	if err != nil || strings.Contains(out, secret) {
		t.Fatalf("tokens list: %v\n%s", err, out)
	}
	var list struct {
		Data []struct{ ID string } `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Data) != 1 {
		t.Fatalf("tokens list: %v %s", err, out)
	}
	if out, err := run(t, srv.URL, srv.Token, "tokens", "revoke", list.Data[0].ID); err != nil {
		t.Fatalf("revoke: %v\n%s", err, out)
	}
	if _, err := run(t, srv.URL, secret, "spaces", "list"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("revoked token still works: %v", err)
	}
	out, err = run(t, srv.URL, srv.Token, "audit-logs", "--format", "csv")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"org.create,system:bootstrap", "user.create,admin@local", "token.create,admin@local",
		"space.create,dev@example.com", "token.revoke,admin@local"} {
		if !strings.Contains(out, want) {
			t.Errorf("audit export lacks %q:\n%s", want, out)
		}
	}
}

// Credentials given on the command line go to the server's secret store; the answer names a
// reference only.
func TestCloudAccountCredentialsCLI(t *testing.T) {
	t.Parallel()
	srv := apptest.Start(t, app.Options{})
	const secret = "wJalrXUtnFEMI-CLI-EXAMPLEKEY"
	out, err := run(t, srv.URL, srv.Token, "-o", "json", "cloud-accounts", "create", "--name", "prod", "--provider", "aws",
		"--region", "eu-west-1", "--auth-method", "static_keys", "--credential", "accessKeyId=AKIAEXAMPLE",
		"--credential", "secretAccessKey="+secret)
	if err != nil || strings.Contains(out, secret) || !strings.Contains(out, `"credentialsRef": "local:`) {
		t.Fatalf("create: %v\n%s", err, out)
	}
	if _, err := run(t, srv.URL, srv.Token, "cloud-accounts", "create", "--name", "x", "--provider", "aws",
		"--auth-method", "static_keys"); err == nil || !strings.Contains(err.Error(), "credentials.secretAccessKey") {
		t.Fatalf("missing credentials: %v", err)
	}
}
