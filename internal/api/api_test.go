package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/api"
	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/engine"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
	"github.com/groundworkhq/groundwork/internal/store/sqlite"
)

const token = "test-token"

type bundle struct {
	url   string
	fail  atomic.Bool
	block chan struct{}
}

func setup(t *testing.T) *bundle {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b := &bundle{}
	pipe := &testfamily.Pipeline{N: 3, Hook: func(ctx context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error) {
		if c.Step == "step2" && !c.Undo && b.fail.Load() {
			return pipeline.Result{}, fault.UserAction(fmt.Errorf("quota exceeded"), "LimitExceeded", "raise the quota", "https://console.example/quotas")
		}
		if c.Step == "step3" && !c.Undo && b.block != nil {
			<-b.block
		}
		return pipeline.Done(map[string]any{c.Step: "done"}), nil
	}}
	reg, _ := pipeline.NewRegistry(pipe)
	cat, err := catalog.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	hub := api.NewHub()
	eng, _ := engine.New(engine.Config{Store: st, Pipelines: reg, Owner: "api-test", PollInterval: 20 * time.Millisecond, Events: hub})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { eng.Run(ctx); close(done) }() //nolint:errcheck
	t.Cleanup(func() { cancel(); <-done })
	srv := httptest.NewServer(api.New(api.Config{Store: st, Pipelines: reg, Catalog: cat, Hub: hub,
		Auth: api.StaticToken{Token: token, OrgID: "org1", Actor: "admin"}}))
	t.Cleanup(srv.Close)
	b.url = srv.URL
	return b
}

type answer struct {
	status int
	body   map[string]any
	raw    string
	header http.Header
}

func (b *bundle) call(t *testing.T, method, path, body string, hdr ...string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, b.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, raw: string(raw), header: resp.Header}
	_ = json.Unmarshal(raw, &a.body)
	return a
}

func (b *bundle) space(t *testing.T) string {
	t.Helper()
	a := b.call(t, "POST", "/api/spaces", `{"name":"dev","provider":"local","region":"local"}`)
	if a.status != 201 {
		t.Fatalf("create space: %d %s", a.status, a.raw)
	}
	return a.body["id"].(string)
}

func (b *bundle) waitStatus(t *testing.T, id, want string) answer {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		a := b.call(t, "GET", "/api/provisioning-jobs/"+id, "")
		if a.body["status"] == want {
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is %v, want %s", id, a.body["status"], want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func fieldNamed(a answer, field string) bool {
	errs, _ := a.body["errors"].([]any)
	for _, e := range errs {
		if m, _ := e.(map[string]any); m["field"] == field {
			return true
		}
	}
	return false
}

func TestAuthRequired(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, h := range []string{"", "Bearer", "Bearer wrong", "Basic dGVzdA=="} {
		req, _ := http.NewRequest("GET", b.url+"/api/provisioning-jobs", nil)
		if h != "" {
			req.Header.Set("Authorization", h)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("Authorization %q: %d %s", h, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(b.url + p)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v %v", p, err, resp.StatusCode)
		}
		resp.Body.Close()
	}
}

// Bad input is a 4xx problem naming the field, never a 500.
func TestCreateJobBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sp := b.space(t)
	cases := map[string]struct {
		body   string
		status int
		field  string
	}{
		"malformed":         {`{"spaceID": `, 400, ""},
		"empty":             {``, 400, ""},
		"not an object":     {`[1,2]`, 400, "(body)"},
		"unknown field":     {`{"spaceID":"` + sp + `","kind":"test","colour":"red"}`, 400, "colour"},
		"wrong type":        {`{"spaceID":"` + sp + `","kind":"test","draft":"yes"}`, 400, "draft"},
		"unknown kind":      {`{"spaceID":"` + sp + `","kind":"spaceship"}`, 400, "kind"},
		"missing kind":      {`{"spaceID":"` + sp + `"}`, 400, "kind"},
		"missing space":     {`{"kind":"test"}`, 400, "spaceID"},
		"no such space":     {`{"spaceID":"spc_nope","kind":"test"}`, 404, "spaceID"},
		"bad mode":          {`{"spaceID":"` + sp + `","kind":"test","mode":"borrow"}`, 400, "mode"},
		"config not object": {`{"spaceID":"` + sp + `","kind":"test","config":[1]}`, 400, "config"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a := b.call(t, "POST", "/api/provisioning-jobs", tc.body)
			if a.status != tc.status || a.header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("status %d (%s), want %d", a.status, a.raw, tc.status)
			}
			if tc.field != "" && !fieldNamed(a, tc.field) {
				t.Fatalf("no error names %q: %s", tc.field, a.raw)
			}
		})
	}
}

func TestJobLifecycleOverAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sp := b.space(t)
	a := b.call(t, "POST", "/api/provisioning-jobs", `{"spaceID":"`+sp+`","kind":"test","name":"db","config":{}}`)
	if a.status != 201 || a.header.Get("Location") == "" {
		t.Fatalf("create: %d %s", a.status, a.raw)
	}
	id := a.body["id"].(string)
	for _, k := range []string{"id", "kind", "provider", "spaceID", "mode", "status", "phase", "config", "infra", "steps", "createdAt", "updatedAt", "version"} {
		if _, ok := a.body[k]; !ok {
			t.Errorf("job answer lacks %q", k)
		}
	}
	done := b.waitStatus(t, id, "completed")
	steps := done.body["steps"].([]any)
	if len(steps) != 3 || steps[2].(map[string]any)["status"] != "done" {
		t.Fatalf("steps: %v", steps)
	}
	// DELETE of a completed job tears it down.
	if d := b.call(t, "DELETE", "/api/provisioning-jobs/"+id, ""); d.status != 202 {
		t.Fatalf("delete: %d %s", d.status, d.raw)
	}
	b.waitStatus(t, id, "deleted")
	if r := b.call(t, "POST", "/api/provisioning-jobs/"+id+"/retry", ""); r.status != 409 {
		t.Fatalf("retry of a deleted job: %d", r.status)
	}
	if g := b.call(t, "GET", "/api/provisioning-jobs/job_nope", ""); g.status != 404 {
		t.Fatalf("missing job: %d", g.status)
	}
}

func TestFailureAndRetry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fail.Store(true)
	sp := b.space(t)
	id := b.call(t, "POST", "/api/provisioning-jobs", `{"spaceID":"`+sp+`","kind":"test"}`).body["id"].(string)
	failed := b.waitStatus(t, id, "failed")
	f := failed.body["failure"].(map[string]any)
	if f["class"] != "user_action" || f["fixHint"] != "raise the quota" || f["consoleUrl"] != "https://console.example/quotas" || f["code"] != "LimitExceeded" {
		t.Fatalf("failure: %v", f)
	}
	b.fail.Store(false)
	if r := b.call(t, "POST", "/api/provisioning-jobs/"+id+"/retry", ""); r.status != 202 {
		t.Fatalf("retry: %d %s", r.status, r.raw)
	}
	done := b.waitStatus(t, id, "completed")
	if done.body["failure"] != nil {
		t.Fatalf("failure not cleared: %v", done.body["failure"])
	}
}

