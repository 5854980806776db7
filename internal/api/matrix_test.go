package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/audit"
	"github.com/groundworkhq/groundwork/internal/auth"
	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/catalog/components"
	"github.com/groundworkhq/groundwork/internal/discovery"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/component"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
	"github.com/groundworkhq/groundwork/internal/plan"
	"github.com/groundworkhq/groundwork/internal/protocol"
	"github.com/groundworkhq/groundwork/internal/provider/kube"
	localprov "github.com/groundworkhq/groundwork/internal/provider/local"
	"github.com/groundworkhq/groundwork/internal/rbac"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/store/sqlite"
	"github.com/groundworkhq/groundwork/internal/store/sqlstore"
)

// accessEnv is a server on a real SQLite store with real tokens: two orgs, and in each an
// admin, an editor and a viewer holding the system role org-wide. The datastore and component
// families are on, as internal/app wires them, so that every route the server can mount is
// mounted.
type accessEnv struct {
	st     *sqlstore.Store
	sec    *secrets.Vault
	srv    *Server
	url    string
	dir    string
	tokens map[string]string // "org_a/editor" → secret
	seq    atomic.Int64
	cat    *catalog.Catalog
	provs  *protocol.Registry
	// cluster answers registrations of a Kubernetes cluster (see clusterVersion).
	cluster *clusterVersion
}

var roleOf = map[string]string{"admin": rbac.RoleAdmin, "editor": rbac.RoleEditor, "viewer": rbac.RoleViewer}

const orgA, orgB = "org_a", "org_b"

type healthy struct{}

// Check stands in for a remote provisioner's health endpoint: registration is what the matrix
// exercises, not the network.
func (healthy) Check(context.Context, string, []catalog.Pair) error { return nil }

