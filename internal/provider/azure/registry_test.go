package azure

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerregistry/armcontainerregistry"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/registry"
	"github.com/groundworkhq/groundwork/internal/provider/azure/azurefake"
)

func testJob(id string) *job.Job {
	return &job.Job{ID: id, OrgID: "org_test", SpaceID: "spc_test", Provider: Name, Tags: map[string]string{"team": "api"}}
}

func TestRegistryNameIsACRs(t *testing.T) {
	t.Parallel()
	acr := regexp.MustCompile(`^[a-z0-9]{5,50}$`)
	for _, id := range []string{"job_01JD5Z8Q4N6R7S8T9V0W1X2Y3Z", "j", "JOB-with-UPPER_and-dashes-0123456789"} {
		n := RegistryName(testJob(id))
		if !acr.MatchString(n) {
			t.Errorf("RegistryName(%q) = %q, not 5-50 lower-case letters and digits", id, n)
		}
		if again := RegistryName(testJob(id)); again != n {
			t.Errorf("RegistryName(%q) is %q then %q", id, n, again)
		}
	}
	if a, b := RegistryName(testJob("job_01JD5Z8Q4N6R7S8T9V0W1X2Y3Z")), RegistryName(testJob("job_01JD5Z8Q4N6R7S8T9V0W1X2Y3Y")); a == b {
		t.Errorf("two jobs share registry %s", a)
	}
}

func TestRegistryEnsure(t *testing.T) {
	t.Parallel()
	c, cloud := testClient(t)
	j := testJob("job_regensure0001")
	d := RegistryDriver{C: c}
	ctx := context.Background()
	repo, err := d.EnsureRepository(ctx, j, registry.Config{Name: "team/api"})
	if err != nil {
		t.Fatal(err)
	}
	rname := RegistryName(j)
	if want := rname + ".azurecr.io/team/api"; repo.URI != want {
		t.Errorf("URI = %q, want %q", repo.URI, want)
	}
	if want := "/subscriptions/" + azurefake.Subscription + "/resourceGroups/" + c.ResourceGroup + "/providers/Microsoft.ContainerRegistry/registries/" + rname; repo.ID != want {
		t.Errorf("ID = %q, want %q", repo.ID, want)
	}
	if repo.Name != "team/api" {
		t.Errorf("Name = %q", repo.Name)
	}
	regs, err := armcontainerregistry.NewRegistriesClient(c.SubscriptionID, c.cred, c.opts)
	if err != nil {
		t.Fatal(err)
	}
	got, err := regs.Get(ctx, c.ResourceGroup, rname, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.SKU == nil || *got.SKU.Name != armcontainerregistry.SKUNameStandard {
		t.Errorf("sku = %+v, want Standard", got.SKU)
	}
	if got.Properties.AdminUserEnabled == nil || *got.Properties.AdminUserEnabled {
		t.Error("the admin user is enabled")
	}
	for k, want := range map[string]string{TagJob: j.ID, TagOrg: j.OrgID, TagRole: roleRegistry, TagManagedBy: managedBy, "team": "api"} {
		if v := got.Tags[k]; v == nil || *v != want {
			t.Errorf("tag %s = %v, want %q", k, v, want)
		}
	}
	puts := func() int {
		n := 0
		for _, call := range cloud.Calls() {
			if strings.HasPrefix(call, "PUT ") && strings.Contains(call, "/registries/") {
				n++
			}
		}
		return n
	}
	if _, err := d.EnsureRepository(ctx, j, registry.Config{Name: "team/api"}); err != nil {
		t.Fatal(err)
	}
	if n := puts(); n != 1 {
		t.Errorf("%d PUTs of the registry for two ensures, want 1", n)
	}
}

func TestRegistryRefusals(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		cfg   registry.Config
		setup func(t *testing.T, c *Client, cloud *azurefake.Cloud, j *job.Job)
		code  string
		calls bool // whether the refused call wrote to Azure
	}{
		"immutable tags": {cfg: registry.Config{Name: "a", ImmutableTags: true}, code: "ImmutableTagsUnsupported"},
		"scan on push":   {cfg: registry.Config{Name: "a", ScanOnPush: true}, code: "ScanOnPushUnsupported"},
		"forbidden": {cfg: registry.Config{Name: "a"}, code: "AuthorizationFailed", calls: true,
			setup: func(_ *testing.T, _ *Client, cloud *azurefake.Cloud, _ *job.Job) {
				cloud.Fail(http.MethodPut, "/registries/", http.StatusForbidden, "AuthorizationFailed",
					"The client does not have authorization to perform action 'Microsoft.ContainerRegistry/registries/write'.", 1)
			}},
		"name held elsewhere": {cfg: registry.Config{Name: "a"}, code: "RegistryNameTaken", calls: true,
			setup: func(t *testing.T, _ *Client, cloud *azurefake.Cloud, j *job.Job) {
				if _, err := (RegistryDriver{C: clientOn(t, cloud, "rg-other")}).EnsureRepository(context.Background(), j, registry.Config{Name: "a"}); err != nil {
					t.Fatal(err)
				}
			}},
		"name in the group, another job's": {cfg: registry.Config{Name: "a"}, code: "NameTaken",
			setup: func(t *testing.T, c *Client, _ *azurefake.Cloud, j *job.Job) {
				other := *j
				other.OrgID = "org_other"
				if _, err := (RegistryDriver{C: c}).EnsureRepository(context.Background(), &other, registry.Config{Name: "a"}); err != nil {
					t.Fatal(err)
				}
			}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, cloud := testClient(t)
			j := testJob("job_refused0001")
			if tc.setup != nil {
				tc.setup(t, c, cloud, j)
			}
			before := len(cloud.Calls())
			_, err := RegistryDriver{C: c}.EnsureRepository(context.Background(), j, tc.cfg)
			fe := fault.As(err)
			if err == nil || fe.Class != job.ClassUserAction || fe.Code != tc.code {
				t.Fatalf("err = %v (%+v), want user_action %s", err, fe, tc.code)
			}
			if made := len(cloud.Calls()) > before; made != tc.calls {
				t.Errorf("wrote to Azure: %v, want %v", made, tc.calls)
			}
		})
	}
}

// A delete never removes a registry of the job's name that is not the job's.
func TestRegistryDeleteLeavesOthers(t *testing.T) {
	t.Parallel()
	c, cloud := testClient(t)
	j := testJob("job_regdelete0001")
	other := *j
	other.OrgID = "org_other"
	ctx := context.Background()
	if _, err := (RegistryDriver{C: c}).EnsureRepository(ctx, &other, registry.Config{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := (RegistryDriver{C: c}).DeleteRepository(ctx, j, "a"); err != nil {
		t.Fatal(err)
	}
	if n := len(observeType(cloud, "Microsoft.ContainerRegistry/registries")); n != 1 {
		t.Fatalf("%d registries left, want the other job's", n)
	}
	if err := (RegistryDriver{C: c}).DeleteRepository(ctx, &other, "a"); err != nil {
		t.Fatal(err)
	}
	if n := len(observeType(cloud, "Microsoft.ContainerRegistry/registries")); n != 0 {
		t.Fatalf("%d registries left after the owner's delete", n)
	}
}

func observeType(cloud *azurefake.Cloud, typ string) []azurefake.Resource {
	var out []azurefake.Resource
	for _, r := range cloud.Resources() {
		if strings.EqualFold(r.Type, typ) {
			out = append(out, r)
		}
	}
	return out
}
