package azure

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/client"
	"github.com/groundworkhq/groundwork/internal/discovery"
	"github.com/groundworkhq/groundwork/internal/job"
	azp "github.com/groundworkhq/groundwork/internal/provider/azure"
	"github.com/groundworkhq/groundwork/internal/provider/azure/azurefake"
	"github.com/groundworkhq/groundwork/internal/store"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// env is one server with an Azure space on its own fake subscription.
type env struct {
	s     *apptest.Server
	cloud *azurefake.Cloud
	space *store.Space
}

func newEnv(t *testing.T, spaceConfig map[string]any) *env {
	t.Helper()
	return newEnvWith(t, spaceConfig, nil)
}

// newEnvWith is newEnv with more of the account's config (a Key Vault, say).
func newEnvWith(t *testing.T, spaceConfig map[string]any, accountConfig map[string]string) *env {
	t.Helper()
	cloud := azurefake.New(t)
	s := apptest.Start(t, app.Options{PollInterval: 50 * time.Millisecond,
		AWS: app.AWSOptions{Poll: 50 * time.Millisecond}, Datastores: app.DatastoreOptions{Poll: 50 * time.Millisecond},
		Azure: app.AzureOptions{Transport: azurefake.Transport(cloud.URL), Poll: 10 * time.Millisecond}})
	return &env{s: s, cloud: cloud, space: newSpaceWith(t, s.Client, cloud.URL, spaceConfig, accountConfig)}
}

// newSpace makes an Azure account on the fake subscription at url and a space on it.
func newSpace(t *testing.T, cl *client.Client, url string, spaceConfig map[string]any) *store.Space {
	t.Helper()
	return newSpaceWith(t, cl, url, spaceConfig, nil)
}

func newSpaceWith(t *testing.T, cl *client.Client, url string, spaceConfig map[string]any, accountConfig map[string]string) *store.Space {
	t.Helper()
	ctx := testCtx(t)
	cfg := map[string]string{"endpoint": url, "subscriptionId": azurefake.Subscription}
	for k, v := range accountConfig {
		cfg[k] = v
	}
	var acc store.CloudAccount
	if err := cl.Do(ctx, http.MethodPost, "/api/cloud-accounts", map[string]any{"name": "azurefake", "provider": "azure",
		"region": "westeurope", "authMethod": "none", "config": cfg}, &acc); err != nil {
		t.Fatalf("create cloud account: %v", err)
	}
	var sp store.Space
	req := map[string]any{"name": "azure", "provider": "azure", "region": "westeurope", "cloudAccountID": acc.ID}
	if spaceConfig != nil {
		req["config"] = spaceConfig
	}
	if err := cl.Do(ctx, http.MethodPost, "/api/spaces", req, &sp); err != nil {
		t.Fatalf("create space: %v", err)
	}
	return &sp
}

func (e *env) create(t *testing.T, kind, config string) *job.Job {
	t.Helper()
	return apptest.Jobs{Client: e.s.Client}.Create(t, e.space.ID, kind, config)
}

func getJob(t *testing.T, c *client.Client, id string) *job.Job {
	t.Helper()
	return apptest.Jobs{Client: c}.Get(t, id)
}

// waitFor polls the job until cond holds; a job that ends otherwise ends the test.
func waitFor(t *testing.T, c *client.Client, id string, what string, cond func(*job.Job) bool) *job.Job {
	t.Helper()
	return apptest.Jobs{Client: c}.WaitFor(t, id, what, cond)
}

func waitStatus(t *testing.T, c *client.Client, id string, want job.Status) *job.Job {
	t.Helper()
	return apptest.Jobs{Client: c}.WaitStatus(t, id, want)
}

func (e *env) teardown(t *testing.T, id string) {
	t.Helper()
	apptest.Jobs{Client: e.s.Client}.Teardown(t, id)
}

// tagged lists the resources of the subscription that carry the job's tag, by type.
func tagged(cloud *azurefake.Cloud, jobID string) map[string]int {
	out := map[string]int{}
	for _, r := range cloud.Resources() {
		if r.Tags[azp.TagJob] == jobID {
			out[r.Type]++
		}
	}
	return out
}

func groups(cloud *azurefake.Cloud) []string {
	var out []string
	for _, r := range cloud.Resources() {
		if strings.EqualFold(r.Type, "Microsoft.Resources/resourceGroups") {
			out = append(out, r.Name)
		}
	}
	return out
}