func newAccessEnv(t *testing.T) *accessEnv {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	local, err := secrets.OpenLocal(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	sec := secrets.NewVault(local, st)
	comps, err := components.Default()
	if err != nil {
		t.Fatal(err)
	}
	// install-component validates its job with the component pipeline; no engine runs here,
	// so the job it creates stays queued and nothing reaches a cluster.
	compPipe, err := component.New(component.Options{Catalog: comps, Spaces: spaceClusters{st: st}, Secrets: sec})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := pipeline.NewRegistry(&testfamily.Pipeline{N: 2}, compPipe, remediationPipeline(t, st))
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	// The registry keeps its registrations in the API's own store, as the server does, so that a
	// registration and its audit entry share one transaction.
	provs := protocol.NewRegistry(st, protocol.RegistryOptions{Health: healthy{}})
	e := &accessEnv{st: st, sec: sec, dir: dir, tokens: map[string]string{}, cat: cat, provs: provs, cluster: newClusterVersion(t)}
	lp, err := localprov.New(localprov.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	disc := discovery.New(func(context.Context, string, string) (discovery.Lister, error) {
		return localprov.Discoverer{P: lp}, nil
	}, discovery.Options{})
	e.srv = New(Config{Store: st, Pipelines: reg, Catalog: cat, Secrets: sec, Provisioners: provs, Discovery: disc,
		Datastores: &DatastoreConfig{Rotate: dspipe.New(dspipe.Options{})}, Components: &ComponentConfig{Catalog: comps, Clusters: kube.Registrar{}}, Remediation: &RemediationConfig{}, Drift: matrixDrift(),
		Auth: TokenAuth{Auth: &auth.Authenticator{Store: st}}})
	hs := httptest.NewServer(e.srv)
	t.Cleanup(hs.Close)
	e.url = hs.URL
	ctx := context.Background()
	for _, org := range []string{orgA, orgB} {
		if err := st.CreateOrg(ctx, &store.Org{ID: org, Name: org, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		for name, role := range roleOf {
			email := name + "@" + org + ".example.com"
			e.user(t, org, email, role, "")
			e.tokens[org+"/"+name] = e.token(t, org, email, nil)
		}
	}
	return e
}

func (e *accessEnv) uniq() string { return fmt.Sprintf("u%d", e.seq.Add(1)) }

func (e *accessEnv) user(t *testing.T, org, email, role, scope string) {
	t.Helper()
	ctx := context.Background()
	if err := e.st.CreateUser(ctx, &store.User{OrgID: org, Email: email, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if role != "" {
		e.assign(t, org, email, role, scope)
	}
}

func (e *accessEnv) assign(t *testing.T, org, email, role, scope string) {
	t.Helper()
	if err := e.st.CreateAssignment(context.Background(), &rbac.Assignment{ID: "ras_" + e.uniq(), OrgID: org, Email: email,
		RoleID: role, Scope: scope, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
}

func (e *accessEnv) token(t *testing.T, org, email string, exp *time.Time) string {
	t.Helper()
	secret, err := auth.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.CreateToken(context.Background(), &store.Token{ID: "tok_" + e.uniq(), OrgID: org, Email: email,
		Name: "test", Hash: auth.Hash(secret), ExpiresAt: exp, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return secret
}

func (e *accessEnv) space(t *testing.T, org string) string {
	t.Helper()
	id := "spc_" + e.uniq()
	if err := e.st.CreateSpace(context.Background(), &store.Space{ID: id, OrgID: org, Name: id, Provider: "local",
		Region: "local", SpaceType: "kubernetes", Status: "ready", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return id
}

func (e *accessEnv) job(t *testing.T, org, spaceID string, status job.Status) *job.Job {
	t.Helper()
	j := &job.Job{ID: "job_" + e.uniq(), OrgID: org, SpaceID: spaceID, Kind: job.KindProvisioning, Family: testfamily.Family,
		Provider: "local", Mode: job.ModeCreate, Config: json.RawMessage(`{}`), Infra: json.RawMessage(`{}`),
		Steps:  []job.StepRecord{{Name: "step1", Status: job.StepDone}, {Name: "step2", Status: job.StepFailed}},
		Status: status, Phase: job.PhaseApply, LeaseTTL: time.Minute, NextRunAt: time.Now()}
	if status == job.StatusDraft {
		j.Steps = []job.StepRecord{{Name: "step1", Status: job.StepPending}}
	}
	if status == job.StatusFailed {
		j.Failure = &job.Failure{Class: job.ClassTransient, Message: "throttled", Retryable: true}
	}
	out, err := e.st.CreateJob(context.Background(), &store.CreateJobParams{Job: j, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type reply struct {
	status int
	raw    string
	body   map[string]any
}

func (e *accessEnv) call(t *testing.T, tok, method, path, body string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, e.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, raw: string(raw)}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

// auditTotal counts the org's entries made by callers; the engine's own entries (a job that a
// delete ended at once also records its end by the engine) are not the route's.
func (e *accessEnv) auditTotal(t *testing.T, org string) int {
	t.Helper()
	_, n, err := e.st.ListAudit(context.Background(), &audit.Filter{OrgID: org})
	if err != nil {
		t.Fatal(err)
	}
	_, engine, err := e.st.ListAudit(context.Background(), &audit.Filter{OrgID: org, Actor: audit.ActorEngine})
	if err != nil {
		t.Fatal(err)
	}
	return n - engine
}

// target is what one matrix cell works on: the path and body with the objects it names made
// in the target org, and the audit record a success must leave.
type target struct {
	path, body string
	// resourceType and resourceID of the audit entry; resourceID "" means the "id" of the
	// answer (a create).
	resourceType, resourceID string
	// check, if set, looks further at a successful answer.
	check func(got reply) error
}

// fixture says how to exercise one route with success.
type fixture struct {
	ok int
	// crossOrg: the request names an object (in the path or body); made in another org, it
	// must answer 404 to a caller allowed the policy.
	crossOrg bool
	make     func(t *testing.T, e *accessEnv, org string) target
}

// notAudited lists mutating routes that write no audit entry, with the reason. Everything
// else that is not a GET must leave exactly one entry.
var notAudited = map[string]string{
	"POST /api/provisioning-jobs/plan":             "a plan stores and changes nothing",
	"POST /api/provisioning-jobs/{id}/update-plan": "a dry run stores and changes nothing",
}

func fixtures() map[string]fixture {
	plain := func(path, body string) func(*testing.T, *accessEnv, string) target {
		return func(*testing.T, *accessEnv, string) target { return target{path: path, body: body} }
	}
	fx := map[string]fixture{
		"GET /api/spaces":  {ok: 200, make: plain("/api/spaces", "")},
		"POST /api/spaces": {ok: 201, make: plain("/api/spaces", `{"name":"s","provider":"local","region":"local"}`)},
		"GET /api/spaces/{id}": {ok: 200, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			return target{path: "/api/spaces/" + e.space(t, org)}
		}},
		"DELETE /api/spaces/{id}": {ok: 204, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			id := e.space(t, org)
			return target{path: "/api/spaces/" + id, resourceType: "space", resourceID: id}
		}},
		"GET /api/spaces/{id}/discovery/{kind}": {ok: 200, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			return target{path: "/api/spaces/" + e.space(t, org) + "/discovery/networks", check: func(got reply) error {
				var p discovery.Page
				if err := json.Unmarshal([]byte(got.raw), &p); err != nil || len(p.Items) == 0 || p.Items[0].CIDR != "127.0.0.0/8" {
					return fmt.Errorf("discovery = %s (%v): want the loopback network", got.raw, err)
				}
				return nil
			}}
		}},
		"GET /api/cloud-accounts": {ok: 200, make: plain("/api/cloud-accounts", "")},
		"POST /api/cloud-accounts": {ok: 201, make: plain("/api/cloud-accounts",
			`{"name":"a","provider":"aws","authMethod":"static_keys","credentials":{"accessKeyId":"AKIAEXAMPLE","secretAccessKey":"s3cr3t"}}`)},
		"GET /api/cloud-accounts/{id}": {ok: 200, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			return target{path: "/api/cloud-accounts/" + e.account(t, org)}
		}},
		"PATCH /api/cloud-accounts/{id}": {ok: 200, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			id := e.account(t, org)
			return target{path: "/api/cloud-accounts/" + id, body: `{"permissionLevel":"read_write"}`, resourceType: "cloud-account", resourceID: id}
		}},
		"DELETE /api/cloud-accounts/{id}": {ok: 204, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			id := e.account(t, org)
			return target{path: "/api/cloud-accounts/" + id, resourceType: "cloud-account", resourceID: id}
		}},
		"GET /api/cloud-accounts/{id}/upgrade-policy": {ok: 200, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			return target{path: "/api/cloud-accounts/" + e.account(t, org) + "/upgrade-policy"}
		}},
		"GET /api/provisioning-jobs": {ok: 200, make: plain("/api/provisioning-jobs", "")},
		"POST /api/provisioning-jobs": {ok: 201, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			return target{path: "/api/provisioning-jobs", body: `{"spaceID":"` + e.space(t, org) + `","kind":"test","draft":true}`}
		}},
		"GET /api/provisioning-jobs/{id}/plan": {ok: 200, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			return target{path: "/api/provisioning-jobs/" + e.job(t, org, e.space(t, org), job.StatusDraft).ID + "/plan"}
		}},
		"POST /api/provisioning-jobs/plan": {ok: 200, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			return target{path: "/api/provisioning-jobs/plan", body: `{"spaceID":"` + e.space(t, org) + `","kind":"test"}`,
				check: func(got reply) error {
					var p plan.Plan
					if err := json.Unmarshal([]byte(got.raw), &p); err != nil || len(p.Steps) == 0 || p.Policy.Format != plan.FormatNone {
						return fmt.Errorf("plan = %s (%v): want the test family's steps and no policy", got.raw, err)
					}
					return nil
				}}
		}},
		"GET /api/provisioning-jobs/{id}": {ok: 200, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			return target{path: "/api/provisioning-jobs/" + e.job(t, org, e.space(t, org), job.StatusDraft).ID}
		}},
		"PATCH /api/provisioning-jobs/{id}": {ok: 200, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			j := e.job(t, org, e.space(t, org), job.StatusDraft)
			return target{path: "/api/provisioning-jobs/" + j.ID, body: `{"version":1,"name":"renamed"}`, resourceType: "provisioning-job", resourceID: j.ID}
		}},
		"DELETE /api/provisioning-jobs/{id}": {ok: 202, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			j := e.job(t, org, e.space(t, org), job.StatusDraft)
			return target{path: "/api/provisioning-jobs/" + j.ID, resourceType: "provisioning-job", resourceID: j.ID}
		}},
		"POST /api/provisioning-jobs/{id}/retry": {ok: 202, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			j := e.job(t, org, e.space(t, org), job.StatusFailed)
			return target{path: "/api/provisioning-jobs/" + j.ID + "/retry", resourceType: "provisioning-job", resourceID: j.ID}
		}},
		"GET /api/provisioning-jobs/{id}/events": {ok: 200, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			// A settled job: the stream sends it once and ends.
			return target{path: "/api/provisioning-jobs/" + e.job(t, org, e.space(t, org), job.StatusFailed).ID + "/events"}
		}},
		"GET /api/catalog/types": {ok: 200, make: plain("/api/catalog/types", "")},
		"GET /api/catalog/types/{category}/{type}": {ok: 200, make: func(t *testing.T, e *accessEnv, _ string) target {
			ty := e.cat.Types()[0]
			return target{path: "/api/catalog/types/" + string(ty.Kind) + "/" + ty.Type}
		}},
		"POST /api/provisioners": {ok: 201, make: func(t *testing.T, e *accessEnv, _ string) target {
			return target{path: "/api/provisioners", body: `{"name":"p` + e.uniq() + `","url":"http://127.0.0.1:1","pairs":[{"kind":"managed-resource","type":"x-` + e.uniq() + `"}]}`}
		}},
		"GET /api/provisioners": {ok: 200, make: plain("/api/provisioners", "")},
		"GET /api/provisioners/{id}": {ok: 200, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			return target{path: "/api/provisioners/" + e.provisioner(t, org)}
		}},
		"DELETE /api/provisioners/{id}": {ok: 204, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			id := e.provisioner(t, org)
			return target{path: "/api/provisioners/" + id, resourceType: "provisioner", resourceID: id}
		}},
		"GET /api/policies": {ok: 200, make: plain("/api/policies", "")},
		"GET /api/roles":    {ok: 200, make: plain("/api/roles", "")},
		"POST /api/roles": {ok: 201, make: func(t *testing.T, e *accessEnv, _ string) target {
			return target{path: "/api/roles", body: `{"name":"r` + e.uniq() + `","policies":["space:view","provisioning:write"]}`, resourceType: "role"}
		}},
		"GET /api/roles/{id}": {ok: 200, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			return target{path: "/api/roles/" + e.role(t, org)}
		}},
		"DELETE /api/roles/{id}": {ok: 204, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			id := e.role(t, org)
			return target{path: "/api/roles/" + id, resourceType: "role", resourceID: id}
		}},
		"GET /api/role-assignments": {ok: 200, make: plain("/api/role-assignments", "")},
		"POST /api/role-assignments": {ok: 201, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			email := e.uniq() + "@example.com"
			e.user(t, org, email, "", "")
			return target{path: "/api/role-assignments", body: `{"email":"` + email + `","roleID":"role_viewer"}`, resourceType: "role-assignment"}
		}},
		"DELETE /api/role-assignments/{id}": {ok: 204, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			email := e.uniq() + "@example.com"
			e.user(t, org, email, "", "")
			id := "ras_" + e.uniq()
			if err := e.st.CreateAssignment(context.Background(), &rbac.Assignment{ID: id, OrgID: org, Email: email, RoleID: rbac.RoleViewer, CreatedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
			return target{path: "/api/role-assignments/" + id, resourceType: "role-assignment", resourceID: id}
		}},
		"GET /api/users": {ok: 200, make: plain("/api/users", "")},
		"POST /api/users": {ok: 201, make: func(t *testing.T, e *accessEnv, _ string) target {
			email := e.uniq() + "@example.com"
			return target{path: "/api/users", body: `{"email":"` + email + `","roleID":"role_viewer"}`, resourceType: "user", resourceID: email}
		}},
		"DELETE /api/users/{email}": {ok: 204, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			email := e.uniq() + "@example.com"
			e.user(t, org, email, rbac.RoleViewer, "")
			return target{path: "/api/users/" + email, resourceType: "user", resourceID: email}
		}},
		"GET /api/users/{email}/permissions": {ok: 200, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			email := e.uniq() + "@example.com"
			e.user(t, org, email, rbac.RoleEditor, "")
			return target{path: "/api/users/" + email + "/permissions"}
		}},
		"GET /api/teams": {ok: 200, make: plain("/api/teams", "")},
		"POST /api/teams": {ok: 201, make: func(t *testing.T, e *accessEnv, _ string) target {
			return target{path: "/api/teams", body: `{"name":"t` + e.uniq() + `"}`, resourceType: "team"}
		}},
		"GET /api/teams/{id}": {ok: 200, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			return target{path: "/api/teams/" + e.team(t, org, nil)}
		}},
		"PATCH /api/teams/{id}": {ok: 200, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			id := e.team(t, org, nil)
			return target{path: "/api/teams/" + id, body: `{"spaceIDs":["` + e.space(t, org) + `"]}`, resourceType: "team", resourceID: id}
		}},
		"DELETE /api/teams/{id}": {ok: 204, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			id := e.team(t, org, nil)
			return target{path: "/api/teams/" + id, resourceType: "team", resourceID: id}
		}},
		"GET /api/tokens": {ok: 200, make: plain("/api/tokens", "")},
		"POST /api/tokens": {ok: 201, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			email := e.uniq() + "@example.com"
			e.user(t, org, email, rbac.RoleViewer, "")
			return target{path: "/api/tokens", body: `{"name":"ci","email":"` + email + `","expiresIn":"24h"}`, resourceType: "token"}
		}},
		"DELETE /api/tokens/{id}": {ok: 204, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			email := e.uniq() + "@example.com"
			e.user(t, org, email, rbac.RoleViewer, "")
			e.token(t, org, email, nil)
			list, _ := e.st.ListTokens(context.Background(), org, email)
			return target{path: "/api/tokens/" + list[0].ID, resourceType: "token", resourceID: list[0].ID}
		}},
		"GET /api/audit-logs": {ok: 200, make: plain("/api/audit-logs", "")},
	}
	for key, f := range familyFixtures() {
		fx[key] = f
	}
	for key, f := range remediationFixtures() {
		fx[key] = f
	}
	for key, f := range driftFixtures() {
		fx[key] = f
	}
	for key, f := range updateFixtures() {
		fx[key] = f
	}
	return fx
}

