package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/jobs"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/store/sqlite"
	"github.com/groundworkhq/groundwork/internal/store/sqlstore"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// refusing is a family whose pipeline refuses every config, naming a field.
type refusing struct{ *testfamily.Pipeline }

func (refusing) Family() job.Family { return "refusing" }
func (refusing) Validate(context.Context, *job.Job) error {
	return validation.New("config.size", "range", "must be at most 3")
}

func TestAdmit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := st.CreateOrg(ctx, &store.Org{ID: "org_a", Name: "a", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateSpace(ctx, &store.Space{ID: "spc_a", OrgID: "org_a", Name: "a", Provider: "local", Region: "local",
		SpaceType: "kubernetes", Status: "ready", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	reg, err := pipeline.NewRegistry(&testfamily.Pipeline{N: 2}, refusing{&testfamily.Pipeline{N: 1}})
	if err != nil {
		t.Fatal(err)
	}
	svc := &jobs.Service{Store: st, Pipelines: reg, Now: func() time.Time { return now }}
	denied := errors.New("denied")
	cases := []struct {
		name      string
		org       string
		req       jobs.Request
		authorize jobs.Authorize
		reason    jobs.Reason
		fields    []string // the refused fields; none for an admitted job
		err       error    // an error passed through as is
	}{
		{name: "admitted", org: "org_a", req: jobs.Request{SpaceID: "spc_a", Kind: "test", Config: json.RawMessage(`{"name":"web"}`)}},
		{name: "fields", org: "org_a", req: jobs.Request{Kind: "nope", Mode: "sideways", Config: json.RawMessage(`[]`)},
			reason: jobs.Invalid, fields: []string{"spaceID", "kind", "mode", "config"}},
		{name: "other org's space", org: "org_b", req: jobs.Request{SpaceID: "spc_a", Kind: "test"},
			reason: jobs.NotFound, fields: []string{"spaceID"}},
		{name: "not allowed", org: "org_a", req: jobs.Request{SpaceID: "spc_a", Kind: "test"},
			authorize: func(context.Context, *store.Space) error { return denied }, err: denied},
		{name: "pipeline refuses", org: "org_a", req: jobs.Request{SpaceID: "spc_a", Kind: "refusing"},
			reason: jobs.Invalid, fields: []string{"config.size"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			j, err := svc.Admit(ctx, tc.org, tc.req, tc.authorize)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if tc.fields == nil {
				if err != nil {
					t.Fatal(err)
				}
				if j.Name != "web" || j.Provider != "local" || j.Status != job.StatusQueued || len(j.Steps) != 2 || !j.NextRunAt.Equal(now) {
					t.Fatalf("job laid out as %+v", j)
				}
				return
			}
			var rf *jobs.Refusal
			if !errors.As(err, &rf) {
				t.Fatalf("err = %v, want a refusal", err)
			}
			var got []string
			for _, f := range rf.Fields {
				got = append(got, f.Field)
			}
			if rf.Reason != tc.reason || len(got) != len(tc.fields) {
				t.Fatalf("refusal %v %v, want %v %v", rf.Reason, got, tc.reason, tc.fields)
			}
			for i := range got {
				if got[i] != tc.fields[i] {
					t.Fatalf("fields %v, want %v", got, tc.fields)
				}
			}
		})
	}
}

func TestAdmitReadOnlyAccount(t *testing.T) {
	t.Parallel()
	st := world(t)
	reg, err := pipeline.NewRegistry(&testfamily.Pipeline{N: 2})
	if err != nil {
		t.Fatal(err)
	}
	svc := &jobs.Service{Store: st, Pipelines: reg, Now: func() time.Time { return t0 }}
	cases := []struct {
		name    string
		req     jobs.Request
		refused bool
	}{
		{name: "create", req: jobs.Request{SpaceID: "spc_ro", Kind: "test"}, refused: true},
		// The plan is how the account's owner learns what to grant.
		{name: "plan", req: jobs.Request{SpaceID: "spc_ro", Kind: "test", PlanOnly: true}},
		{name: "adopt, operations unknown", req: jobs.Request{SpaceID: "spc_ro", Kind: "test", Mode: "adopt"}},
		{name: "create on no account", req: jobs.Request{SpaceID: "spc_a", Kind: "test"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := svc.Admit(t.Context(), "org_a", tc.req, nil)
			if !tc.refused {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			rf := wantRefusal(t, err, jobs.Forbidden, "spaceID/permissionLevel")
			if !strings.Contains(rf.FixHint, "read_write") {
				t.Fatalf("fix hint %q does not say what to grant", rf.FixHint)
			}
		})
	}
}

func TestRequireReadWrite(t *testing.T) {
	t.Parallel()
	st := world(t)
	svc := &jobs.Service{Store: st, Now: func() time.Time { return t0 }}
	for _, tc := range []struct {
		space   string
		refused bool
	}{{space: "spc_ro", refused: true}, {space: "spc_a"}} {
		t.Run(tc.space, func(t *testing.T) {
			t.Parallel()
			sp, err := st.GetSpace(t.Context(), "org_a", tc.space)
			if err != nil {
				t.Fatal(err)
			}
			err = svc.RequireReadWrite(t.Context(), "org_a", sp)
			if !tc.refused {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			rf := wantRefusal(t, err, jobs.Forbidden, "spaceID/permissionLevel")
			if !strings.Contains(rf.FixHint, "ec2:*") {
				t.Fatalf("fix hint %q lacks the provider's policy", rf.FixHint)
			}
		})
	}
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// world is a store with org_a, a space on no cloud account (spc_a) and one on a read-only
// account (spc_ro).
func world(t *testing.T) *sqlstore.Store {
	t.Helper()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.CreateOrg(ctx, &store.Org{ID: "org_a", Name: "a", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateCloudAccount(ctx, &store.CloudAccount{ID: "acc_ro", OrgID: "org_a", Name: "ro", Provider: "aws",
		Region: "eu-west-1", AuthMethod: "default", PermissionLevel: "read_only", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	for _, sp := range []*store.Space{
		{ID: "spc_a", OrgID: "org_a", Name: "a", Provider: "local", Region: "local", SpaceType: "kubernetes", Status: "ready", CreatedAt: t0},
		{ID: "spc_ro", OrgID: "org_a", Name: "ro", Provider: "aws", Region: "eu-west-1", SpaceType: "kubernetes",
			CloudAccountID: "acc_ro", Status: "ready", CreatedAt: t0},
	} {
		if err := st.CreateSpace(ctx, sp); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// wantRefusal fails unless err is a refusal for reason naming fields (in order).
func wantRefusal(t *testing.T, err error, reason jobs.Reason, fields ...string) *jobs.Refusal {
	t.Helper()
	var rf *jobs.Refusal
	if !errors.As(err, &rf) {
		t.Fatalf("err = %v, want a refusal", err)
	}
	var got []string
	for _, f := range rf.Fields {
		got = append(got, f.Field+"/"+f.Rule)
	}
	if rf.Reason != reason || strings.Join(got, ",") != strings.Join(fields, ",") {
		t.Fatalf("refusal %d %q %v, want %d %v", rf.Reason, rf.Detail, got, reason, fields)
	}
	return rf
}
