package plan_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/client"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/plan"
	"github.com/groundworkhq/groundwork/internal/store"
)

// On a read-only account a job is refused before it is stored, its fix naming exactly the
// planned operations a read-only grant lacks; a draft written while the account could
// provision carries its plan, and is refused at promotion once the account is read-only.
func TestReadOnlyAccountCheckUsesThePlan(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := apptest.Start(t, app.Options{})
	var acc store.CloudAccount
	if err := s.Client.Do(ctx, http.MethodPost, "/api/cloud-accounts", map[string]any{"name": "ro", "provider": "aws", "region": "us-east-1",
		"authMethod": "static_keys", "permissionLevel": "read_only",
		"credentials": map[string]string{"accessKeyId": "AKIAPLANEXAMPLE", "secretAccessKey": "not-used-by-a-plan"}}, &acc); err != nil {
		t.Fatal(err)
	}
	var sp store.Space
	if err := s.Client.Do(ctx, http.MethodPost, "/api/spaces", map[string]any{"name": "ro", "provider": "aws", "region": "us-east-1", "cloudAccountID": acc.ID}, &sp); err != nil {
		t.Fatal(err)
	}
	body := map[string]any{"spaceID": sp.ID, "kind": "registry", "config": map[string]any{"name": "team-api"}}
	var p plan.Plan
	if err := s.Client.Do(ctx, http.MethodPost, "/api/provisioning-jobs/plan", body, &p); err != nil {
		t.Fatalf("a read-only account cannot be planned for: %v", err)
	}
	missing := p.NotGranted()
	if !p.OperationsKnown || !slices.Contains(missing, "ecr:CreateRepository") || slices.Contains(missing, "ecr:DescribeRepositories") {
		t.Fatalf("not granted = %v (known %v)", missing, p.OperationsKnown)
	}
	err := s.Client.Do(ctx, http.MethodPost, "/api/provisioning-jobs", body, nil)
	var pe *client.Error
	if !errors.As(err, &pe) || pe.Status != http.StatusForbidden {
		t.Fatalf("create on a read-only account: %v", err)
	}
	for _, op := range missing {
		if !strings.Contains(pe.FixHint, op) {
			t.Fatalf("fix hint lacks %s: %s", op, pe.FixHint)
		}
	}
	if strings.Contains(pe.FixHint, "ecr:DescribeRepositories,") || !strings.Contains(pe.FixHint, `"aws:ResourceTag/groundwork:orgId"`) {
		t.Fatalf("fix hint is not the plan's least-privilege grant: %s", pe.FixHint)
	}

	// A draft while the account may provision; then the account turns read-only.
	rw := "read_write"
	if err := s.Client.Do(ctx, http.MethodPatch, "/api/cloud-accounts/"+acc.ID, map[string]any{"permissionLevel": rw}, nil); err != nil {
		t.Fatal(err)
	}
	body["draft"] = true
	var draft job.Job
	if err := s.Client.Do(ctx, http.MethodPost, "/api/provisioning-jobs", body, &draft); err != nil {
		t.Fatal(err)
	}
	var carried plan.Plan
	if err := s.Client.Do(ctx, http.MethodGet, "/api/provisioning-jobs/"+draft.ID+"/plan", nil, &carried); err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(p)
	b, _ := json.Marshal(carried)
	if string(jobIDs.ReplaceAll(a, []byte("job_ID"))) != string(jobIDs.ReplaceAll(b, []byte("job_ID"))) {
		t.Fatalf("the draft's plan differs from the review's:\n%s\n%s", b, a)
	}
	if err := s.Client.Do(ctx, http.MethodPatch, "/api/cloud-accounts/"+acc.ID, map[string]any{"permissionLevel": "read_only"}, nil); err != nil {
		t.Fatal(err)
	}
	err = s.Client.Do(ctx, http.MethodPatch, "/api/provisioning-jobs/"+draft.ID, map[string]any{"status": "queued"}, nil)
	if !errors.As(err, &pe) || pe.Status != http.StatusForbidden || !strings.Contains(pe.FixHint, "ecr:CreateRepository") {
		t.Fatalf("promoting on a read-only account: %v", err)
	}
	var still job.Job
	if err := s.Client.Do(ctx, http.MethodGet, "/api/provisioning-jobs/"+draft.ID, nil, &still); err != nil || still.Status != job.StatusDraft {
		t.Fatalf("the refused draft is %s (%v)", still.Status, err)
	}
}