// Each family an Azure space offers: the job completes through the server, what it made
// carries its tag, and DELETE leaves nothing of it; the space's resource group stays.
func TestFamiliesCreateAndTeardown(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		kind, config string
		made         []string // resource types the job must have made
	}{
		"network": {kind: "network", config: `{"cidr":"10.30.0.0/16"}`, made: []string{"Microsoft.Network/virtualNetworks",
			"Microsoft.Network/natGateways", "Microsoft.Network/publicIPAddresses", "Microsoft.Network/networkSecurityGroups"}},
		"registry": {kind: "registry", config: `{"name":"team-images"}`, made: []string{"Microsoft.ContainerRegistry/registries"}},
		"dns_zone": {kind: "dns_zone", config: `{"domain":"shop.example.com"}`, made: []string{"Microsoft.Network/dnszones"}},
		"datastore postgres": {kind: "datastore", config: `{"engine":"postgres","version":"16","instanceClass":"Standard_D2ds_v5","allocatedStorageGB":64,"multiAZ":true,"backupRetentionDays":14}`,
			made: []string{"Microsoft.DBforPostgreSQL/flexibleServers", "Microsoft.Network/virtualNetworks", "Microsoft.Network/privateDnsZones"}},
		"datastore mysql": {kind: "datastore", config: `{"engine":"mysql","version":"8.0.21","instanceClass":"Standard_B1ms","allocatedStorageGB":20}`,
			made: []string{"Microsoft.DBforMySQL/flexibleServers", "Microsoft.Network/virtualNetworks", "Microsoft.Network/privateDnsZones"}},
		"datastore redis": {kind: "datastore", config: `{"engine":"redis","version":"6","instanceClass":"Premium_P1","multiAZ":true}`,
			made: []string{"Microsoft.Cache/Redis"}},
		"kubernetes": {kind: "kubernetes", config: `{"name":"platform-prod","version":"1.30","nodeGroups":[{"name":"system","instanceType":"Standard_D4s_v5","min":2,"max":4},{"name":"batch","instanceType":"Standard_D8s_v5","min":0,"max":10}]}`,
			made: []string{"Microsoft.ContainerService/managedClusters", "Microsoft.ManagedIdentity/userAssignedIdentities",
				"Microsoft.Network/virtualNetworks"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			j := e.create(t, tc.kind, tc.config)
			j = waitStatus(t, e.s.Client, j.ID, job.StatusCompleted)
			made := tagged(e.cloud, j.ID)
			for _, typ := range tc.made {
				if made[typ] != 1 {
					t.Fatalf("after create the subscription holds %v of the job; want one %s", made, typ)
				}
			}
			clusterSpace := ""
			if tc.kind == "kubernetes" {
				clusterSpace = checkClusterSpace(t, e, j)
			}
			e.teardown(t, j.ID)
			if left := tagged(e.cloud, j.ID); len(left) > 0 {
				t.Fatalf("after teardown the subscription still holds %v of the job", left)
			}
			if clusterSpace != "" {
				err := e.s.Client.Do(testCtx(t), http.MethodGet, "/api/spaces/"+clusterSpace, nil, nil)
				var ce *client.Error
				if !errors.As(err, &ce) || ce.Status != http.StatusNotFound {
					t.Fatalf("the cluster's space after teardown: %v; want it gone", err)
				}
			}
			if g := groups(e.cloud); len(g) != 1 || g[0] != azp.GroupName(e.space.ID) {
				t.Fatalf("resource groups after teardown: %v; want the space's own, kept", g)
			}
		})
	}
}

// A space that names an existing resource group puts its resources there and keeps the
// group on teardown; one that names a missing group fails its job with the fix.
func TestExistingResourceGroup(t *testing.T) {
	t.Parallel()
	cloud := azurefake.New(t)
	s := apptest.Start(t, app.Options{PollInterval: 50 * time.Millisecond, AWS: app.AWSOptions{Poll: 50 * time.Millisecond},
		Azure: app.AzureOptions{Transport: azurefake.Transport(cloud.URL)}})
	if err := cloud.CreateGroup("platform-shared", "westeurope", map[string]string{"owner": "platform"}); err != nil {
		t.Fatal(err)
	}
	e := &env{s: s, cloud: cloud, space: newSpace(t, s.Client, cloud.URL, map[string]any{"existingResourceGroup": "platform-shared"})}
	j := e.create(t, "network", `{"cidr":"10.32.0.0/16"}`)
	j = waitStatus(t, s.Client, j.ID, job.StatusCompleted)
	for _, r := range cloud.Resources() {
		if r.Tags[azp.TagJob] == j.ID && !strings.Contains(r.ID, "/resourceGroups/platform-shared/") {
			t.Errorf("%s is outside the existing resource group", r.ID)
		}
	}
	e.teardown(t, j.ID)
	if g := groups(cloud); len(g) != 1 || g[0] != "platform-shared" {
		t.Fatalf("resource groups after teardown: %v; want platform-shared alone, kept", g)
	}

	missing := &env{s: s, cloud: cloud, space: newSpace(t, s.Client, cloud.URL, map[string]any{"existingResourceGroup": "not-there"})}
	j = missing.create(t, "network", `{}`)
	j = waitStatus(t, s.Client, j.ID, job.StatusFailed)
	if j.Failure == nil || j.Failure.Class != job.ClassUserAction || j.Failure.Code != "ResourceGroupNotFound" || !strings.Contains(j.Failure.FixHint, "not-there") {
		t.Fatalf("failure %+v; want user_action ResourceGroupNotFound naming the group", j.Failure)
	}
}

