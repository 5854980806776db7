package api

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
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
	s := New(Config{Remediation: &RemediationConfig{}, Drift: &DriftConfig{}})
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

// Every route of every table is in the OpenAPI document, with a success answer, the problem
// answers every route has, and bearer auth; and the document describes no route that is not
// mounted. A route added without an opDoc fails here.
func TestEveryRouteHasADoc(t *testing.T) {
	t.Parallel()
	s := New(Config{Datastores: &DatastoreConfig{}, Components: &ComponentConfig{}, Remediation: &RemediationConfig{}, Drift: &DriftConfig{}})
	docs := s.docs()
	mounted := map[string]bool{}
	for _, rt := range s.allRoutes() {
		key := rt.method + " " + rt.path
		mounted[key] = true
		if _, ok := docs[key]; !ok {
			t.Errorf("%s has no opDoc: describe it in docs() (internal/api/openapi.go)", key)
		}
	}
	for key := range docs {
		if !mounted[key] {
			t.Errorf("docs() describes %s, which no route table mounts", key)
		}
	}
	raw, err := s.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI  string                                           `json:"openapi"`
		Security []map[string][]string                            `json:"security"`
		Paths    map[string]map[string]map[string]json.RawMessage `json:"paths"`
		Schemes  struct {
			SecuritySchemes map[string]struct{ Type, Scheme string } `json:"securitySchemes"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("the document is not JSON: %v", err)
	}
	if doc.OpenAPI != "3.1.0" || len(doc.Security) != 1 || doc.Schemes.SecuritySchemes["bearer"].Scheme != "bearer" {
		t.Fatalf("openapi %q, security %v, schemes %v", doc.OpenAPI, doc.Security, doc.Schemes.SecuritySchemes)
	}
	ops := 0
	for _, rt := range s.allRoutes() {
		op, ok := doc.Paths[rt.path][strings.ToLower(rt.method)]
		if !ok {
			t.Errorf("%s %s is not in the document", rt.method, rt.path)
			continue
		}
		ops++
		var responses map[string]struct {
			Content map[string]json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(op["responses"], &responses); err != nil {
			t.Fatalf("%s %s: responses: %v", rt.method, rt.path, err)
		}
		success := false
		for code := range responses {
			success = success || code[0] == '2'
		}
		if !success {
			t.Errorf("%s %s documents no success answer", rt.method, rt.path)
		}
		for _, code := range []string{"401", "403", "500"} {
			if _, ok := responses[code].Content["application/problem+json"]; !ok {
				t.Errorf("%s %s: %s is not documented as a problem", rt.method, rt.path, code)
			}
		}
	}
	if ops < 55 {
		t.Fatalf("only %d operations checked", ops)
	}
}

// The document is served without a token (clients and gateways read it first).
func TestOpenAPIIsServed(t *testing.T) {
	t.Parallel()
	s := New(Config{Auth: StaticToken{Token: "tok"}})
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/api/openapi.json", nil))
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("%d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	var doc map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || doc["openapi"] != "3.1.0" {
		t.Fatalf("not an OpenAPI 3.1 document: %v %.200s", err, rec.Body.String())
	}
}

// A path that exists under other methods answers 405 with Allow, as a problem; one that does
// not exist answers 404.
func TestWrongMethodIs405(t *testing.T) {
	t.Parallel()
	s := New(Config{Auth: StaticToken{Token: "tok"}, Components: &ComponentConfig{}})
	for _, tc := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{"TRACE", "/api/spaces", 405, "GET, POST"},
		{"PUT", "/api/spaces/spc_1", 405, "GET, DELETE"},
		{"GET", "/api/nothing-here", 404, ""},
		{"OPTIONS", "/api/spaces/register-cluster", 405, "POST"},
	} {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		if rec.Code != tc.status || rec.Header().Get("Allow") != tc.allow || rec.Header().Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s %s: %d allow %q %q", tc.method, tc.path, rec.Code, rec.Header().Get("Allow"), rec.Header().Get("Content-Type"))
		}
	}
}