func TestPatchVersioning(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sp := b.space(t)
	a := b.call(t, "POST", "/api/provisioning-jobs", `{"spaceID":"`+sp+`","kind":"test","draft":true}`)
	id, v := a.body["id"].(string), int(a.body["version"].(float64))
	if a.body["status"] != "draft" {
		t.Fatalf("draft: %v", a.body["status"])
	}
	// Without a version the change applies to the job as it is (the older clients' contract).
	if p := b.call(t, "PATCH", "/api/provisioning-jobs/"+id, `{"name":"x"}`); p.status != 200 || p.body["name"] != "x" || int(p.body["version"].(float64)) != v+1 {
		t.Fatalf("no version: %d %s", p.status, p.raw)
	}
	if s := b.call(t, "PATCH", "/api/provisioning-jobs/"+id, `{"name":"stale"}`, "If-Match", fmt.Sprintf(`"%d"`, v)); s.status != 409 {
		t.Fatalf("stale If-Match: %d %s", s.status, s.raw)
	}
	if s := b.call(t, "PATCH", "/api/provisioning-jobs/"+id, `{"name":"x"}`, "If-Match", `"abc"`); s.status != 400 || !fieldNamed(s, "If-Match") {
		t.Fatalf("bad If-Match: %d %s", s.status, s.raw)
	}
	v++
	p := b.call(t, "PATCH", "/api/provisioning-jobs/"+id, `{"name":"renamed","tags":{"team":"payments"}}`, "If-Match", fmt.Sprintf(`"%d"`, v))
	if p.status != 200 || p.body["name"] != "renamed" || p.body["tags"].(map[string]any)["team"] != "payments" {
		t.Fatalf("patch: %d %s", p.status, p.raw)
	}
	if s := b.call(t, "PATCH", "/api/provisioning-jobs/"+id, fmt.Sprintf(`{"version":%d,"name":"stale"}`, v)); s.status != 409 {
		t.Fatalf("stale version: %d %s", s.status, s.raw)
	}
	nv := int(p.body["version"].(float64))
	if q := b.call(t, "PATCH", "/api/provisioning-jobs/"+id, fmt.Sprintf(`{"version":%d,"status":"completed"}`, nv)); q.status != 409 {
		t.Fatalf("patch to completed: %d %s", q.status, q.raw)
	}
	if q := b.call(t, "PATCH", "/api/provisioning-jobs/"+id, fmt.Sprintf(`{"version":%d,"status":"queued"}`, nv)); q.status != 200 {
		t.Fatalf("promote: %d %s", q.status, q.raw)
	}
	b.waitStatus(t, id, "completed")
	if q := b.call(t, "PATCH", "/api/provisioning-jobs/"+id, `{"version":1,"vmOp":"attach_lb"}`); q.status != 409 && q.status != 400 {
		t.Fatalf("vmOp on a test job: %d %s", q.status, q.raw)
	}
	// The older clients' body, without a version: judged on its merits (a test job has no VM
	// operations), never refused for the missing version.
	if q := b.call(t, "PATCH", "/api/provisioning-jobs/"+id, `{"vmOp":"attach_lb"}`); q.status != 400 || !fieldNamed(q, "vmOp") {
		t.Fatalf("unversioned vmOp on a test job: %d %s", q.status, q.raw)
	}
}

// Unversioned PATCHes racing each other all land: each loses the compare-and-set at most a few
// times and is applied to a fresh read, never answered 409.
func TestUnversionedPatchesRace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sp := b.space(t)
	a := b.call(t, "POST", "/api/provisioning-jobs", `{"spaceID":"`+sp+`","kind":"test","draft":true}`)
	id, v := a.body["id"].(string), int(a.body["version"].(float64))
	const n = 4
	statuses := make(chan string, n)
	for i := range n {
		go func() {
			p := b.call(t, "PATCH", "/api/provisioning-jobs/"+id, fmt.Sprintf(`{"name":"racer-%d"}`, i))
			statuses <- fmt.Sprintf("%d %s", p.status, p.raw)
		}()
	}
	for range n {
		if s := <-statuses; !strings.HasPrefix(s, "200 ") {
			t.Errorf("unversioned patch: %s", s)
		}
	}
	if got := b.call(t, "GET", "/api/provisioning-jobs/"+id, ""); int(got.body["version"].(float64)) != v+n {
		t.Fatalf("version %v after %d patches from %d", got.body["version"], n, v)
	}
}

func TestListFiltersAndCursor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sp := b.space(t)
	for i := 0; i < 5; i++ {
		b.call(t, "POST", "/api/provisioning-jobs", `{"spaceID":"`+sp+`","kind":"test","draft":true}`)
	}
	seen := map[string]bool{}
	cursor := ""
	for pages := 0; pages < 10; pages++ {
		a := b.call(t, "GET", "/api/provisioning-jobs?limit=2&status=draft&kind=test&spaceID="+sp+"&cursor="+cursor, "")
		for _, j := range a.body["data"].([]any) {
			seen[j.(map[string]any)["id"].(string)] = true
		}
		next, _ := a.body["nextCursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(seen) != 5 {
		t.Fatalf("paged through %d jobs, want 5", len(seen))
	}
	if a := b.call(t, "GET", "/api/provisioning-jobs?status=bogus", ""); a.status != 400 || !fieldNamed(a, "status") {
		t.Fatalf("bad status filter: %d", a.status)
	}
	if a := b.call(t, "GET", "/api/provisioning-jobs?limit=0", ""); a.status != 400 || !fieldNamed(a, "limit") {
		t.Fatalf("bad limit: %d", a.status)
	}
}

