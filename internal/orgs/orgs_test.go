package orgs_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/orgs"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/store/sqlite"
)

func open(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestCreate(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	st := open(t)
	ctx := t.Context()
	n, err := orgs.Create(ctx, st, " Acme ", "Ops@Acme.Example", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	if n.Org.Name != "Acme" || n.AdminEmail != "ops@acme.example" || n.TokenSecret == "" {
		t.Fatalf("made %+v", n)
	}
	tok, err := st.ListTokens(ctx, n.Org.ID, "ops@acme.example")
	if err != nil || len(tok) != 1 || tok[0].ExpiresAt == nil || !tok[0].ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("tokens = %+v, %v; want one expiring in an hour", tok, err)
	}
	for _, tc := range []struct{ name, org, email, want string }{
		{"same name again, any case", "ACME", "b@acme.example", "exists already"},
		{"no name", " ", "c@acme.example", "--name"},
		{"not an email", "Other", "Ops <ops@acme.example>", "--admin-email"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := orgs.Create(ctx, st, tc.org, tc.email, 0, now)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Create(%q, %q) = %v, want an error saying %q", tc.org, tc.email, err, tc.want)
			}
		})
	}
	if list, _ := st.ListOrgs(ctx); len(list) != 1 {
		t.Fatalf("%d orgs after the refusals, want 1", len(list))
	}
}

func TestSeedDefaultOnce(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	for range 2 {
		if err := orgs.SeedDefault(ctx, st, "org_default", "admin@local", time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	o, err := st.GetOrg(ctx, "org_default")
	if err != nil || o.Name != "Default" {
		t.Fatalf("default org = %+v, %v", o, err)
	}
	if _, err := st.GetOrg(ctx, "org_other"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetOrg of another = %v", err)
	}
}
