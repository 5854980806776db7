package main

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestOpenAPIPrintsTheDocument(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	cmd := newRoot()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"openapi"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	ops := 0
	for _, p := range doc.Paths {
		ops += len(p)
	}
	if doc.OpenAPI != "3.1.0" || doc.Paths["/api/provisioning-jobs/{id}"]["patch"] == nil ||
		doc.Paths["/api/provisioning-jobs/{id}/databases"] == nil || doc.Paths["/api/spaces/register-cluster"] == nil || ops < 60 {
		t.Fatalf("openapi %q with %d operations", doc.OpenAPI, ops)
	}
}
