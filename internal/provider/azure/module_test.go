package azure

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/provider/azure/azurefake"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
)

// records is the module's view of the store, in memory.
type records struct {
	spaces   map[string]*store.Space
	accounts map[string]*store.CloudAccount
	jobs     map[string]*job.Job
}

func (r records) GetSpace(_ context.Context, orgID, id string) (*store.Space, error) {
	if s, ok := r.spaces[id]; ok && s.OrgID == orgID {
		return s, nil
	}
	return nil, store.ErrNotFound
}

func (r records) GetCloudAccount(_ context.Context, orgID, id string) (*store.CloudAccount, error) {
	if a, ok := r.accounts[id]; ok && a.OrgID == orgID {
		return a, nil
	}
	return nil, store.ErrNotFound
}

func (r records) GetJob(_ context.Context, p *store.GetJobParams) (*job.Job, error) {
	if j, ok := r.jobs[p.ID]; ok {
		return j, nil
	}
	return nil, store.ErrNotFound
}

// A datastore job's secrets on an Azure space whose account names a Key Vault go to that
// vault; other jobs' secrets, and those of accounts without a vault, stay in the server's.
func TestSecretRouting(t *testing.T) {
	t.Parallel()
	cloud := azurefake.New(t)
	cfg := func(vault string) json.RawMessage {
		b, _ := json.Marshal(map[string]string{"endpoint": cloud.URL, "subscriptionId": azurefake.Subscription, "keyVaultURL": vault})
		return b
	}
	r := records{
		spaces: map[string]*store.Space{
			"spc_vault":   {ID: "spc_vault", OrgID: "org_a", Provider: Name, Region: "westeurope", CloudAccountID: "acc_vault"},
			"spc_novault": {ID: "spc_novault", OrgID: "org_a", Provider: Name, Region: "westeurope", CloudAccountID: "acc_novault"},
		},
		accounts: map[string]*store.CloudAccount{
			"acc_vault":   {ID: "acc_vault", OrgID: "org_a", Provider: Name, AuthMethod: "none", Config: cfg(testVault)},
			"acc_novault": {ID: "acc_novault", OrgID: "org_a", Provider: Name, AuthMethod: "none", Config: cfg("")},
		},
		jobs: map[string]*job.Job{
			"job_01JDS":      {ID: "job_01JDS", OrgID: "org_a", SpaceID: "spc_vault", Provider: Name, Family: job.FamilyDatastore},
			"job_01JNET":     {ID: "job_01JNET", OrgID: "org_a", SpaceID: "spc_vault", Provider: Name, Family: job.FamilyNetwork},
			"job_01JNOVAULT": {ID: "job_01JNOVAULT", OrgID: "org_a", SpaceID: "spc_novault", Provider: Name, Family: job.FamilyDatastore},
		},
	}
	m := NewModule(ModuleOptions{Records: r, Jobs: r, Transport: azurefake.Transport(cloud.URL)})
	ctx := context.Background()
	for key, wantVault := range map[string]bool{"job_01JDS/admin": true, "job_01JNET/admin": false,
		"job_01JNOVAULT/admin": false, "job_01JUNSTORED/adopted-admin": false, "cloud-account-acc_x": false} {
		st, err := m.SecretStoreFor(ctx, key)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if (st != nil) != wantVault {
			t.Errorf("%s routed to the vault: %v, want %v", key, st != nil, wantVault)
		}
	}
	st, _ := m.SecretStoreFor(ctx, "job_01JDS/admin")
	ref, err := st.Put(ctx, "job_01JDS/admin", "pw")
	if err != nil {
		t.Fatal(err)
	}
	back, err := m.SecretStoreFor(ctx, ref)
	if err != nil || back == nil {
		t.Fatalf("the reference %s does not route back to the vault: %v", ref, err)
	}
	if v, err := back.Get(ctx, ref); err != nil || v != "pw" {
		t.Fatalf("read back %q, %v", v, err)
	}
	delete(r.jobs, "job_01JDS")
	if _, err := m.SecretStoreFor(ctx, ref); !errors.Is(err, secrets.ErrNotFound) || !strings.Contains(err.Error(), "gone") {
		t.Fatalf("a reference of a job that is gone: %v; want not found", err)
	}
}
