package azure

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/pipeline/registry"
	"github.com/groundworkhq/groundwork/internal/provider/azure/azurefake"
	"github.com/groundworkhq/groundwork/internal/store"
)

// records is a store with one Azure space on a fake subscription, and the jobs given.
type records struct {
	endpoint string
	jobs     map[string]*job.Job
}

func (r records) GetSpace(_ context.Context, _, id string) (*store.Space, error) {
	if id != "spc_test" {
		return nil, store.ErrNotFound
	}
	return &store.Space{ID: id, OrgID: "org_test", Provider: Name, Region: "westeurope", CloudAccountID: "acc_test"}, nil
}

func (r records) GetCloudAccount(_ context.Context, _, id string) (*store.CloudAccount, error) {
	cfg, _ := json.Marshal(map[string]string{"subscriptionId": azurefake.Subscription, "endpoint": r.endpoint})
	return &store.CloudAccount{ID: id, OrgID: "org_test", Provider: Name, AuthMethod: string(AuthNone), Config: cfg}, nil
}

func (r records) GetJob(_ context.Context, p *store.GetJobParams) (*job.Job, error) {
	if j, ok := r.jobs[p.ID]; ok {
		return j, nil
	}
	return nil, store.ErrNotFound
}

// The module opens each family's driver on the job's space: its subscription, location and
// resource group; the datastore driver finds the job by id first.
func TestModuleOpensDriversOnTheJobsSpace(t *testing.T) {
	t.Parallel()
	cloud := azurefake.New(t)
	j := testJob("job_module0001")
	m := NewModule(ModuleOptions{Records: records{endpoint: cloud.URL, jobs: map[string]*job.Job{j.ID: j}},
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