func TestEventsStreamProgress(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.block = make(chan struct{})
	sp := b.space(t)
	id := b.call(t, "POST", "/api/provisioning-jobs", `{"spaceID":"`+sp+`","kind":"test"}`).body["id"].(string)
	req, _ := http.NewRequest("GET", b.url+"/api/provisioning-jobs/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("content type %s", resp.Header.Get("Content-Type"))
	}
	close(b.block)
	var statuses []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var j job.Job
		if err := json.Unmarshal([]byte(data), &j); err != nil {
			t.Fatal(err)
		}
		statuses = append(statuses, string(j.Status)+":"+string(j.Steps[2].Status))
	}
	if len(statuses) < 3 || statuses[len(statuses)-1] != "completed:done" {
		t.Fatalf("events: %v", statuses)
	}
}

func TestSpacesAndAccounts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if a := b.call(t, "POST", "/api/spaces", `{"name":"prod","provider":"aws","region":"eu-west-1"}`); a.status != 400 || !fieldNamed(a, "cloudAccountID") {
		t.Fatalf("aws space without account: %d %s", a.status, a.raw)
	}
	if a := b.call(t, "POST", "/api/spaces", `{"name":"x","provider":"mars","region":"r"}`); a.status != 400 || !fieldNamed(a, "provider") {
		t.Fatalf("bad provider: %d", a.status)
	}
	acc := b.call(t, "POST", "/api/cloud-accounts", `{"name":"prod","provider":"aws","region":"eu-west-1"}`)
	if acc.status != 201 {
		t.Fatalf("account: %d %s", acc.status, acc.raw)
	}
	sp := b.call(t, "POST", "/api/spaces", `{"name":"prod","provider":"aws","region":"eu-west-1","cloudAccountID":"`+acc.body["id"].(string)+`"}`)
	if sp.status != 201 || sp.body["spaceType"] != "kubernetes" {
		t.Fatalf("aws space: %d %s", sp.status, sp.raw)
	}
	id := sp.body["id"].(string)
	b.call(t, "POST", "/api/provisioning-jobs", `{"spaceID":"`+id+`","kind":"test","draft":true}`)
	if d := b.call(t, "DELETE", "/api/spaces/"+id, ""); d.status != 409 {
		t.Fatalf("delete space in use: %d", d.status)
	}
	if l := b.call(t, "GET", "/api/spaces", ""); len(l.body["data"].([]any)) != 1 {
		t.Fatalf("list spaces: %s", l.raw)
	}
	if g := b.call(t, "GET", "/api/spaces/spc_nope", ""); g.status != 404 {
		t.Fatalf("missing space: %d", g.status)
	}
	if u := b.call(t, "GET", "/api/nothing-here", ""); u.status != 404 {
		t.Fatalf("unknown endpoint: %d", u.status)
	}
}