func (e *accessEnv) provisioner(t *testing.T, org string) string {
	t.Helper()
	p, err := e.provs.Register(context.Background(), org, protocol.RegisterInput{Name: "p" + e.uniq(), URL: "http://127.0.0.1:1",
		Pairs: []catalog.Pair{{Kind: "managed-resource", Type: "x-" + e.uniq()}}})
	if err != nil {
		t.Fatal(err)
	}
	return p.ID
}

func (e *accessEnv) account(t *testing.T, org string) string {
	t.Helper()
	id := "acc_" + e.uniq()
	if err := e.st.CreateCloudAccount(context.Background(), &store.CloudAccount{ID: id, OrgID: org, Name: id, Provider: "aws",
		AuthMethod: "default", PermissionLevel: "read_only", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return id
}

func (e *accessEnv) role(t *testing.T, org string) string {
	t.Helper()
	id := "role_" + e.uniq()
	if err := e.st.CreateRole(context.Background(), &rbac.Role{ID: id, OrgID: org, Name: id, Policies: []string{"space:view"}, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return id
}

func (e *accessEnv) team(t *testing.T, org string, spaces []string) string {
	t.Helper()
	id := "team_" + e.uniq()
	if err := e.st.CreateTeam(context.Background(), &store.Team{ID: id, OrgID: org, Name: id, SpaceIDs: spaces, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return id
}

// allowedByRule is the access model stated independently of rbac.SystemRoles: Viewer may view,
// Editor may view and write, on every resource that is not admin-only; Admin may do all.
func allowedByRule(role, policy string) bool {
	res, action := rbac.Split(policy)
	adminOnly := map[string]bool{"user": true, "team": true, "role": true, "token": true, "audit-log": true}
	switch role {
	case "admin":
		return true
	case "editor":
		// Registering and removing a provisioner redirects every job of its pairs: Admin's.
		// Deciding a remediation's approval gate, or a config update that drops data, is
		// Admin's too.
		adminAction := (res == "provisioner" && action != rbac.View) || ((res == "remediation" || res == "provisioning") && action == rbac.Approve)
		return !adminOnly[res] && action != rbac.Reveal && !adminAction
	case "viewer":
		return !adminOnly[res] && action == rbac.View
	}
	return false
}

func validPolicy(p string) bool {
	for _, x := range rbac.Policies() {
		if x.Policy == p {
			return true
		}
	}
	return false
}

// Every route the server can mount (the core table and the families') × every system role ×
// own org / other org answers exactly the status the access model predicts, and a successful
// mutation leaves exactly one audit entry naming the caller and the resource, while a refused
// one or a read leaves none.
func TestRouteMatrix(t *testing.T) {
	t.Parallel()
	e := newAccessEnv(t)
	fx := fixtures()
	routes := e.srv.allRoutes()
	seen := map[string]bool{}
	cells, skipped := 0, 0
	for _, rt := range routes {
		key := rt.method + " " + rt.path
		seen[key] = true
		if !validPolicy(rt.policy) {
			t.Errorf("%s: policy %q is not in the policy vocabulary (internal/rbac)", key, rt.policy)
			continue
		}
		f, ok := fx[key]
		if !ok {
			t.Errorf("%s has no matrix expectation: add it to fixtures() in matrix_test.go", key)
			continue
		}
		// One subtest per route, run in turn (the cells count audit entries of the shared orgs):
		// a failure names its route, and a route whose fixture needs a server that is not
		// installed skips alone (outside CI).
		var sub *testing.T
		t.Run(key, func(t *testing.T) {
			sub = t
			routeCells(t, e, rt, f, &cells)
		})
		if sub.Skipped() {
			skipped++
		}
	}
	if len(e.srv.datastoreRoutes()) == 0 || len(e.srv.componentRoutes()) == 0 {
		t.Errorf("the datastore and component routes are not mounted: the matrix would miss them")
	}
	if cells < 3*(len(routes)-skipped) {
		t.Errorf("only %d cells for %d routes (%d skipped)", cells, len(routes), skipped)
	}
	for key := range fx {
		if !seen[key] {
			t.Errorf("fixture %s names no route", key)
		}
	}
}

// routeCells runs one route's cells: three roles, in the caller's org and, when the request
// names an object, in the other. It counts each cell it runs in cells.
func routeCells(t *testing.T, e *accessEnv, rt route, f fixture, cells *int) {
	key := rt.method + " " + rt.path
	mutating := rt.method != http.MethodGet
	_, skipAudit := notAudited[key]
	for _, role := range []string{"admin", "editor", "viewer"} {
		for _, org := range []string{orgA, orgB} {
			if org == orgB && !f.crossOrg {
				continue // nothing in the request belongs to an org
			}
			name := fmt.Sprintf("%s as %s on %s", key, role, org)
			tg := f.make(t, e, org)
			want := f.ok
			switch {
			case !allowedByRule(role, rt.policy):
				want = http.StatusForbidden
			case org == orgB:
				want = http.StatusNotFound
			}
			if allowedByRule(role, rt.policy) != rbac.Compute([]rbac.Assignment{{RoleID: roleOf[role]}}, nil).OrgWide(rt.policy) {
				t.Errorf("%s: system role %s disagrees with the access model on %s", name, role, rt.policy)
			}
			*cells++
			beforeA, beforeB := e.auditTotal(t, orgA), e.auditTotal(t, orgB)
			// The other org's object, as its own admin reads it, before and after the attempt.
			var seenBefore *reply
			if org == orgB && mutating {
				if r := e.call(t, e.tokens[orgB+"/admin"], "GET", tg.path, ""); r.status == http.StatusOK {
					seenBefore = &r
				}
			}
			got := e.call(t, e.tokens[orgA+"/"+role], rt.method, tg.path, tg.body)
			if got.status != want {
				t.Errorf("%s: status %d, want %d (%s)", name, got.status, want, got.raw)
				continue
			}
			if seenBefore != nil {
				if after := e.call(t, e.tokens[orgB+"/admin"], "GET", tg.path, ""); after.status != http.StatusOK || after.raw != seenBefore.raw {
					t.Errorf("%s: the other org's object changed: %d %s, was %s", name, after.status, after.raw, seenBefore.raw)
				}
			}
			afterA, afterB := e.auditTotal(t, orgA), e.auditTotal(t, orgB)
			wantEntries := 0
			if mutating && want == f.ok && !skipAudit {
				wantEntries = 1
			}
			if afterA-beforeA != wantEntries || afterB != beforeB {
				t.Errorf("%s: %d new audit entries in the caller's org, %d in the other; want %d and 0",
					name, afterA-beforeA, afterB-beforeB, wantEntries)
				continue
			}
			if wantEntries == 1 {
				checkEntry(t, e, name, role, tg, got)
			}
			if tg.check != nil && want == f.ok {
				if err := tg.check(got); err != nil {
					t.Errorf("%s: %v", name, err)
				}
			}
		}
	}
}

func checkEntry(t *testing.T, e *accessEnv, name, role string, tg target, got reply) {
	t.Helper()
	list, _, err := e.st.ListAudit(context.Background(), &audit.Filter{OrgID: orgA, Limit: 3})
	i := slices.IndexFunc(list, func(en *audit.Entry) bool { return en.Actor != audit.ActorEngine })
	if err != nil || i < 0 {
		t.Fatalf("%s: read audit: %v", name, err)
	}
	en := list[i]
	wantID := tg.resourceID
	if wantID == "" {
		wantID, _ = got.body["id"].(string)
	}
	if en.Actor != role+"@"+orgA+".example.com" || (tg.resourceType != "" && en.ResourceType != tg.resourceType) ||
		en.ResourceID != wantID || en.Scope == "" || en.Action == "" {
		t.Errorf("%s: entry %+v; want actor %s@%s, resource %s %s", name, en, role, orgA, tg.resourceType, wantID)
	}
}

// A mutation that fails, whether refused before the store or rolled back inside it, leaves
// no entry.
func TestFailedMutationLeavesNoEntry(t *testing.T) {
	t.Parallel()
	e := newAccessEnv(t)
	admin := e.tokens[orgA+"/admin"]
	busy := e.space(t, orgA)
	e.job(t, orgA, busy, job.StatusDraft)
	dupRole := e.role(t, orgA)
	pending := "/api/provisioning-jobs/" + e.pendingDSJob(t, orgA).ID
	other := "/api/provisioning-jobs/" + e.job(t, orgA, busy, job.StatusCompleted).ID
	bare := e.space(t, orgA)
	cluster := e.clusterSpace(t, orgA)
	// A reference a connection holds, whose value has gone from the secret store: the reveal
	// fails, and a reveal that answered nothing must leave nothing on the record.
	lost := e.dsJob(t, orgA)
	lostRef := e.connection(t, orgA, lost.ID, "").Endpoint.SecretRef
	if err := e.sec.For(secrets.Owner{OrgID: orgA, Kind: secrets.OwnerJob, ID: lost.ID}).Delete(context.Background(), lostRef); err != nil {
		t.Fatal(err)
	}
	gone := httptest.NewTLSServer(http.NotFoundHandler())
	gone.Close() // a cluster endpoint nothing answers on
	cases := map[string]struct {
		method, path, body string
		status             int
	}{
		"invalid space":        {"POST", "/api/spaces", `{"name":"","provider":"mars"}`, 400},
		"space in use":         {"DELETE", "/api/spaces/" + busy, "", 409},
		"duplicate role name":  {"POST", "/api/roles", `{"name":"` + dupRole + `","policies":["space:view"]}`, 409},
		"unknown policy":       {"POST", "/api/roles", `{"name":"x","policies":["space:fly"]}`, 400},
		"missing job":          {"DELETE", "/api/provisioning-jobs/job_nope", "", 404},
		"retry a draft":        {"POST", "/api/provisioning-jobs/" + e.job(t, orgA, busy, job.StatusDraft).ID + "/retry", "", 409},
		"stale patch":          {"PATCH", "/api/provisioning-jobs/" + e.job(t, orgA, busy, job.StatusDraft).ID, `{"version":7,"name":"x"}`, 409},
		"token for nobody":     {"POST", "/api/tokens", `{"name":"ci","email":"ghost@example.com"}`, 404},
		"duplicate user":       {"POST", "/api/users", `{"email":"viewer@org_a.example.com"}`, 409},
		"bad credentials":      {"POST", "/api/cloud-accounts", `{"name":"a","provider":"aws","authMethod":"static_keys","credentials":{"accessKeyId":"x"}}`, 400},
		"system role deletion": {"DELETE", "/api/roles/role_admin", "", 409},

		"database on an unfinished datastore": {"POST", pending + "/databases", `{"name":"shop","owner":"shop_owner"}`, 409},
		"database on another family's job":    {"POST", other + "/databases", `{"name":"shop","owner":"shop_owner"}`, 404},
		"connection on an unfinished store":   {"POST", pending + "/connections", "", 409},
		"missing database":                    {"DELETE", pending + "/databases/db_nope", "", 404},
		"rotate an unfinished datastore":      {"POST", pending + "/rotate-credentials", `{"target":"admin"}`, 409},
		"rotate another family's job":         {"POST", other + "/rotate-credentials", `{"target":"admin"}`, 404},
		"rotate an unknown connection":        {"POST", pending + "/rotate-credentials", `{"connection":"nope"}`, 400},
		"missing connection":                  {"DELETE", pending + "/connections/conn_nope", "", 404},
		"reveal an unknown reference":         {"POST", "/api/secrets/reveal", `{"ref":"local:sec_nope"}`, 404},
		"reveal a value the store lost":       {"POST", "/api/secrets/reveal", `{"ref":"` + lostRef + `"}`, 404},
		"reveal a malformed reference":        {"POST", "/api/secrets/reveal", `{"ref":"nope"}`, 400},
		"install an unknown component":        {"POST", "/api/provisioning-jobs/install-component", `{"spaceID":"` + cluster + `","componentID":"nope"}`, 400},
		"install values off the schema": {"POST", "/api/provisioning-jobs/install-component",
			`{"spaceID":"` + cluster + `","componentID":"ingress-nginx","values":{"controller":{"replicaCount":0}}}`, 400},
		"install where no cluster is": {"POST", "/api/provisioning-jobs/install-component", `{"spaceID":"` + bare + `","componentID":"ingress-nginx"}`, 400},
		"cluster refuses the token": {"POST", "/api/spaces/register-cluster",
			`{"name":"c","cluster":` + e.cluster.json("wrong") + `}`, 400},
		"cluster does not answer": {"POST", "/api/spaces/register-cluster",
			`{"name":"c","cluster":{"endpoint":"` + gone.URL + `","caData":` + strconv.Quote(e.cluster.caPEM) + `,"token":"t"}}`, 422},
	}
	for name, c := range cases {
		before := e.auditTotal(t, orgA)
		got := e.call(t, admin, c.method, c.path, c.body)
		if got.status != c.status {
			t.Errorf("%s: status %d, want %d (%s)", name, got.status, c.status, got.raw)
		}
		if n := e.auditTotal(t, orgA) - before; n != 0 {
			t.Errorf("%s: %d audit entries after a failed mutation", name, n)
		}
	}
}

// No list answers another org's objects: with one of every kind made in org_b, org_a's admin
// lists everything and finds no trace of org_b (every object carries its org or an org_b email).
func TestListsStayInOrg(t *testing.T) {
	t.Parallel()
	e := newAccessEnv(t)
	fx := fixtures()
	bAdmin := e.tokens[orgB+"/admin"]
	for _, rt := range e.srv.allRoutes() {
		key := rt.method + " " + rt.path
		if f, ok := fx[key]; ok && f.crossOrg {
			// A subtest, so that a fixture needing a server that is not installed skips alone.
			t.Run("make "+key, func(t *testing.T) {
				tg := f.make(t, e, orgB)
				// Mutations run too, as org_b's admin, so that org_b has audit entries, tokens,
				// databases and connections.
				if got := e.call(t, bAdmin, rt.method, tg.path, tg.body); got.status != f.ok {
					t.Errorf("%s as org_b's admin: %d, want %d (%s)", key, got.status, f.ok, got.raw)
				}
			})
		}
	}
	lists, seenB := 0, 0
	for _, rt := range e.srv.allRoutes() {
		if rt.method != http.MethodGet || strings.Contains(rt.path, "{") {
			continue
		}
		lists++
		got := e.call(t, e.tokens[orgA+"/admin"], "GET", rt.path, "")
		if got.status != 200 || strings.Contains(got.raw, orgB) {
			t.Errorf("GET %s as org_a: %d, mentions org_b: %v", rt.path, got.status, strings.Contains(got.raw, orgB))
		}
		if strings.Contains(e.call(t, bAdmin, "GET", rt.path, "").raw, orgB) {
			seenB++
		}
	}
	// The check means something only if org_b's own lists do show org_b's objects.
	if lists < 10 || seenB < 7 {
		t.Fatalf("%d list routes checked, %d of them show org_b to org_b", lists, seenB)
	}
}
