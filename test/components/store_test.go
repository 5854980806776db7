package components

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/testenv/pgtest"
)

type clusterStore interface {
	store.Store
	ClusterSpaces(ctx context.Context) ([]*store.Space, error)
	SetSpaceStatus(ctx context.Context, id, status string) (bool, error)
}

// The reachability checker's store calls behave the same on SQLite and PostgreSQL: only
// kubernetes spaces holding a registered cluster are listed, across orgs; a status is written
// only when it changes; a deleted space is store.ErrNotFound.
func TestClusterSpacesStore(t *testing.T) {
	t.Parallel()
	stores := map[string]func(t *testing.T) string{
		"sqlite":   func(*testing.T) string { return "" },
		"postgres": func(t *testing.T) string { return pgtest.NewDatabase(t) },
	}
	for name, db := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			st, err := app.OpenStore(ctx, db(t), t.TempDir(), slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			// The same assertion app makes: a store without these calls has no reachability checks.
			ss, ok := st.(clusterStore)
			if !ok {
				t.Fatalf("store %T cannot list cluster spaces", st)
			}
			cluster := json.RawMessage(`{"clusterName":"x","cluster":{"endpoint":"https://k","credentialRef":"local:abc"}}`)
			for _, sp := range []*store.Space{
				{ID: "spc_a", OrgID: "org_a", SpaceType: "kubernetes", Config: cluster},
				{ID: "spc_b", OrgID: "org_b", SpaceType: "kubernetes", Config: cluster},
				{ID: "spc_plain", OrgID: "org_a", SpaceType: "kubernetes", Config: json.RawMessage(`{"clusterName":"not registered"}`)},
				{ID: "spc_vm", OrgID: "org_a", SpaceType: "vm", Config: cluster},
			} {
				sp.Name, sp.Provider, sp.Region, sp.Status, sp.CreatedAt = sp.ID, "local", "local", "ready", time.Now()
				if err := ss.CreateSpace(ctx, sp); err != nil {
					t.Fatal(err)
				}
			}
			list, err := ss.ClusterSpaces(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, sp := range list {
				ids = append(ids, sp.ID)
			}
			if len(ids) != 2 || ids[0] != "spc_a" || ids[1] != "spc_b" {
				t.Fatalf("ClusterSpaces = %v, want [spc_a spc_b]", ids)
			}
			steps := []struct {
				status  string
				changed bool
			}{{"unreachable", true}, {"unreachable", false}, {"ready", true}}
			for _, s := range steps {
				changed, err := ss.SetSpaceStatus(ctx, "spc_a", s.status)
				if err != nil || changed != s.changed {
					t.Fatalf("SetSpaceStatus(%s) = %v, %v; want changed %v", s.status, changed, err, s.changed)
				}
				got, _ := ss.GetSpace(ctx, "org_a", "spc_a")
				if got.Status != s.status {
					t.Fatalf("status = %s, want %s", got.Status, s.status)
				}
			}
			if _, err := ss.SetSpaceStatus(ctx, "spc_gone", "ready"); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("SetSpaceStatus of a missing space = %v, want ErrNotFound", err)
			}
		})
	}
}
