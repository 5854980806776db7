package azure

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/pipeline/registry"
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

// oneSpace is a store with one Azure space on a fake subscription, and the jobs given.
type oneSpace struct {
	endpoint string
	jobs     map[string]*job.Job
}

func (r oneSpace) GetSpace(_ context.Context, _, id string) (*store.Space, error) {
	if id != "spc_test" {
		return nil, store.ErrNotFound
	}
	return &store.Space{ID: id, OrgID: "org_test", Provider: Name, Region: "westeurope", CloudAccountID: "acc_test"}, nil
}

func (r oneSpace) GetCloudAccount(_ context.Context, _, id string) (*store.CloudAccount, error) {
	cfg, _ := json.Marshal(map[string]string{"subscriptionId": azurefake.Subscription, "endpoint": r.endpoint})
	return &store.CloudAccount{ID: id, OrgID: "org_test", Provider: Name, AuthMethod: string(AuthNone), Config: cfg}, nil
}

func (r records) GetJob(_ context.Context, p *store.GetJobParams) (*job.Job, error) {
	if j, ok := r.jobs[p.ID]; ok {
		return j, nil
	}
	return nil, store.ErrNotFound
}

func (r oneSpace) GetJob(_ context.Context, p *store.GetJobParams) (*job.Job, error) {
	return records{jobs: r.jobs}.GetJob(context.Background(), p)
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
	m := NewModule(ModuleOptions{Records: r, Transport: azurefake.Transport(cloud.URL)})
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

// The module opens each family's driver on the job's space: its subscription, location and
// resource group; the datastore driver finds the job by id first.
func TestModuleOpensDriversOnTheJobsSpace(t *testing.T) {
	t.Parallel()
	cloud := azurefake.New(t)
	j := testJob("job_module0001")
	m := NewModule(ModuleOptions{Records: oneSpace{endpoint: cloud.URL, jobs: map[string]*job.Job{j.ID: j}},
		Transport: azurefake.Transport(cloud.URL), Poll: time.Millisecond})
	ctx := context.Background()

	d, err := m.RegistryDriver(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	c := d.(RegistryDriver).C
	if c.ResourceGroup != GroupName(j.SpaceID) || c.Location != "westeurope" || c.SubscriptionID != azurefake.Subscription {
		t.Errorf("registry driver on %s/%s/%s", c.SubscriptionID, c.ResourceGroup, c.Location)
	}
	if z, err := m.DNSZoneDriver(ctx, j); err != nil || z.(DNSZoneDriver).C != c {
		t.Errorf("dns driver %v, %v: want the space's client, reused", z, err)
	}
	other := *j
	other.Provider = "aws"
	if _, err := m.RegistryDriver(ctx, &other); fault.As(err).Code != "WrongProvider" {
		t.Errorf("a job on another provider: %v", err)
	}

	dd := m.DatastoreDriver()
	// Nothing was made for the job: its delete is done at once, in the space's group.
	if gone, err := dd.Servers.Delete(ctx, dspipe.DeleteParams{JobID: j.ID, Engine: ds.EnginePostgres}); err != nil || !gone {
		t.Errorf("delete of nothing = %v, %v", gone, err)
	}
	_, err = dd.Servers.Status(ctx, dspipe.StatusParams{JobID: "job_gone", Engine: ds.EnginePostgres})
	if fe := fault.As(err); fe.Class != job.ClassUserAction || fe.Code != "NotFound" {
		t.Errorf("status of a job that is not stored: %v", err)
	}
	if _, err := d.EnsureRepository(ctx, j, registry.Config{Name: "app"}); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range cloud.Resources() {
		found = found || r.ID == "/subscriptions/"+azurefake.Subscription+"/resourceGroups/"+GroupName(j.SpaceID)+"/providers/Microsoft.ContainerRegistry/registries/"+RegistryName(j)
	}
	if !found {
		t.Errorf("the registry is not in the space's group: %v", cloud.Resources())
	}
}
