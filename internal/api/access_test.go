package api

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/audit"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/rbac"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
)

// Tokens: created over the API, shown once, usable until revoked or expired; the secret is
// nowhere on disk afterwards, not in the database, its WAL or the secret store.
func TestTokenLifecycle(t *testing.T) {
	t.Parallel()
	e := newAccessEnv(t)
	admin := e.tokens[orgA+"/admin"]
	e.user(t, orgA, "ci@example.com", rbac.RoleViewer, "")
	created := e.call(t, admin, "POST", "/api/tokens", `{"name":"ci","email":"ci@example.com","expiresIn":"1h"}`)
	if created.status != 201 {
		t.Fatalf("create token: %d %s", created.status, created.raw)
	}
	secret, _ := created.body["secret"].(string)
	id, _ := created.body["id"].(string)
	if !strings.HasPrefix(secret, "gw_") || len(secret) < 40 {
		t.Fatalf("secret %q", secret)
	}
	if got := e.call(t, secret, "GET", "/api/spaces", ""); got.status != 200 {
		t.Fatalf("fresh token: %d %s", got.status, got.raw)
	}
	if got := e.call(t, secret, "POST", "/api/spaces", `{"name":"s","provider":"local","region":"local"}`); got.status != 403 {
		t.Fatalf("viewer token creates a space: %d", got.status)
	}
	list := e.call(t, admin, "GET", "/api/tokens?email=ci@example.com", "")
	if list.status != 200 || strings.Contains(list.raw, secret) || strings.Contains(list.raw, "secret") || !strings.Contains(list.raw, id) {
		t.Fatalf("token list: %s", list.raw)
	}
	if got := e.call(t, admin, "DELETE", "/api/tokens/"+id, ""); got.status != 204 {
		t.Fatalf("revoke: %d %s", got.status, got.raw)
	}
	if got := e.call(t, secret, "GET", "/api/spaces", ""); got.status != 401 {
		t.Fatalf("revoked token: %d", got.status)
	}
	// Revoking again changes nothing and records nothing.
	before := e.auditTotal(t, orgA)
	if got := e.call(t, admin, "DELETE", "/api/tokens/"+id, ""); got.status != 204 || e.auditTotal(t, orgA) != before {
		t.Fatalf("second revoke: %d, entries %d → %d", got.status, before, e.auditTotal(t, orgA))
	}
	past := time.Now().Add(-time.Second)
	expired := e.token(t, orgA, "ci@example.com", &past)
	if got := e.call(t, expired, "GET", "/api/spaces", ""); got.status != 401 {
		t.Fatalf("expired token: %d", got.status)
	}
	// A deleted user's tokens stop at once.
	other := e.call(t, admin, "POST", "/api/tokens", `{"name":"ci2","email":"ci@example.com"}`)
	sec2, _ := other.body["secret"].(string)
	if got := e.call(t, admin, "DELETE", "/api/users/ci@example.com", ""); got.status != 204 {
		t.Fatalf("delete user: %d", got.status)
	}
	if got := e.call(t, sec2, "GET", "/api/spaces", ""); got.status != 401 {
		t.Fatalf("deleted user's token: %d", got.status)
	}
	if got := e.call(t, "gw_not-a-token", "GET", "/api/spaces", ""); got.status != 401 {
		t.Fatalf("unknown token: %d", got.status)
	}
	for _, s := range []string{secret, sec2, strings.TrimPrefix(secret, "gw_")} {
		assertNowhereOnDisk(t, e.dir, s)
	}
}

// assertNowhereOnDisk reads every file under dir (the SQLite file, its WAL and shared memory,
// the secret store) and fails if needle appears in any.
func assertNowhereOnDisk(t *testing.T, dir, needle string) {
	t.Helper()
	files := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		if bytes.Contains(b, []byte(needle)) {
			t.Errorf("%s holds the token secret", path)
		}
		return nil
	})
	if err != nil || files == 0 {
		t.Fatalf("scan %s: %d files, %v", dir, files, err)
	}
}

