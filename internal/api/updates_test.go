package api_test

import (
	"encoding/json"
	"net/url"
	"testing"
)

// TestConfigUpdateOverAPI: a completed job's config is planned (changing nothing), updated
// through PATCH and carried out by the engine; a failed update is rolled back to the last
// applied revision; every step is on the revision history and the audit log, and refusals
// name their field.
func TestConfigUpdateOverAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sp := b.space(t)
	id := b.call(t, "POST", "/api/provisioning-jobs", `{"spaceID":"`+sp+`","kind":"test","config":{"size":1,"fixed":"a"}}`).body["id"].(string)
	created := b.waitStatus(t, id, "completed")
	base := "/api/provisioning-jobs/" + id

	// The dry run answers the diff and leaves the job as it was.
	plan := b.call(t, "POST", base+"/update-plan", `{"config":{"size":2,"fixed":"a"}}`)
	res, _ := plan.body["resources"].([]any)
	if plan.status != 200 || len(res) != 1 || res[0].(map[string]any)["action"] != "in-place" {
		t.Fatalf("update plan: %d %s", plan.status, plan.raw)
	}
	if got := b.call(t, "GET", base, ""); got.body["version"] != created.body["version"] {
		t.Fatalf("the dry run changed the job: version %v, was %v", got.body["version"], created.body["version"])
	}

	// Refusals: a fixed field, a config mixed with a rename, a body without config.
	for name, tc := range map[string]struct {
		method, path, body, field string
		status                    int
	}{
		"fixed field":        {"PATCH", base, `{"config":{"size":2,"fixed":"b"}}`, "config.fixed", 400},
		"fixed field (plan)": {"POST", base + "/update-plan", `{"config":{"size":2,"fixed":"b"}}`, "config.fixed", 400},
		"with a rename":      {"PATCH", base, `{"config":{"size":2,"fixed":"a"},"name":"x"}`, "config", 400},
		"not an object":      {"PATCH", base, `{"config":[1]}`, "config", 400},
		"no config":          {"POST", base + "/update-plan", `{}`, "config", 400},
		"nothing failed":     {"POST", base + "/rollback", ``, "", 409},
	} {
		a := b.call(t, tc.method, tc.path, tc.body)
		if a.status != tc.status || (tc.field != "" && !fieldNamed(a, tc.field)) {
			t.Errorf("%s: %d %s, want %d naming %q", name, a.status, a.raw, tc.status, tc.field)
		}
	}

	// A null config is a field left out: a plain rename.
	if a := b.call(t, "PATCH", base, `{"config":null,"name":"renamed"}`); a.status != 200 || a.body["name"] != "renamed" {
		t.Fatalf("rename with a null config: %d %s", a.status, a.raw)
	}
	up := b.call(t, "PATCH", base, `{"config":{"size":2,"fixed":"a"}}`)
	if up.status != 200 || up.body["status"] != "queued" {
		t.Fatalf("PATCH config: %d %s", up.status, up.raw)
	}
	b.waitStatus(t, id, "completed")
	b.revisions(t, id, "superseded", "applied")

	// An update whose steps fail, then its rollback.
	b.fail.Store(true)
	if up := b.call(t, "PATCH", base, `{"config":{"size":3,"fixed":"a"}}`); up.status != 200 {
		t.Fatalf("PATCH config: %d %s", up.status, up.raw)
	}
	b.waitStatus(t, id, "failed")
	b.revisions(t, id, "superseded", "applied", "failed")
	b.fail.Store(false)
	if rb := b.call(t, "POST", base+"/rollback", ""); rb.status != 202 {
		t.Fatalf("rollback: %d %s", rb.status, rb.raw)
	}
	done := b.waitStatus(t, id, "completed")
	var cfg struct{ Size int }
	raw, _ := json.Marshal(done.body["config"])
	if err := json.Unmarshal(raw, &cfg); err != nil || cfg.Size != 2 {
		t.Fatalf("config after rollback: %s", raw)
	}
	b.revisions(t, id, "superseded", "superseded", "failed", "applied")

	audit := b.call(t, "GET", "/api/audit-logs?limit=200&resourceID="+url.QueryEscape(id), "")
	actions := map[string]int{}
	entries, _ := audit.body["data"].([]any)
	for _, e := range entries {
		actions[e.(map[string]any)["action"].(string)]++
	}
	if actions["provisioning-job.update-config"] != 2 || actions["provisioning-job.rollback-config"] != 1 {
		t.Fatalf("audit actions %v: want two config updates and one rollback (refusals and dry runs are not changes)", actions)
	}
}

// revisions checks the job's revision statuses, in order.
func (b *bundle) revisions(t *testing.T, id string, want ...string) {
	t.Helper()
	a := b.call(t, "GET", "/api/provisioning-jobs/"+id+"/revisions", "")
	data, _ := a.body["data"].([]any)
	if a.status != 200 || len(data) != len(want) {
		t.Fatalf("revisions: %d %s, want %v", a.status, a.raw, want)
	}
	for i, r := range data {
		m := r.(map[string]any)
		if m["status"] != want[i] || m["number"] != float64(i+1) {
			t.Fatalf("revision %d: %v, want %v", i+1, m, want)
		}
	}
}
