package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/auth"
	"github.com/groundworkhq/groundwork/internal/rbac"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/store/sqlite"
)

// With a maximum token lifetime, a token asked for without expiry gets that lifetime, a longer
// one is refused naming the field, and a stored token older than the cap stops working even
// though it was made without an expiry.
func TestMaxTokenTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	const org, email, ttl = "org_ttl", "ops@ttl.example.com", time.Hour
	now := time.Now()
	if err := st.CreateOrg(ctx, &store.Org{ID: org, Name: org, CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateUser(ctx, &store.User{OrgID: org, Email: email, CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateAssignment(ctx, &rbac.Assignment{ID: "ras_1", OrgID: org, Email: email, RoleID: "role_admin", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	stored := func(id string, created time.Time) string {
		secret, err := auth.NewSecret()
		if err != nil {
			t.Fatal(err)
		}
		if err := st.CreateToken(ctx, &store.Token{ID: id, OrgID: org, Email: email, Name: id, Hash: auth.Hash(secret), CreatedAt: created}); err != nil {
			t.Fatal(err)
		}
		return secret
	}
	fresh, old := stored("tok_fresh", now), stored("tok_old", now.Add(-2*ttl))
	srv := httptest.NewServer(New(Config{Store: st, MaxTokenTTL: ttl, Auth: TokenAuth{Auth: &auth.Authenticator{Store: st, MaxTTL: ttl}}}))
	t.Cleanup(srv.Close)
	call := func(tok, body string) (int, map[string]any) {
		req, _ := http.NewRequest("POST", srv.URL+"/api/tokens", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	if code, _ := call(old, `{"name":"x"}`); code != http.StatusUnauthorized {
		t.Fatalf("a token older than the cap: %d", code)
	}
	code, out := call(fresh, `{"name":"no-expiry"}`)
	if code != http.StatusCreated {
		t.Fatalf("no expiry: %d %v", code, out)
	}
	exp, err := time.Parse(time.RFC3339Nano, out["expiresAt"].(string))
	if err != nil || exp.Before(now.Add(ttl-time.Minute)) || exp.After(time.Now().Add(ttl)) {
		t.Fatalf("expiresAt %v (%v), want about an hour from now", out["expiresAt"], err)
	}
	for body, field := range map[string]string{`{"name":"long","expiresIn":"2h"}`: "expiresIn",
		`{"name":"long","expiresAt":"` + now.Add(3*ttl).UTC().Format(time.RFC3339) + `"}`: "expiresAt"} {
		code, out := call(fresh, body)
		errs, _ := out["errors"].([]any)
		if code != http.StatusBadRequest || len(errs) != 1 || errs[0].(map[string]any)["field"] != field {
			t.Fatalf("%s: %d %v", body, code, out)
		}
	}
	if code, out := call(fresh, `{"name":"short","expiresIn":"30m"}`); code != http.StatusCreated {
		t.Fatalf("within the cap: %d %v", code, out)
	}
}