// Each class of Azure refusal, end to end: a refused permission, an unregistered resource
// provider and a quota fail the job with the fix and a portal link; throttling and a busy
// service are waited out and the job completes.
func TestErrorClassesEndToEnd(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		status         int
		code           string
		unregister     string
		times          int
		failCode, hint string
		completes      bool
	}{
		"permission denied": {status: 403, code: "AuthorizationFailed", times: 100, failCode: "AuthorizationFailed", hint: "Contributor"},
		"not registered":    {unregister: "Microsoft.Network", failCode: "MissingSubscriptionRegistration", hint: "az provider register --namespace Microsoft.Network"},
		"quota":             {status: 409, code: "QuotaExceeded", times: 100, failCode: "QuotaExceeded", hint: "quota"},
		"throttled":         {status: 429, code: "TooManyRequests", times: 4, completes: true},
		"unavailable":       {status: 503, code: "ServiceUnavailable", times: 4, completes: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			if tc.unregister != "" {
				e.cloud.Unregister(tc.unregister)
			} else {
				e.cloud.Fail(http.MethodPut, "/virtualNetworks/", tc.status, tc.code, tc.code+" (azurefake)", tc.times)
			}
			j := e.create(t, "network", `{"cidr":"10.32.0.0/16"}`)
			if tc.completes {
				waitStatus(t, e.s.Client, j.ID, job.StatusCompleted)
				return
			}
			j = waitStatus(t, e.s.Client, j.ID, job.StatusFailed)
			f := j.Failure
			if f == nil || f.Class != job.ClassUserAction || f.Code != tc.failCode || !strings.Contains(f.FixHint, tc.hint) ||
				!strings.HasPrefix(f.ConsoleURL, "https://portal.azure.com/") || f.Step != "create_network" {
				t.Fatalf("failure %+v; want user_action %s at create_network with %q and a portal link", f, tc.failCode, tc.hint)
			}
		})
	}
}

// A VM pool on an Azure space is refused at admission, naming the space, with the note on
// when Azure's will come; no job is stored.
func TestVMPoolOnAzureIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	err := e.s.Client.Do(testCtx(t), http.MethodPost, "/api/provisioning-jobs", map[string]any{"spaceID": e.space.ID,
		"kind": "vm_pool", "config": json.RawMessage(`{"name":"web","instanceType":"Standard_B2s","min":1,"max":1}`)}, nil)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusBadRequest || !strings.Contains(ce.Error(), "spaceID") ||
		!strings.Contains(ce.Error(), "generally available") {
		t.Fatalf("vm_pool on Azure: %v; want a 400 naming spaceID with the availability note", err)
	}
	var list struct {
		Data []job.Job `json:"data"`
	}
	if err := e.s.Client.Do(testCtx(t), http.MethodGet, "/api/provisioning-jobs?spaceID="+e.space.ID, nil, &list); err != nil || len(list.Data) != 0 {
		t.Fatalf("jobs after the refusal: %v %v; want none", list.Data, err)
	}
	if calls := e.cloud.Calls(); len(calls) != 0 {
		t.Fatalf("the refusal reached Azure: %v", calls)
	}
}

// An account that names a Key Vault keeps its datastores' admin passwords there: the job holds
// only the reference, the API never shows the value, and teardown purges the secret.
func TestDatastorePasswordInKeyVault(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, nil, map[string]string{"keyVaultURL": "https://platform-kv.vault.azure.net/"})
	j := e.create(t, "datastore", `{"engine":"postgres","version":"16","instanceClass":"Standard_D2ds_v5"}`)
	j = waitStatus(t, e.s.Client, j.ID, job.StatusCompleted)
	kept := e.cloud.VaultSecrets("platform-kv")
	if len(kept) != 1 || kept[0].Deleted || kept[0].Tags[azp.TagJob] != j.ID || len(kept[0].Value) < 16 {
		t.Fatalf("the vault holds %+v; want the job's admin password", kept)
	}
	raw, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"azkv:https://platform-kv.vault.azure.net/secrets/`) {
		t.Fatalf("the job does not keep a Key Vault reference: %s", raw)
	}
	if strings.Contains(string(raw), kept[0].Value) {
		t.Fatal("the job's API answer holds the password")
	}
	e.teardown(t, j.ID)
	if left := e.cloud.VaultSecrets("platform-kv"); len(left) != 0 {
		t.Fatalf("after teardown the vault holds %+v; want the secret purged", left)
	}
}

