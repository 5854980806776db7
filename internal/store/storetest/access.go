package storetest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/audit"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/rbac"
	"github.com/groundworkhq/groundwork/internal/store"
)

var accessTests = map[string]func(t *testing.T, s store.Store){
	"UsersTeamsIsolation":       testUsersTeams,
	"TokensByHashRevoke":        testTokens,
	"RolesAndAssignments":       testRoles,
	"AuditedCommitsBoth":        testAuditedCommits,
	"AuditedRollsBackBoth":      testAuditedRollsBack,
	"AuditFilters":              testAuditFilters,
	"AuditImmutableInDatabase":  testAuditImmutable,
	"TerminalCheckpointAudited": testCheckpointAudited,
}

func entryAt(org, action string, at time.Time) *audit.Entry {
	e := audit.New(org, audit.ScopePlatform, action, "alice@example.com", "thing", "t1", map[string]string{"k": "v"})
	e.CreatedAt = at
	return e
}

func testUsersTeams(t *testing.T, s store.Store) {
	ctx := context.Background()
	if err := s.CreateOrg(ctx, &store.Org{ID: "org1", Name: "One", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateOrg(ctx, &store.Org{ID: "org1", Name: "Again", CreatedAt: t0}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate org: %v", err)
	}
	if o, err := s.GetOrg(ctx, "org1"); err != nil || o.Name != "One" {
		t.Fatalf("get org: %+v %v", o, err)
	}
	if err := s.CreateOrg(ctx, &store.Org{ID: "org0", Name: "Zero", CreatedAt: t0.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	orgs, err := s.ListOrgs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, o := range orgs {
		if o.ID == "org0" || o.ID == "org1" {
			listed = append(listed, o.ID+"="+o.Name)
		}
	}
	if strings.Join(listed, ",") != "org0=Zero,org1=One" {
		t.Fatalf("list orgs, oldest first: %v", listed)
	}
	u := &store.User{OrgID: "org1", Email: "a@example.com", Name: "A", CreatedAt: t0}
	if err := s.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateUser(ctx, u); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate user: %v", err)
	}
	if _, err := s.GetUser(ctx, "org2", "a@example.com"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other org sees user: %v", err)
	}
	team := &store.Team{ID: "team_1", OrgID: "org1", Name: "payments", Members: []string{"a@example.com"}, SpaceIDs: []string{"spc_1"}, CreatedAt: t0}
	if err := s.CreateTeam(ctx, team); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetTeam(ctx, "org1", "team_1")
	if err != nil || len(got.SpaceIDs) != 1 || got.SpaceIDs[0] != "spc_1" || got.Members[0] != "a@example.com" {
		t.Fatalf("team round trip: %+v %v", got, err)
	}
	if _, err := s.GetTeam(ctx, "org2", "team_1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other org sees team: %v", err)
	}
	got.SpaceIDs, got.Name = []string{"spc_1", "spc_2"}, "payments-eu"
	if err := s.UpdateTeam(ctx, got); err != nil {
		t.Fatal(err)
	}
	if again, err := s.GetTeam(ctx, "org1", "team_1"); err != nil || len(again.SpaceIDs) != 2 || again.Name != "payments-eu" {
		t.Fatalf("team update: %+v %v", again, err)
	}
	other := *got
	other.OrgID = "org2"
	if err := s.UpdateTeam(ctx, &other); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other org updates team: %v", err)
	}
	if err := s.DeleteTeam(ctx, "org2", "team_1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other org deletes team: %v", err)
	}
	if err := s.CreateAssignment(ctx, &rbac.Assignment{ID: "ras_1", OrgID: "org1", Email: "a@example.com", RoleID: rbac.RoleViewer, CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateToken(ctx, &store.Token{ID: "tok_1", OrgID: "org1", Email: "a@example.com", Name: "ci", Hash: "h1", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteUser(ctx, "org1", "a@example.com"); err != nil {
		t.Fatal(err)
	}
	if as, _ := s.ListAssignments(ctx, "org1", "a@example.com"); len(as) != 0 {
		t.Fatalf("deleted user keeps %d assignments", len(as))
	}
	if _, err := s.GetTokenByHash(ctx, "h1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted user's token survives: %v", err)
	}
}

func testTokens(t *testing.T, s store.Store) {
	ctx := context.Background()
	exp := t0.Add(time.Hour)
	for _, tok := range []*store.Token{
		{ID: "tok_1", OrgID: "org1", Email: "a@example.com", Name: "ci", Hash: "hash1", ExpiresAt: &exp, CreatedAt: t0},
		{ID: "tok_2", OrgID: "org1", Email: "b@example.com", Name: "laptop", Hash: "hash2", CreatedAt: t0},
	} {
		if err := s.CreateToken(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.GetTokenByHash(ctx, "hash1")
	if err != nil || got.ID != "tok_1" || got.ExpiresAt == nil || !got.ExpiresAt.Equal(exp) || got.RevokedAt != nil {
		t.Fatalf("by hash: %+v %v", got, err)
	}
	if list, _ := s.ListTokens(ctx, "org1", "b@example.com"); len(list) != 1 || list[0].ID != "tok_2" {
		t.Fatalf("list one user's tokens: %+v", list)
	}
	if list, _ := s.ListTokens(ctx, "org2", ""); len(list) != 0 {
		t.Fatalf("other org lists %d tokens", len(list))
	}
	if _, _, err := s.RevokeToken(ctx, "org2", "tok_1", t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other org revokes: %v", err)
	}
	r1, changed, err := s.RevokeToken(ctx, "org1", "tok_1", t0.Add(time.Minute))
	if err != nil || !changed || r1.RevokedAt == nil || !r1.RevokedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("revoke: %+v %v %v", r1, changed, err)
	}
	// Again, even at the same instant: no change, and it says so.
	for _, at := range []time.Time{t0.Add(time.Minute), t0.Add(time.Hour)} {
		r2, changed, err := s.RevokeToken(ctx, "org1", "tok_1", at)
		if err != nil || changed || !r2.RevokedAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("second revoke at %s: %+v changed=%v %v", at, r2, changed, err)
		}
	}
}

func testRoles(t *testing.T, s store.Store) {
	ctx := context.Background()
	r := &rbac.Role{ID: "role_c1", OrgID: "org1", Name: "deployer", Policies: []string{"provisioning:write", "space:view"}, CreatedAt: t0}
	if err := s.CreateRole(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateRole(ctx, &rbac.Role{ID: "role_c2", OrgID: "org1", Name: "deployer", Policies: []string{"space:view"}, CreatedAt: t0}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate role name: %v", err)
	}
	got, err := s.GetRole(ctx, "org1", "role_c1")
	if err != nil || len(got.Policies) != 2 || got.Policies[0] != "provisioning:write" {
		t.Fatalf("role round trip: %+v %v", got, err)
	}
	if _, err := s.GetRole(ctx, "org2", "role_c1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other org sees role: %v", err)
	}
	a := &rbac.Assignment{ID: "ras_1", OrgID: "org1", Email: "a@example.com", RoleID: "role_c1", Scope: "space:spc_1", CreatedAt: t0}
	if err := s.CreateAssignment(ctx, a); err != nil {
		t.Fatal(err)
	}
	dup := *a
	dup.ID = "ras_2"
	if err := s.CreateAssignment(ctx, &dup); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate assignment: %v", err)
	}
	if err := s.DeleteRole(ctx, "org1", "role_c1"); !errors.Is(err, store.ErrInUse) {
		t.Fatalf("delete assigned role: %v", err)
	}
	perms, err := rbac.Effective(ctx, s, "org1", "a@example.com")
	if err != nil || !perms.Allows("provisioning:delete", "space:spc_1") || perms.OrgWide("space:view") {
		t.Fatalf("effective permissions: %+v %v", perms.Grants(), err)
	}
	if _, err := s.DeleteAssignment(ctx, "org2", "ras_1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other org deletes assignment: %v", err)
	}
	if del, err := s.DeleteAssignment(ctx, "org1", "ras_1"); err != nil || del.Email != "a@example.com" {
		t.Fatalf("delete assignment: %+v %v", del, err)
	}
	if err := s.DeleteRole(ctx, "org1", "role_c1"); err != nil {
		t.Fatal(err)
	}
}

func testAuditedCommits(t *testing.T, s store.Store) {
	ctx := context.Background()
	e := entryAt("org1", "user.create", t0)
	err := s.Audited(ctx, e, func(tx store.Tx) error {
		return tx.CreateUser(ctx, &store.User{OrgID: "org1", Email: "a@example.com", CreatedAt: t0})
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetUser(ctx, "org1", "a@example.com"); err != nil {
		t.Fatalf("change not committed: %v", err)
	}
	list, total, err := s.ListAudit(ctx, &audit.Filter{OrgID: "org1"})
	if err != nil || total != 1 || len(list) != 1 || list[0].ID != e.ID || list[0].Actor != "alice@example.com" ||
		!list[0].CreatedAt.Equal(t0) || string(list[0].Metadata) != `{"k":"v"}` {
		t.Fatalf("entry: %+v total %d %v", list, total, err)
	}
	// A job created inside Audited still wakes the engine, once the transaction commits.
	wake := s.Wakeups(ctx)
	if err := s.Audited(ctx, entryAt("org1", "provisioning-job.create", t0), func(tx store.Tx) error {
		_, err := tx.CreateJob(ctx, &store.CreateJobParams{Job: newJob("org1", "spc1", job.StatusQueued, t0), Now: t0})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-time.After(5 * time.Second):
		t.Fatal("no wake-up after an audited job creation")
	}
}

func testAuditedRollsBack(t *testing.T, s store.Store) {
	ctx := context.Background()
	boom := errors.New("boom")
	err := s.Audited(ctx, entryAt("org1", "user.create", t0), func(tx store.Tx) error {
		if err := tx.CreateUser(ctx, &store.User{OrgID: "org1", Email: "a@example.com", CreatedAt: t0}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if _, err := s.GetUser(ctx, "org1", "a@example.com"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("failed change committed: %v", err)
	}
	// An entry that cannot be written takes the change down with it.
	bad := entryAt("org1", "", t0)
	if err := s.Audited(ctx, bad, func(tx store.Tx) error {
		return tx.CreateUser(ctx, &store.User{OrgID: "org1", Email: "b@example.com", CreatedAt: t0})
	}); err == nil {
		t.Fatal("entry without an action accepted")
	}
	if _, err := s.GetUser(ctx, "org1", "b@example.com"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("change committed without its entry: %v", err)
	}
	if _, total, _ := s.ListAudit(ctx, &audit.Filter{OrgID: "org1"}); total != 0 {
		t.Fatalf("%d entries after failed changes", total)
	}
}

func testAuditFilters(t *testing.T, s store.Store) {
	ctx := context.Background()
	for i := 0; i < 7; i++ {
		e := entryAt("org1", "space.create", t0.Add(time.Duration(i)*time.Minute))
		if i%2 == 1 {
			e.Scope, e.Action, e.Actor = audit.ScopeProvisioning, "provisioning-job.create", audit.ActorEngine
		}
		if err := s.Audited(ctx, e, func(store.Tx) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Audited(ctx, entryAt("org2", "space.create", t0), func(store.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		f     audit.Filter
		total int
		n     int
	}{
		"org only":         {audit.Filter{OrgID: "org1"}, 7, 7},
		"scope":            {audit.Filter{OrgID: "org1", Scopes: []string{audit.ScopeProvisioning}}, 3, 3},
		"scopes":           {audit.Filter{OrgID: "org1", Scopes: []string{audit.ScopeProvisioning, audit.ScopePlatform}}, 7, 7},
		"actor":            {audit.Filter{OrgID: "org1", Actor: audit.ActorEngine}, 3, 3},
		"action":           {audit.Filter{OrgID: "org1", Action: "space.create"}, 4, 4},
		"resource":         {audit.Filter{OrgID: "org1", ResourceType: "thing", ResourceID: "t1"}, 7, 7},
		"from to":          {audit.Filter{OrgID: "org1", From: t0.Add(2 * time.Minute), To: t0.Add(5 * time.Minute)}, 3, 3},
		"page 2 of 3":      {audit.Filter{OrgID: "org1", Page: 2, Limit: 3}, 7, 3},
		"page 3 of 3":      {audit.Filter{OrgID: "org1", Page: 3, Limit: 3}, 7, 1},
		"other resourceID": {audit.Filter{OrgID: "org1", ResourceID: "nope"}, 0, 0},
	}
	for name, c := range cases {
		list, total, err := s.ListAudit(ctx, &c.f)
		if err != nil || total != c.total || len(list) != c.n {
			t.Errorf("%s: total %d, %d entries (%v); want %d, %d", name, total, len(list), err, c.total, c.n)
		}
	}
	list, _, _ := s.ListAudit(ctx, &audit.Filter{OrgID: "org1", Limit: 2})
	if len(list) != 2 || !list[0].CreatedAt.After(list[1].CreatedAt) || !list[0].CreatedAt.Equal(t0.Add(6*time.Minute)) {
		t.Fatalf("not newest first: %+v", list)
	}
}

// The database itself refuses to change or remove an entry, whatever code might try.
func testAuditImmutable(t *testing.T, s store.Store) {
	ctx := context.Background()
	if err := s.Audited(ctx, entryAt("org1", "space.create", t0), func(store.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	h, ok := s.(interface{ DB() *sql.DB })
	if !ok {
		t.Skip("store exposes no database handle")
	}
	for _, q := range []string{`UPDATE audit_logs SET actor = 'mallory@example.com'`, `DELETE FROM audit_logs`} {
		if _, err := h.DB().ExecContext(ctx, q); err == nil {
			t.Errorf("%s succeeded", q)
		}
	}
	list, total, err := s.ListAudit(ctx, &audit.Filter{OrgID: "org1"})
	if err != nil || total != 1 || list[0].Actor != "alice@example.com" {
		t.Fatalf("entry changed: %+v %v", list, err)
	}
}

func testCheckpointAudited(t *testing.T, s store.Store) {
	ctx := context.Background()
	j := mustCreate(t, s, newJob("org1", "spc1", job.StatusQueued, t0))
	claimed, err := s.ClaimJobs(ctx, &store.ClaimJobsParams{Owner: "w", Now: t0, Limit: 1})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v", err)
	}
	c := claimed[0]
	// A step boundary is not on the record; the end of the job is.
	if _, err := s.Checkpoint(ctx, &store.CheckpointParams{ID: j.ID, LeaseToken: c.LeaseToken, Now: t0, Steps: c.Steps,
		Infra: json.RawMessage(`{}`), Status: job.StatusRunning, Phase: job.PhaseApply, NextRunAt: t0}); err != nil {
		t.Fatal(err)
	}
	if _, total, _ := s.ListAudit(ctx, &audit.Filter{OrgID: "org1"}); total != 0 {
		t.Fatalf("%d entries for a step checkpoint", total)
	}
	// A stale worker's final checkpoint writes neither the job nor an entry.
	if _, err := s.Checkpoint(ctx, &store.CheckpointParams{ID: j.ID, LeaseToken: c.LeaseToken - 1, Now: t0, Steps: c.Steps,
		Status: job.StatusCompleted, Phase: job.PhaseApply, NextRunAt: t0, Release: true}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("stale checkpoint: %v", err)
	}
	if _, err := s.Checkpoint(ctx, &store.CheckpointParams{ID: j.ID, LeaseToken: c.LeaseToken, Now: t0.Add(time.Second), Steps: c.Steps,
		Infra: json.RawMessage(`{}`), Status: job.StatusCompleted, Phase: job.PhaseApply, NextRunAt: t0, Release: true}); err != nil {
		t.Fatal(err)
	}
	list, total, err := s.ListAudit(ctx, &audit.Filter{OrgID: "org1"})
	if err != nil || total != 1 || list[0].Actor != audit.ActorEngine || list[0].Action != "provisioning-job.completed" ||
		list[0].ResourceID != j.ID || list[0].Scope != audit.ScopeProvisioning {
		t.Fatalf("terminal entry: %+v total %d %v", list, total, err)
	}
	var meta map[string]any
	if err := json.Unmarshal(list[0].Metadata, &meta); err != nil || meta["family"] != string(j.Family) ||
		meta["spaceID"] != j.SpaceID || meta["phase"] != string(job.PhaseApply) || len(meta) != 3 {
		t.Fatalf("terminal entry's metadata: %s (%v)", list[0].Metadata, err)
	}
	// A failed job's entry says why, by class and code.
	f := mustCreate(t, s, newJob("org1", "spc1", job.StatusQueued, t0))
	fc, err := s.ClaimJobs(ctx, &store.ClaimJobsParams{Owner: "w", Now: t0.Add(time.Minute), Limit: 1})
	if err != nil || len(fc) != 1 || fc[0].ID != f.ID {
		t.Fatalf("claim: %v %v", fc, err)
	}
	if _, err := s.Checkpoint(ctx, &store.CheckpointParams{ID: f.ID, LeaseToken: fc[0].LeaseToken, Now: t0.Add(time.Minute), Steps: fc[0].Steps,
		Status: job.StatusFailed, Phase: job.PhaseApply, NextRunAt: t0, Release: true,
		Failure: &job.Failure{Class: job.ClassUserAction, Code: "QuotaExceeded", Message: "no room"}}); err != nil {
		t.Fatal(err)
	}
	failed, _, err := s.ListAudit(ctx, &audit.Filter{OrgID: "org1", Action: "provisioning-job.failed", ResourceID: f.ID})
	if err != nil || len(failed) != 1 {
		t.Fatalf("failed entry: %v %v", failed, err)
	}
	meta = nil
	if err := json.Unmarshal(failed[0].Metadata, &meta); err != nil || meta["failureClass"] != string(job.ClassUserAction) ||
		meta["failureCode"] != "QuotaExceeded" || meta["family"] != string(f.Family) {
		t.Fatalf("failed entry's metadata: %s (%v)", failed[0].Metadata, err)
	}
}

func testAccountUpdateDelete(t *testing.T, s store.Store) {
	ctx := context.Background()
	acc := &store.CloudAccount{ID: "acc_1", OrgID: "org1", Name: "prod", Provider: "aws", Region: "eu-west-1",
		AuthMethod: "default", PermissionLevel: "read_only", CreatedAt: t0}
	if err := s.CreateCloudAccount(ctx, acc); err != nil {
		t.Fatal(err)
	}
	level := "read_write"
	got, err := s.UpdateCloudAccount(ctx, &store.UpdateCloudAccountParams{OrgID: "org1", ID: "acc_1", PermissionLevel: &level})
	if err != nil || got.PermissionLevel != "read_write" || got.Name != "prod" {
		t.Fatalf("update: %+v %v", got, err)
	}
	if _, err := s.UpdateCloudAccount(ctx, &store.UpdateCloudAccountParams{OrgID: "org2", ID: "acc_1", PermissionLevel: &level}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other org updates: %v", err)
	}
	if err := s.CreateSpace(ctx, &store.Space{ID: "spc_1", OrgID: "org1", Name: "s", Provider: "aws", Region: "eu-west-1",
		SpaceType: "kubernetes", CloudAccountID: "acc_1", Status: "ready", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteCloudAccount(ctx, "org1", "acc_1"); !errors.Is(err, store.ErrInUse) {
		t.Fatalf("delete in use: %v", err)
	}
	if err := s.DeleteSpace(ctx, "org1", "spc_1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteCloudAccount(ctx, "org2", "acc_1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other org deletes: %v", err)
	}
	if err := s.DeleteCloudAccount(ctx, "org1", "acc_1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetCloudAccount(ctx, "org1", "acc_1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted account: %v", err)
	}
}
