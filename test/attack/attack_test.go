// Package attack runs an attacker's checklist against a real Groundwork server (app.Run, in
// process) on SQLite and on PostgreSQL: each test tries one way to read, change or delete what
// belongs to someone else, asserts the server refuses it with the right status, and then
// checks, as the victim, that nothing was read, changed or deleted.
package attack

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/orgs"
	"github.com/groundworkhq/groundwork/internal/provider/local/localtest"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/testenv/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// world is one server with two organisations: A, the victim (its bootstrap admin), and B,
// the attacker (an admin and an editor).
type world struct {
	srv     *apptest.Server
	dataDir string
	st      store.Store
	vault   *secrets.Vault
	adminA  string
	adminB  string
	editorB string
}

// onEachStore runs body against a fresh server on SQLite and on PostgreSQL.
func onEachStore(t *testing.T, body func(t *testing.T, w *world)) {
	t.Helper()
	onEachStoreWith(t, app.Options{}, body)
}

// onEachStoreWith is onEachStore with server options (o's DataDir and Database are set here).
func onEachStoreWith(t *testing.T, o app.Options, body func(t *testing.T, w *world)) {
	t.Helper()
	stores := map[string]func(t *testing.T) string{
		"sqlite":   func(*testing.T) string { return "" },
		"postgres": func(t *testing.T) string { return pgtest.NewDatabase(t) },
	}
	for name, db := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			body(t, newWorld(t, o, db(t)))
		})
	}
}

func newWorld(t *testing.T, o app.Options, database string) *world {
	t.Helper()
	// The local provider runs PostgreSQL as its own account, which must reach the data dir.
	dir := localtest.DataDir(t)
	o.DataDir, o.Database = dir, database
	srv := apptest.Start(t, o)
	// A second handle on the server's own database: the operator's (orgs are made there) and
	// the victim's view of the secret store, to prove a secret is still theirs and intact.
	ctx := context.Background()
	opened, err := app.OpenStore(ctx, database, dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { opened.Close() })
	ledger, ok := opened.(secrets.Ledger)
	if !ok {
		t.Fatalf("store %T records no secret owners", opened)
	}
	local, err := secrets.OpenLocal(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	w := &world{srv: srv, dataDir: dir, st: opened, vault: secrets.NewVault(local, ledger), adminA: srv.Token}
	orgB, err := orgs.Create(ctx, opened, "Mallory", "admin@mallory.example.com", 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	w.adminB = orgB.TokenSecret
	w.editorB = w.userToken(t, w.adminB, "editor@mallory.example.com", "role_editor")
	return w
}

// userToken creates a user holding role org-wide and returns an API token of theirs.
func (w *world) userToken(t *testing.T, admin, email, role string) string {
	t.Helper()
	w.must(t, admin, "POST", "/api/users", `{"email":"`+email+`","roleID":"`+role+`"}`, 201)
	var tok struct {
		Secret string `json:"secret"`
	}
	w.must(t, admin, "POST", "/api/tokens", `{"name":"t","email":"`+email+`"}`, 201).Decode(t, &tok)
	return tok.Secret
}

type reply = apptest.Reply

func (w *world) call(t *testing.T, token, method, path, body string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, w.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return reply{Status: resp.StatusCode, Raw: raw}
}

// must calls and fails the test unless the answer has status want.
func (w *world) must(t *testing.T, token, method, path, body string, want int) reply {
	t.Helper()
	r := w.call(t, token, method, path, body)
	if r.Status != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, r.Status, r.Raw, want)
	}
	return r
}

// refused calls as the attacker and fails the test unless the answer has status want (and, if
// field is set, names it).
func (w *world) refused(t *testing.T, token, method, path, body string, want int, field string) {
	t.Helper()
	r := w.call(t, token, method, path, body)
	if r.Status != want || field != "" && !r.Names(field) {
		t.Errorf("attack %s %s: %d %s; want %d naming %q", method, path, r.Status, r.Raw, want, field)
	}
}

// victimAccount creates a cloud account in A whose credentials go to the secret store and
// returns its id and credentials reference.
func (w *world) victimAccount(t *testing.T, secret string) (id, ref string) {
	t.Helper()
	var acc struct {
		ID             string `json:"id"`
		CredentialsRef string `json:"credentialsRef"`
	}
	w.must(t, w.adminA, "POST", "/api/cloud-accounts", `{"name":"prod","provider":"aws","region":"eu-west-1",
		"authMethod":"static_keys","credentials":{"accessKeyId":"AKIAVICTIM","secretAccessKey":"`+secret+`"}}`, 201).Decode(t, &acc)
	if !secrets.IsRef(acc.CredentialsRef) {
		t.Fatalf("credentialsRef %q", acc.CredentialsRef)
	}
	return acc.ID, acc.CredentialsRef
}

// accountSecretIntact fails the test unless A's account still reads its own credentials.
func (w *world) accountSecretIntact(t *testing.T, orgID, accountID, ref, secret string) {
	t.Helper()
	v, err := w.vault.For(secrets.Owner{OrgID: orgID, Kind: secrets.OwnerAccount, ID: accountID}).Get(context.Background(), ref)
	if err != nil || !strings.Contains(v, secret) {
		t.Errorf("the victim's account secret %s is gone or changed: %q, %v", ref, v, err)
	}
}

// orgOf returns the org the token acts in.
func (w *world) orgOf(t *testing.T, token string) string {
	t.Helper()
	var sp struct {
		OrgID string `json:"orgID"`
	}
	w.must(t, token, "POST", "/api/spaces", `{"name":"probe","provider":"local","region":"local"}`, 201).Decode(t, &sp)
	return sp.OrgID
}

// listLen returns how many items GET path answers in data.
func (w *world) listLen(t *testing.T, token, path string) int {
	t.Helper()
	var l struct {
		Data []json.RawMessage `json:"data"`
	}
	w.must(t, token, "GET", path, "", 200).Decode(t, &l)
	return len(l.Data)
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// scanFor fails the test when needle appears in any file under dir (logs, the SQLite
// database, the secret store's sealed files are ciphertext) or in the database dump.
func scanFor(t *testing.T, dir string, needles ...string) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		for _, n := range needles {
			if bytes.Contains(b, []byte(n)) {
				t.Errorf("%s holds a secret value in clear", p)
			}
		}
		return nil
	})
}