// A job whose config breaks its catalog type is refused with the field named.
func TestCatalogValidationOnCreate(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cat, _ := catalog.Builtin()
	reg, _ := pipeline.NewRegistry(fakeFamily{job.FamilyKubernetes})
	srv := httptest.NewServer(api.New(api.Config{Store: st, Pipelines: reg, Catalog: cat, Auth: api.StaticToken{Token: token, OrgID: "org1"}}))
	defer srv.Close()
	b := &bundle{url: srv.URL}
	sp := b.space(t)
	a := b.call(t, "POST", "/api/provisioning-jobs", `{"spaceID":"`+sp+`","kind":"kubernetes","config":{"name":"c","version":"1.30","nodeGroups":[{"name":"d","instanceType":"m5.large","min":"two","max":6}]}}`)
	if a.status != 400 || !strings.Contains(a.raw, "nodeGroups[0].min") {
		t.Fatalf("invalid node group: %d %s", a.status, a.raw)
	}
	const groups = `"nodeGroups":[{"name":"d","instanceType":"m5.large","min":1,"max":2}]`
	if a := b.call(t, "POST", "/api/provisioning-jobs", `{"spaceID":"`+sp+`","kind":"kubernetes","config":{"name":"c","privateCluster":"true",`+groups+`}}`); a.status != 400 || !fieldNamed(a, "config.privateCluster") {
		t.Fatalf("privateCluster as a string: %d %s; want 400 naming config.privateCluster", a.status, a.raw)
	}
	a = b.call(t, "POST", "/api/provisioning-jobs", `{"spaceID":"`+sp+`","kind":"kubernetes","config":{"name":"c","privateCluster":true,`+groups+`}}`)
	if a.status != 201 {
		t.Fatalf("private cluster: %d %s", a.status, a.raw)
	}
	cfg, _ := a.body["config"].(map[string]any)
	if cfg["privateCluster"] != true {
		t.Fatalf("private cluster job's config %v; want privateCluster true", a.body["config"])
	}
}

type fakeFamily struct{ f job.Family }

func (f fakeFamily) Family() job.Family                       { return f.f }
func (f fakeFamily) LeaseTTL() time.Duration                  { return time.Minute }
func (f fakeFamily) Validate(context.Context, *job.Job) error { return nil }
func (f fakeFamily) Steps(*job.Job) []pipeline.Step           { return nil }

// A repeated or empty query parameter is refused naming it, on every route: handlers read one
// value and treat "" as absent, so the rest would be dropped without a word (schemathesis found
// "page=&page=x" and "limit=" answered 200).
func TestRepeatedOrEmptyQueryParameterRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct{ path, field string }{
		{"/api/audit-logs?page=&page=x", "page"},
		{"/api/provisioning-jobs?limit=1&limit=2", "limit"},
		{"/api/tokens?email=a@example.com&email=b@example.com", "email"},
		{"/api/provisioning-jobs?limit=", "limit"},
		{"/api/provisioning-jobs?status=", "status"},
		{"/api/audit-logs?page", "page"},
		{"/api/role-assignments?email=", "email"},
	} {
		a := b.call(t, "GET", tc.path, "")
		if a.status != 400 || !fieldNamed(a, tc.field) {
			t.Errorf("GET %s: %d %s; want 400 naming %s", tc.path, a.status, a.raw, tc.field)
		}
	}
	if a := b.call(t, "GET", "/api/provisioning-jobs?limit=1", ""); a.status != 200 {
		t.Errorf("a parameter given once: %d %s", a.status, a.raw)
	}
}

// A team's body naming a user or space the org does not have is 422 naming the field, on
// create and on PATCH alike: a 404 on PATCH /api/teams/{id} would say the team is missing.
func TestTeamReferencesToMissingThingsAre422(t *testing.T) {
	t.Parallel()
	b := setup(t)
	created := b.call(t, "POST", "/api/teams", `{"name":"platform"}`)
	if created.status != 201 {
		t.Fatalf("create team: %d %s", created.status, created.raw)
	}
	id := created.body["id"].(string)
	for _, tc := range []struct{ method, path, body, field string }{
		{"POST", "/api/teams", `{"name":"other","members":["nobody@example.com"]}`, "members[0]"},
		{"PATCH", "/api/teams/" + id, `{"members":["nobody@example.com"]}`, "members[0]"},
		{"PATCH", "/api/teams/" + id, `{"spaceIDs":["spc_missing"]}`, "spaceIDs[0]"},
	} {
		a := b.call(t, tc.method, tc.path, tc.body)
		if a.status != 422 || !strings.Contains(string(a.raw), `"field":"`+tc.field+`"`) {
			t.Errorf("%s %s %s: %d %s; want 422 naming %s", tc.method, tc.path, tc.body, a.status, a.raw, tc.field)
		}
	}
	if got := b.call(t, "GET", "/api/teams/"+id, ""); got.status != 200 {
		t.Fatalf("the team after the refusals: %d %s", got.status, got.raw)
	}
}