// Credentials given with a cloud account go to the secret store; the account, its answers and
// the database hold a reference only. Provisioning on a read-only account is refused with the
// policy to grant.
func TestCloudAccountCredentialsAndReadOnly(t *testing.T) {
	t.Parallel()
	e := newAccessEnv(t)
	admin := e.tokens[orgA+"/admin"]
	const secretKey = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
	acc := e.call(t, admin, "POST", "/api/cloud-accounts", `{"name":"prod","provider":"aws","region":"eu-west-1",
		"authMethod":"static_keys","permissionLevel":"read_only","credentials":{"accessKeyId":"AKIAEXAMPLE","secretAccessKey":"`+secretKey+`"}}`)
	if acc.status != 201 || strings.Contains(acc.raw, secretKey) || strings.Contains(acc.raw, "AKIAEXAMPLE") {
		t.Fatalf("create account: %d %s", acc.status, acc.raw)
	}
	ref, _ := acc.body["credentialsRef"].(string)
	if !secrets.IsRef(ref) {
		t.Fatalf("credentialsRef %q", ref)
	}
	if got := e.call(t, admin, "GET", "/api/cloud-accounts/"+acc.body["id"].(string), ""); strings.Contains(got.raw, secretKey) {
		t.Fatalf("get echoes the secret: %s", got.raw)
	}
	accSecrets := func(id string) secrets.SecretStore {
		return e.srv.cfg.Secrets.For(secrets.Owner{OrgID: orgA, Kind: secrets.OwnerAccount, ID: id})
	}
	val, err := accSecrets(acc.body["id"].(string)).Get(context.Background(), ref)
	if err != nil || !strings.Contains(val, secretKey) {
		t.Fatalf("secret store: %q %v", val, err)
	}
	assertNowhereOnDisk(t, e.dir, secretKey) // the local store seals it
	sp := e.call(t, admin, "POST", "/api/spaces", `{"name":"prod","provider":"aws","region":"eu-west-1","cloudAccountID":"`+acc.body["id"].(string)+`"}`)
	if sp.status != 201 {
		t.Fatalf("space: %d %s", sp.status, sp.raw)
	}
	before := e.auditTotal(t, orgA)
	job := e.call(t, admin, "POST", "/api/provisioning-jobs", `{"spaceID":"`+sp.body["id"].(string)+`","kind":"test"}`)
	if job.status != 403 || !strings.Contains(job.raw, "read_only") {
		t.Fatalf("job on a read-only account: %d %s", job.status, job.raw)
	}
	hint, _ := job.body["fixHint"].(string)
	i := strings.Index(hint, "{")
	var doc struct {
		Version   string
		Statement []struct{ Effect string }
	}
	if i < 0 || json.Unmarshal([]byte(hint[i:]), &doc) != nil || doc.Version != "2012-10-17" || doc.Statement[0].Effect != "Allow" {
		t.Fatalf("fixHint holds no IAM policy document: %q", hint)
	}
	if e.auditTotal(t, orgA) != before {
		t.Fatal("refused job left an audit entry")
	}
	accID := acc.body["id"].(string)
	up := e.call(t, admin, "GET", "/api/cloud-accounts/"+accID+"/upgrade-policy", "")
	var upDoc struct {
		Policy struct{ Version string }
	}
	if up.status != 200 || json.Unmarshal([]byte(up.raw), &upDoc) != nil || upDoc.Policy.Version != "2012-10-17" {
		t.Fatalf("upgrade policy: %d %s", up.status, up.raw)
	}
	if got := e.call(t, admin, "PATCH", "/api/cloud-accounts/"+accID, `{"permissionLevel":"read_write"}`); got.status != 200 || got.body["permissionLevel"] != "read_write" {
		t.Fatalf("upgrade: %d %s", got.status, got.raw)
	}
	if got := e.call(t, admin, "POST", "/api/provisioning-jobs", `{"spaceID":"`+sp.body["id"].(string)+`","kind":"test","draft":true}`); got.status != 201 {
		t.Fatalf("job after the upgrade: %d %s", got.status, got.raw)
	}
	before = e.auditTotal(t, orgA)
	if got := e.call(t, admin, "DELETE", "/api/cloud-accounts/"+accID, ""); got.status != 409 || e.auditTotal(t, orgA) != before {
		t.Fatalf("delete an account in use: %d %s", got.status, got.raw)
	}
	spare := e.call(t, admin, "POST", "/api/cloud-accounts", `{"name":"spare","provider":"gcp","authMethod":"service_account","credentials":{"serviceAccountKey":"{\"type\":\"service_account\",\"client_email\":\"gw@p.iam.gserviceaccount.com\",\"private_key\":\"k\"}"}}`)
	spareRef, _ := spare.body["credentialsRef"].(string)
	if got := e.call(t, admin, "DELETE", "/api/cloud-accounts/"+spare.body["id"].(string), ""); got.status != 204 {
		t.Fatalf("delete spare: %d %s", got.status, got.raw)
	}
	if _, err := accSecrets(spare.body["id"].(string)).Get(context.Background(), spareRef); err == nil {
		t.Fatal("a deleted account's stored credentials survive")
	}
	cases := map[string]struct {
		body, field string
	}{
		"gcp wrong method":            {`{"name":"g","provider":"gcp","authMethod":"static_keys"}`, "authMethod"},
		"gcp sa without key":          {`{"name":"g","provider":"gcp","authMethod":"service_account"}`, "credentials.serviceAccountKey"},
		"gcp sa key not a key":        {`{"name":"g","provider":"gcp","authMethod":"service_account","credentials":{"serviceAccountKey":"{\"k\":1}"}}`, "credentials.serviceAccountKey"},
		"gcp impersonation no target": {`{"name":"g","provider":"gcp","authMethod":"impersonation","config":{"projectId":"p"}}`, "config.targetServiceAccount"},
		"gcp impersonation bad key":   {`{"name":"g","provider":"gcp","authMethod":"impersonation","credentials":{"serviceAccountKey":"nope"},"config":{"targetServiceAccount":"gw@p.iam.gserviceaccount.com"}}`, "credentials.serviceAccountKey"},
		"gcp none no endpoints":       {`{"name":"g","provider":"gcp","authMethod":"none","config":{"projectId":"p"}}`, "config.endpoints"},
		"gcp endpoint not a url":      {`{"name":"g","provider":"gcp","authMethod":"none","config":{"endpoints":{"compute.googleapis.com":"nope"}}}`, "config.endpoints.compute.googleapis.com"},
		"gcp endpoint not google":     {`{"name":"g","provider":"gcp","authMethod":"none","config":{"endpoints":{"example.com":"http://127.0.0.1:1/"}}}`, "config.endpoints.example.com"},
		"gcp secretManager string":    {`{"name":"g","provider":"gcp","authMethod":"service_account","credentials":{"serviceAccountKey":"{\"type\":\"service_account\",\"client_email\":\"gw@p.iam.gserviceaccount.com\",\"private_key\":\"k\"}"},"config":{"projectId":"p","secretManager":"yes"}}`, "config.secretManager"},
		"gcp endpoint metadata":       {`{"name":"g","provider":"gcp","authMethod":"none","config":{"endpoints":{"compute.googleapis.com":"http://169.254.169.254/"}}}`, "config.endpoints.compute.googleapis.com"},
		"azure sp without secret":     {`{"name":"z","provider":"azure","authMethod":"service_principal","credentials":{"tenantId":"t","clientId":"c"}}`, "credentials.clientSecret"},
		"azure sp secret and cert":    {`{"name":"z","provider":"azure","authMethod":"service_principal","credentials":{"tenantId":"t","clientId":"c","clientSecret":"s","clientCertificate":"pem"}}`, "credentials.clientSecret"},
		"azure none no endpoint":      {`{"name":"z","provider":"azure","authMethod":"none","config":{"subscriptionId":"s"}}`, "config.endpoint"},
		"azure endpoint metadata":     {`{"name":"z","provider":"azure","authMethod":"none","config":{"endpoint":"http://169.254.169.254/"}}`, "config.endpoint"},
		"aws temp without token":      {`{"name":"a","provider":"aws","authMethod":"temporary_credentials","credentials":{"accessKeyId":"a","secretAccessKey":"b"}}`, "credentials.sessionToken"},
		"aws assume without arn":      {`{"name":"a","provider":"aws","authMethod":"assume_role"}`, "credentials.roleArn"},
		"unknown credential":          {`{"name":"a","provider":"aws","authMethod":"static_keys","credentials":{"accessKeyId":"a","secretAccessKey":"b","password":"x"}}`, "credentials.password"},
		"bad level":                   {`{"name":"l","provider":"local","permissionLevel":"admin"}`, "permissionLevel"},
		"ref and credentials":         {`{"name":"a","provider":"aws","authMethod":"static_keys","credentialsRef":"local:sec_1","credentials":{"accessKeyId":"a","secretAccessKey":"b"}}`, "credentialsRef"},
		"a reference alone":           {`{"name":"a","provider":"aws","authMethod":"static_keys","credentialsRef":"local:sec_1"}`, "credentialsRef"},
		"managed flag sent":           {`{"name":"a","provider":"local","config":{"managedCredentials":true}}`, "config.managedCredentials"},
	}
	for name, c := range cases {
		got := e.call(t, admin, "POST", "/api/cloud-accounts", c.body)
		if got.status != 400 || !strings.Contains(got.raw, `"field":"`+c.field+`"`) {
			t.Errorf("%s: %d %s", name, got.status, got.raw)
		}
	}
	cert := e.call(t, admin, "POST", "/api/cloud-accounts", `{"name":"z","provider":"azure","authMethod":"service_principal","credentials":{"tenantId":"t1","clientId":"c1","clientCertificate":"-----BEGIN CERTIFICATE-----"}}`)
	if cert.status != 201 || strings.Contains(cert.raw, "BEGIN CERTIFICATE") {
		t.Fatalf("azure service principal with a certificate: %d %s", cert.status, cert.raw)
	}
	imp := e.call(t, admin, "POST", "/api/cloud-accounts", `{"name":"g","provider":"gcp","authMethod":"impersonation","config":{"projectId":"p","targetServiceAccount":"gw@p.iam.gserviceaccount.com"}}`)
	if imp.status != 201 || !strings.Contains(imp.raw, `"targetServiceAccount":"gw@p.iam.gserviceaccount.com"`) {
		t.Fatalf("gcp impersonation on the server's own credential: %d %s", imp.status, imp.raw)
	}
	wif := e.call(t, admin, "POST", "/api/cloud-accounts", `{"name":"z","provider":"azure","authMethod":"workload_identity_federation","credentials":{"tenantId":"t1","clientId":"c1"}}`)
	if wif.status != 201 || !strings.Contains(wif.raw, `"tenantId":"t1"`) {
		t.Fatalf("azure workload identity: %d %s", wif.status, wif.raw)
	}
}