func checkClusterSpace(t *testing.T, e *env, j *job.Job) string {
	t.Helper()
	return apptest.ClusterSpace(t, e.s.Client, j, "azure")
}

// A plan of an Azure job, through the API: every step's actions are known, and the policy is
// a custom role definition holding them.
func TestPlanOfAnAzureJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	var p struct {
		Provider        string `json:"provider"`
		OperationsKnown bool   `json:"operationsKnown"`
		Steps           []struct {
			Name       string   `json:"name"`
			Operations []string `json:"operations"`
		} `json:"steps"`
		Policy struct {
			Format   string `json:"format"`
			Document struct {
				IsCustom bool     `json:"IsCustom"`
				Actions  []string `json:"Actions"`
			} `json:"document"`
		} `json:"policy"`
	}
	if err := e.s.Client.Do(testCtx(t), http.MethodPost, "/api/provisioning-jobs/plan", map[string]any{"spaceID": e.space.ID,
		"kind": "network", "config": json.RawMessage(`{"cidr":"10.60.0.0/16"}`)}, &p); err != nil {
		t.Fatal(err)
	}
	if p.Provider != "azure" || !p.OperationsKnown || p.Policy.Format != "azure-role-definition" || !p.Policy.Document.IsCustom {
		t.Fatalf("plan %+v", p)
	}
	want := "Microsoft.Network/virtualNetworks/write"
	found := false
	for _, a := range p.Policy.Document.Actions {
		found = found || a == want
	}
	if !found {
		t.Fatalf("the role definition lacks %s: %v", want, p.Policy.Document.Actions)
	}
	if calls := e.cloud.Calls(); len(calls) != 0 {
		t.Fatalf("planning reached Azure: %v", calls)
	}
}

// Through the API: a space's networks before any job are none; once a network job completes,
// a refreshed listing has its VNet, managed, with its CIDR, and its subnets under it.
func TestDiscoveryThroughTheAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := testCtx(t)
	list := func(kind string, refresh bool) []discovery.Item {
		t.Helper()
		var items []discovery.Item
		q := "?refresh=" + strconv.FormatBool(refresh)
		for pages := 0; ; pages++ {
			var page discovery.Page
			if err := e.s.Client.Do(ctx, http.MethodGet, "/api/spaces/"+e.space.ID+"/discovery/"+kind+q, nil, &page); err != nil {
				t.Fatalf("discover %s: %v", kind, err)
			}
			if page.Items == nil {
				t.Fatalf("discover %s: items is null, want a list", kind)
			}
			items = append(items, page.Items...)
			if page.NextCursor == "" {
				return items
			}
			q = "?cursor=" + page.NextCursor
		}
	}
	if got := list("networks", false); len(got) != 0 {
		t.Fatalf("networks of an empty subscription = %+v", got)
	}
	j := e.create(t, "network", `{"cidr":"10.34.0.0/16"}`)
	waitStatus(t, e.s.Client, j.ID, job.StatusCompleted)
	vnet := ""
	for _, r := range e.cloud.Resources() {
		if r.Type == "Microsoft.Network/virtualNetworks" && r.Tags[azp.TagJob] == j.ID {
			vnet = r.ID
		}
	}
	if vnet == "" {
		t.Fatal("the job made no virtual network")
	}
	if got := list("networks", false); len(got) != 0 {
		t.Fatalf("the cached listing changed before its time: %+v", got)
	}
	got := list("networks", true)
	if len(got) != 1 || got[0].ID != vnet || !got[0].Managed || got[0].CIDR != "10.34.0.0/16" || got[0].Tags[azp.TagJob] != j.ID {
		t.Fatalf("networks = %+v; want the job's VNet %s, managed", got, vnet)
	}
	subnets := list("subnets", true)
	if len(subnets) != 2 {
		t.Fatalf("subnets = %+v; want the network's private and public", subnets)
	}
	for _, s := range subnets {
		if s.VPCID != vnet || !s.Managed || s.CIDR == "" {
			t.Errorf("subnet %+v", s)
		}
	}
	var bad map[string]any
	if err := e.s.Client.Do(ctx, http.MethodGet, "/api/spaces/"+e.space.ID+"/discovery/vpcs", nil, &bad); err == nil {
		t.Error("an unknown kind was answered")
	}
}
