package rbac

import (
	"slices"
	"testing"
)

func TestExpand(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		in      []string
		want    []string
		wantErr bool
	}{
		"write expands":          {[]string{"space:write"}, []string{"space:create", "space:delete", "space:update"}, false},
		"duplicates fold":        {[]string{"space:view", "space:view"}, []string{"space:view"}, false},
		"reveal is its own":      {[]string{"secret:write"}, []string{"secret:create", "secret:delete", "secret:update"}, false},
		"audit-log has no write": {[]string{"audit-log:write"}, []string{}, false},
		"unknown resource":       {[]string{"moon:view"}, nil, true},
		"unknown action":         {[]string{"space:fly"}, nil, true},
		"reveal only on secret":  {[]string{"space:reveal"}, nil, true},
		"no colon":               {[]string{"space"}, nil, true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := Expand(c.in)
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v", err)
			}
			if !c.wantErr && !slices.Equal(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestValidateScope(t *testing.T) {
	t.Parallel()
	for scope, ok := range map[string]bool{"": true, "org": true, "team:t1": true, "space:spc_1": true,
		"provisioning:job_1": true, "team:": false, "space": false, "planet:p1": false} {
		if err := ValidateScope(scope); (err == nil) != ok {
			t.Errorf("%q: %v", scope, err)
		}
	}
}

func TestPermissionsScopes(t *testing.T) {
	t.Parallel()
	custom := map[string]Role{"role_ops": {ID: "role_ops", Policies: []string{"provisioning:write", "provisioning:view"}}}
	p := Compute([]Assignment{
		{RoleID: RoleViewer},
		{RoleID: "role_ops", Scope: "space:spc_1"},
		{RoleID: RoleEditor, Scope: "team:t1"},
		{RoleID: "role_gone"},
	}, custom)
	cases := map[string]struct {
		policy string
		chain  []string
		want   bool
	}{
		"viewer org-wide":           {"space:view", nil, true},
		"create needs the space":    {"provisioning:create", nil, false},
		"create in the space":       {"provisioning:create", []string{"provisioning:job_1", "space:spc_1"}, true},
		"create in another space":   {"provisioning:create", []string{"space:spc_2"}, false},
		"team grant reaches":        {"space:delete", []string{"space:spc_9", "team:t1"}, true},
		"team grant stops at admin": {"role:create", []string{"team:t1"}, false},
		"no audit for viewer":       {"audit-log:view", nil, false},
	}
	for name, c := range cases {
		if got := p.Allows(c.policy, c.chain...); got != c.want {
			t.Errorf("%s: Allows(%s, %v) = %v", name, c.policy, c.chain, got)
		}
	}
	if !p.Any("provisioning:create") || p.OrgWide("provisioning:create") {
		t.Error("Any/OrgWide disagree with the grants")
	}
	if !All().OrgWide("secret:reveal") || !All().OrgWide("audit-log:view") {
		t.Error("All lacks admin policies")
	}
}

func TestSystemRolesCoverVocabulary(t *testing.T) {
	t.Parallel()
	admin, _ := SystemRole(RoleAdmin)
	if len(admin.Policies) != len(Policies()) {
		t.Fatalf("admin has %d of %d policies", len(admin.Policies), len(Policies()))
	}
	for _, r := range SystemRoles() {
		if _, err := Expand(r.Policies); err != nil {
			t.Errorf("%s: %v", r.ID, err)
		}
	}
}
