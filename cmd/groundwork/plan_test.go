package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/plan"
	"github.com/groundworkhq/groundwork/internal/pricing"
)

// groundwork plan prints the steps, the policy's format and the cost as tables, and the whole
// plan with -o json; nothing is created.
func TestPlanCommand(t *testing.T) {
	t.Parallel()
	srv := apptest.Start(t, app.Options{})
	sp := srv.Space(t, "local")
	spec := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(spec, []byte("kind: datastore\nconfig:\n  name: shop\n  engine: postgres\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, srv.URL, srv.Token, "plan", "-f", spec, "--space", sp.ID)
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	for _, want := range []string{"STEP", "create_server", "create local_postgres_server shop", "policy: none", "local: no cloud cost", "total: 0.00 USD/month"} {
		if !strings.Contains(out, want) {
			t.Fatalf("table output lacks %q:\n%s", want, out)
		}
	}
	out, err = run(t, srv.URL, srv.Token, "-o", "json", "plan", "-f", spec, "--space", sp.ID)
	if err != nil {
		t.Fatal(err)
	}
	var p plan.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil || len(p.Steps) == 0 || p.Cost.Currency != "USD" || !p.Cost.Complete {
		t.Fatalf("json plan = %v\n%s", err, out)
	}
	var page struct{ Data []any }
	if err := srv.Client.Do(context.Background(), "GET", "/api/provisioning-jobs", nil, &page); err != nil || len(page.Data) != 0 {
		t.Fatalf("plan created jobs: %v %v", page.Data, err)
	}
}

// groundwork pricing refresh reads recorded price lists and writes a book the server can use.
func TestPricingRefreshCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	book := filepath.Join(dir, "book.json")
	td := "../../internal/pricing/testdata/"
	if out, err := run(t, "", "", "pricing", "refresh", "--aws", td+"aws-rds-us-east-1.json", "--azure", td+"azure-retail-eastus.json",
		"--gcp", td+"gcp-compute-skus.json", "--date", "2026-12-01", "-w", book); err != nil {
		t.Fatalf("refresh: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(book)
	if err != nil {
		t.Fatal(err)
	}
	b, err := pricing.Parse(raw)
	if err != nil || b.Date != "2026-12-01" {
		t.Fatalf("book: %v, date %s", err, b.Date)
	}
	if e, ok := b.Lookup("azure", "eastus", "vm.Standard_D2s_v5"); !ok || e.Price != 0.096 || !strings.Contains(e.Source, "Azure Retail Prices API") {
		t.Fatalf("azure entry = %+v, %v", e, ok)
	}
	if _, ok := b.Lookup("aws", "us-east-1", "eks.cluster"); !ok {
		t.Fatal("the built-in entries were dropped")
	}
	if _, err := run(t, "", "", "pricing", "refresh"); err == nil {
		t.Fatal("refresh without a price list succeeded")
	}
}

// groundwork discover lists a local space's loopback network, every page, as a table.
func TestDiscoverCommand(t *testing.T) {
	t.Parallel()
	srv := apptest.Start(t, app.Options{})
	sp := srv.Space(t, "local")
	out, err := run(t, srv.URL, srv.Token, "discover", "networks", "--space", sp.ID, "--refresh")
	if err != nil || !strings.Contains(out, "127.0.0.0/8") || !strings.Contains(out, "MANAGED") {
		t.Fatalf("discover networks: %v\n%s", err, out)
	}
	if out, err := run(t, srv.URL, srv.Token, "discover", "vpcs", "--space", sp.ID); err == nil || !strings.Contains(err.Error(), "networks, subnets") {
		t.Fatalf("unknown kind: %v\n%s", err, out)
	}
}
