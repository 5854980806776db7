package datastore_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/groundworkhq/groundwork/internal/job"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/secrets/secretstest"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// An adopt request's password goes to the secret store, owned by the job, before the job is
// stored; a secret reference is never taken from a request; a refused request stores nothing.
func TestAdmittingKeepsPasswordsOutOfTheJob(t *testing.T) {
	t.Parallel()
	local, err := secrets.OpenLocal(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	ledger := secretstest.NewLedger()
	vault := secrets.NewVault(local, ledger)
	p := &dspipe.Admitting{Pipeline: dspipe.New(dspipe.Options{Secrets: vault, Drivers: map[string]dspipe.Driver{"local": {}}}), Secrets: vault}
	for _, tc := range []struct {
		name  string
		mode  job.Mode
		cfg   map[string]any
		field string // refused naming it; "" when admitted
	}{
		{"adopt with a password", job.ModeAdopt, map[string]any{"engine": "postgres", "host": "db.example.org", "port": 5432,
			"adminUser": "postgres", "adminPassword": "s3cret-Passw0rd"}, ""},
		{"a reference from the request", job.ModeAdopt, map[string]any{"engine": "postgres", "host": "db.example.org", "port": 5432,
			"adminUser": "postgres", "adminSecretRef": "sec_someone_elses"}, "config.adminSecretRef"},
		{"an empty password", job.ModeAdopt, map[string]any{"engine": "postgres", "host": "db.example.org", "port": 5432,
			"adminUser": "postgres", "adminPassword": ""}, "config.adminPassword"},
		{"a bad config with a password", job.ModeAdopt, map[string]any{"engine": "nosuch", "host": "db.example.org",
			"adminUser": "postgres", "adminPassword": "s3cret-Passw0rd"}, "config.engine"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			j := newJob("job_adm_"+strings.ReplaceAll(tc.name, " ", "_"), tc.mode, tc.cfg)
			err := p.Validate(t.Context(), j)
			owner := secrets.Owner{OrgID: j.OrgID, Kind: secrets.OwnerJob, ID: j.ID}
			if tc.field != "" {
				f, ok := validation.Fields(err)
				if !ok || len(f) == 0 || f[0].Field != tc.field {
					t.Fatalf("Validate = %v, want a refusal naming %s", err, tc.field)
				}
				if refs, err := ledger.SecretsOwnedBy(t.Context(), owner); err != nil || len(refs) != 0 {
					t.Fatalf("a refused request stored secrets %v (%v)", refs, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var cfg map[string]any
			_ = json.Unmarshal(j.Config, &cfg)
			ref, _ := cfg["adminSecretRef"].(string)
			if _, has := cfg["adminPassword"]; has || ref == "" || strings.Contains(string(j.Config), "s3cret") {
				t.Fatalf("config after admission = %s; want the password replaced by a reference", j.Config)
			}
			got, err := vault.For(owner).Get(t.Context(), ref)
			if err != nil || got != "s3cret-Passw0rd" {
				t.Fatalf("the job's secret = %q, %v", got, err)
			}
		})
	}
}
