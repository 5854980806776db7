package api

import (
	"testing"

	"github.com/groundworkhq/groundwork/internal/rbac"
)

// Every mounted route, in every route table, names a policy that the access model knows, so no
// route is reachable without a permission check that can refuse it.
func TestEveryRouteNamesAKnownPolicy(t *testing.T) {
	t.Parallel()
	known := map[string]bool{}
	for _, p := range rbac.Policies() {
		known[p.Policy] = true
	}
	s := New(Config{})
	seen := map[string]bool{}
	for _, rt := range s.allRoutes() {
		key := rt.method + " " + rt.path
		if seen[key] {
			t.Errorf("%s is mounted twice", key)
		}
		seen[key] = true
		if !known[rt.policy] {
			t.Errorf("%s needs policy %q, which is not in rbac.Policies()", key, rt.policy)
		}
	}
	if len(seen) < 40 {
		t.Fatalf("only %d routes seen; the tables were not all walked", len(seen))
	}
}