// Assignments scoped to one space or to a team reach that space and its jobs, nothing else;
// lists show only what may be viewed.
func TestScopedAssignments(t *testing.T) {
	t.Parallel()
	e := newAccessEnv(t)
	mine, theirs, teamSpace := e.space(t, orgA), e.space(t, orgA), e.space(t, orgA)
	team := e.team(t, orgA, []string{teamSpace})
	e.user(t, orgA, "dev@example.com", rbac.RoleEditor, "space:"+mine)
	e.assign(t, orgA, "dev@example.com", rbac.RoleViewer, "team:"+team)
	// A grant of the audit log on one space does not open the org's whole log.
	if err := e.st.CreateRole(context.Background(), &rbac.Role{ID: "role_aud", OrgID: orgA, Name: "aud",
		Policies: []string{"audit-log:view"}, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	e.assign(t, orgA, "dev@example.com", "role_aud", "space:"+mine)
	tok := e.token(t, orgA, "dev@example.com", nil)
	theirJob := e.job(t, orgA, theirs, job.StatusDraft)
	teamJob := e.job(t, orgA, teamSpace, job.StatusDraft)
	cases := map[string]struct {
		method, path, body string
		status             int
	}{
		"get own space":             {"GET", "/api/spaces/" + mine, "", 200},
		"get team space":            {"GET", "/api/spaces/" + teamSpace, "", 200},
		"get other space":           {"GET", "/api/spaces/" + theirs, "", 403},
		"get other org's space":     {"GET", "/api/spaces/" + e.space(t, orgB), "", 404},
		"create job in own space":   {"POST", "/api/provisioning-jobs", `{"spaceID":"` + mine + `","kind":"test","draft":true}`, 201},
		"create job in team space":  {"POST", "/api/provisioning-jobs", `{"spaceID":"` + teamSpace + `","kind":"test","draft":true}`, 403},
		"create job in other space": {"POST", "/api/provisioning-jobs", `{"spaceID":"` + theirs + `","kind":"test","draft":true}`, 403},
		"view team job":             {"GET", "/api/provisioning-jobs/" + teamJob.ID, "", 200},
		"cancel team job":           {"DELETE", "/api/provisioning-jobs/" + teamJob.ID, "", 403},
		"view other job":            {"GET", "/api/provisioning-jobs/" + theirJob.ID, "", 403},
		"delete own space":          {"DELETE", "/api/spaces/" + e.space(t, orgA), "", 403},
		"create a space":            {"POST", "/api/spaces", `{"name":"s","provider":"local","region":"local"}`, 403},
		"list cloud accounts":       {"GET", "/api/cloud-accounts", "", 200},
		"list catalog":              {"GET", "/api/catalog/types", "", 200},
		"read the audit log":        {"GET", "/api/audit-logs", "", 403},
	}
	for name, c := range cases {
		if got := e.call(t, tok, c.method, c.path, c.body); got.status != c.status {
			t.Errorf("%s: %d, want %d (%s)", name, got.status, c.status, got.raw)
		}
	}
	list := e.call(t, tok, "GET", "/api/spaces", "")
	if n := len(list.body["data"].([]any)); n != 2 || !strings.Contains(list.raw, mine) || !strings.Contains(list.raw, teamSpace) {
		t.Fatalf("spaces listed: %s", list.raw)
	}
	jobs := e.call(t, tok, "GET", "/api/provisioning-jobs", "")
	if strings.Contains(jobs.raw, theirJob.ID) || !strings.Contains(jobs.raw, teamJob.ID) {
		t.Fatalf("jobs listed: %s", jobs.raw)
	}
	perms := e.call(t, e.tokens[orgA+"/admin"], "GET", "/api/users/dev@example.com/permissions", "")
	var ep EffectivePermissions
	if err := json.Unmarshal([]byte(perms.raw), &ep); err != nil || len(ep.OrgWide) != 0 ||
		!contains(ep.Scoped["space:"+mine], "provisioning:delete") || !contains(ep.Scoped["team:"+team], "space:view") ||
		contains(ep.Scoped["team:"+team], "space:delete") {
		t.Fatalf("effective permissions: %s", perms.raw)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// A custom role grants exactly its policies, write expanding to create, update and delete.
func TestCustomRole(t *testing.T) {
	t.Parallel()
	e := newAccessEnv(t)
	admin := e.tokens[orgA+"/admin"]
	role := e.call(t, admin, "POST", "/api/roles", `{"name":"auditor","policies":["audit-log:view","space:write"]}`)
	if role.status != 201 {
		t.Fatalf("role: %d %s", role.status, role.raw)
	}
	if got := e.call(t, admin, "POST", "/api/users", `{"email":"aud@example.com","roleID":"`+role.body["id"].(string)+`"}`); got.status != 201 {
		t.Fatalf("user: %d %s", got.status, got.raw)
	}
	tok := e.token(t, orgA, "aud@example.com", nil)
	for path, want := range map[string]int{"/api/audit-logs": 200, "/api/spaces": 403, "/api/tokens": 403} {
		if got := e.call(t, tok, "GET", path, ""); got.status != want {
			t.Errorf("GET %s: %d, want %d", path, got.status, want)
		}
	}
	if got := e.call(t, tok, "POST", "/api/spaces", `{"name":"s","provider":"local","region":"local"}`); got.status != 201 {
		t.Errorf("space:write does not create: %d", got.status)
	}
	if got := e.call(t, admin, "DELETE", "/api/roles/"+role.body["id"].(string), ""); got.status != 409 {
		t.Errorf("delete an assigned role: %d", got.status)
	}
}

// GET /audit-logs filters, pages and exports; no route and no store method changes an entry.
func TestAuditLogAPI(t *testing.T) {
	t.Parallel()
	e := newAccessEnv(t)
	admin := e.tokens[orgA+"/admin"]
	for i := 0; i < 5; i++ {
		if got := e.call(t, admin, "POST", "/api/spaces", `{"name":"s","provider":"local","region":"local"}`); got.status != 201 {
			t.Fatal(got.raw)
		}
	}
	e.call(t, e.tokens[orgA+"/editor"], "POST", "/api/spaces", `{"name":"e","provider":"local","region":"local"}`)
	e.call(t, e.tokens[orgB+"/admin"], "POST", "/api/spaces", `{"name":"b","provider":"local","region":"local"}`)
	e.call(t, admin, "GET", "/api/spaces", "") // a read: never logged
	page := func(q string) AuditPage {
		got := e.call(t, admin, "GET", "/api/audit-logs"+q, "")
		var p AuditPage
		if got.status != 200 || json.Unmarshal([]byte(got.raw), &p) != nil {
			t.Fatalf("%s: %d %s", q, got.status, got.raw)
		}
		return p
	}
	if p := page(""); p.Total != 6 || p.Limit != 50 || p.Page != 1 {
		t.Fatalf("all: %+v", p)
	}
	if p := page("?actor=editor@org_a.example.com"); p.Total != 1 || p.Data[0].Action != "space.create" || p.Data[0].Scope != audit.ScopeProvisioning {
		t.Fatalf("by actor: %+v", p)
	}
	if p := page("?scope=platform,cost"); p.Total != 0 {
		t.Fatalf("by scope: %+v", p)
	}
	if p := page("?limit=2&page=3"); len(p.Data) != 2 || p.Total != 6 {
		t.Fatalf("paging: %+v", p)
	}
	if p := page("?resourceType=space&from=" + time.Now().Add(time.Hour).UTC().Format(time.RFC3339)); p.Total != 0 {
		t.Fatalf("from the future: %+v", p)
	}
	for _, bad := range []string{"?limit=201", "?page=0", "?scope=nope", "?from=yesterday", "?format=xml"} {
		if got := e.call(t, admin, "GET", "/api/audit-logs"+bad, ""); got.status != 400 {
			t.Errorf("%s: %d", bad, got.status)
		}
	}
	csvOut := e.call(t, admin, "GET", "/api/audit-logs?format=csv&limit=1", "")
	rows, err := csv.NewReader(strings.NewReader(csvOut.raw)).ReadAll()
	if err != nil || len(rows) != 7 || rows[0][0] != "id" || rows[1][3] != "admin@org_a.example.com" && rows[1][3] != "editor@org_a.example.com" {
		t.Fatalf("csv export (%v): %q", err, csvOut.raw)
	}
	nd := e.call(t, admin, "GET", "/api/audit-logs?format=ndjson", "")
	lines := strings.Split(strings.TrimSpace(nd.raw), "\n")
	var first audit.Entry
	if len(lines) != 6 || json.Unmarshal([]byte(lines[0]), &first) != nil || first.ResourceType != "space" {
		t.Fatalf("ndjson export: %q", nd.raw)
	}
	for _, m := range []string{"PUT", "PATCH", "DELETE", "POST"} {
		if got := e.call(t, admin, m, "/api/audit-logs", "{}"); got.status != 404 && got.status != 405 {
			t.Errorf("%s /api/audit-logs: %d", m, got.status)
		}
	}
	for _, rt := range e.srv.routes() {
		if strings.HasPrefix(rt.path, "/api/audit-logs") && rt.method != "GET" {
			t.Errorf("route %s %s changes the audit log", rt.method, rt.path)
		}
	}
	changes := regexp.MustCompile(`(?i)^(update|delete|remove|purge|truncate|set|edit|put|prune|expire).*audit|audit.*(update|delete|remove|purge|prune)`)
	st := reflect.TypeOf((*store.Store)(nil)).Elem()
	for i := 0; i < st.NumMethod(); i++ {
		if m := st.Method(i).Name; changes.MatchString(m) {
			t.Errorf("store.Store.%s can change the audit log", m)
		}
	}
}

// An Editor may not point an AWS account at the metadata service: the SDK would send signed
// requests there. The create is refused on the field, before anything is stored.
func TestCloudAccountEndpointRefusedByOutboundPolicy(t *testing.T) {
	t.Parallel()
	e := newAccessEnv(t)
	editor := e.tokens[orgA+"/editor"]
	for _, endpoint := range []string{"http://169.254.169.254/", "http://[fd00:ec2::254]/", "file:///etc/passwd"} {
		got := e.call(t, editor, "POST", "/api/cloud-accounts", `{"name":"meta","provider":"aws","region":"eu-west-1",
			"config":{"endpoint":"`+endpoint+`"}}`)
		if got.status != 400 || !strings.Contains(got.raw, "config.endpoint") {
			t.Errorf("account with endpoint %s: %d %s; want 400 naming config.endpoint", endpoint, got.status, got.raw)
		}
	}
	if got := e.call(t, editor, "POST", "/api/cloud-accounts", `{"name":"moto","provider":"aws","region":"eu-west-1",
		"config":{"endpoint":"http://127.0.0.1:5000"}}`); got.status != 201 {
		t.Errorf("account with a loopback endpoint under the default policy: %d %s", got.status, got.raw)
	}
}
