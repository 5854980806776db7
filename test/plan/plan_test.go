// Package plan_test checks the plan of every example spec, on every provider that has its
// family, against golden files, through a whole server's POST /api/provisioning-jobs/plan.
// Run with -update to rewrite the golden files after a deliberate change.
package plan_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/plan"
	"github.com/groundworkhq/groundwork/internal/store"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// jobIDs vary per request; the golden files name them job_ID.
var jobIDs = regexp.MustCompile(`job_[0-9A-Z]{26}`)

func TestPlanOfExampleSpecs(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := apptest.Start(t, app.Options{})
	var acc store.CloudAccount
	if err := s.Client.Do(ctx, http.MethodPost, "/api/cloud-accounts", map[string]any{"name": "plan", "provider": "aws", "region": "us-east-1",
		"authMethod": "static_keys", "credentials": map[string]string{"accessKeyId": "AKIAPLANEXAMPLE", "secretAccessKey": "not-used-by-a-plan"}}, &acc); err != nil {
		t.Fatal(err)
	}
	spaces := map[string]string{}
	var sp store.Space
	if err := s.Client.Do(ctx, http.MethodPost, "/api/spaces", map[string]any{"name": "aws", "provider": "aws", "region": "us-east-1", "cloudAccountID": acc.ID}, &sp); err != nil {
		t.Fatal(err)
	}
	spaces["aws"] = sp.ID
	spaces["local"] = s.Space(t, "local").ID

	specs, err := filepath.Glob("../../examples/specs/*.yaml")
	aws, _ := filepath.Glob("../../examples/specs/aws/*.yaml")
	specs = append(specs, aws...)
	if err != nil || len(specs) < 7 {
		t.Fatalf("example specs: %v %v", specs, err)
	}
	planned := 0
	for _, path := range specs {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var spec map[string]any
		if err := yaml.Unmarshal(raw, &spec); err != nil {
			t.Fatal(err)
		}
		for _, provider := range []string{"aws", "local"} {
			name := strings.TrimSuffix(filepath.Base(path), ".yaml") + "." + provider
			spec["spaceID"] = spaces[provider]
			var p plan.Plan
			err := s.Client.Do(ctx, http.MethodPost, "/api/provisioning-jobs/plan", spec, &p)
			if err != nil && strings.Contains(err.Error(), "is not available on the") {
				continue // the family does not run on this provider
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			planned++
			got, err := json.MarshalIndent(p, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(jobIDs.ReplaceAll(got, []byte("job_ID")), '\n')
			golden := filepath.Join("testdata", name+".golden.json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%s: %v (run with -update to write it)", name, err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s: the plan differs from %s (run with -update after a deliberate change):\n%s", name, golden, got)
			}
		}
	}
	if planned < len(specs) {
		t.Fatalf("only %d plans for %d specs", planned, len(specs))
	}
	var jobs struct {
		Data []any `json:"data"`
	}
	if err := s.Client.Do(ctx, http.MethodGet, "/api/provisioning-jobs", nil, &jobs); err != nil || len(jobs.Data) != 0 {
		t.Fatalf("planning created jobs: %v %v", jobs.Data, err)
	}
}
