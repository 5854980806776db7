package gcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/client"
	"github.com/groundworkhq/groundwork/internal/discovery"
	"github.com/groundworkhq/groundwork/internal/job"
	gp "github.com/groundworkhq/groundwork/internal/provider/gcp"
	"github.com/groundworkhq/groundwork/internal/provider/gcp/gcpfake"
	"github.com/groundworkhq/groundwork/internal/store"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// env is one server with a GCP space on its own fake project.
type env struct {
	s     *apptest.Server
	jobs  apptest.Jobs
	cloud *gcpfake.Cloud
	space *store.Space
}

func newEnv(t *testing.T) *env {
	t.Helper()
	cloud := gcpfake.New(t)
	s := apptest.Start(t, app.Options{PollInterval: 50 * time.Millisecond,
		AWS: app.AWSOptions{Poll: 50 * time.Millisecond}, Datastores: app.DatastoreOptions{Poll: 50 * time.Millisecond},
		GCP: app.GCPOptions{Poll: 10 * time.Millisecond}})
	return &env{s: s, jobs: apptest.Jobs{Client: s.Client}, cloud: cloud, space: newSpace(t, s.Client, cloud, nil)}
}

// newSpace makes a GCP account on the fake project, reached through config.endpoints
// alone, and a space on it.
func newSpace(t *testing.T, cl *client.Client, cloud *gcpfake.Cloud, accountConfig map[string]any) *store.Space {
	t.Helper()
	ctx := testCtx(t)
	cfg := map[string]any{"projectId": gcpfake.Project, "endpoints": cloud.Endpoints()}
	for k, v := range accountConfig {
		cfg[k] = v
	}
	var acc store.CloudAccount
	if err := cl.Do(ctx, http.MethodPost, "/api/cloud-accounts", map[string]any{"name": "gcpfake", "provider": "gcp",
		"region": "europe-west1", "authMethod": "none", "config": cfg}, &acc); err != nil {
		t.Fatalf("create cloud account: %v", err)
	}
	var sp store.Space
	if err := cl.Do(ctx, http.MethodPost, "/api/spaces", map[string]any{"name": "gcp", "provider": "gcp",
		"region": "europe-west1", "cloudAccountID": acc.ID}, &sp); err != nil {
		t.Fatalf("create space: %v", err)
	}
	return &sp
}

// labelled lists the resources of the project that carry the job's id (in labels, a Cloud
// SQL instance's user labels, or, for types without labels, the description), by kind.
func labelled(cloud *gcpfake.Cloud, jobID string) map[string]int {
	out := map[string]int{}
	for _, r := range cloud.Resources() {
		d, _ := r.Body["description"].(string)
		settings, _ := r.Body["settings"].(map[string]any)
		user, _ := settings["userLabels"].(map[string]any)
		if r.Labels()[gp.LabelJob] == strings.ToLower(jobID) || gp.JobOfDescription(d) == jobID || user[gp.LabelJob] == strings.ToLower(jobID) {
			out[r.Kind]++
		}
	}
	return out
}

// checkPool checks a VM pool job's record: every VM ready, the exec channel, and with a load
// balancer its address as the endpoint and a forwarding rule per listener.
func checkPool(t *testing.T, e *env, j *job.Job, made map[string]int) {
	t.Helper()
	var infra struct {
		VMs []struct {
			ID, State string
		} `json:"vms"`
		LB *struct {
			DNSName     string   `json:"dnsName"`
			ListenerIDs []string `json:"listenerIDs"`
			SelfSigned  bool     `json:"selfSignedCertificate"`
		} `json:"loadBalancer"`
		Space map[string]any `json:"space"`
	}
	if err := json.Unmarshal(j.Infra, &infra); err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Desired, Min int
		CreateLB     bool `json:"createLoadBalancer"`
	}
	_ = json.Unmarshal(j.Config, &cfg)
	want := max(cfg.Desired, cfg.Min)
	if len(infra.VMs) != want {
		t.Fatalf("%d VMs recorded, want %d: %s", len(infra.VMs), want, j.Infra)
	}
	for _, v := range infra.VMs {
		if v.State != "ready" || !strings.HasPrefix(v.ID, "zones/europe-west1-") {
			t.Fatalf("VM %+v", v)
		}
	}
	if infra.Space["execMode"] != "OSLogin+IAP" {
		t.Fatalf("space %v, want the OS Login and IAP exec channel", infra.Space)
	}
	if cfg.CreateLB {
		if infra.LB == nil || infra.LB.DNSName == "" || len(infra.LB.ListenerIDs) != 2 || !infra.LB.SelfSigned ||
			infra.Space["endpoint"] != infra.LB.DNSName || made["compute#forwardingRule"] != 2 {
			t.Fatalf("load balancer %+v, space %v, made %v", infra.LB, infra.Space, made)
		}
	}
}

func checkClusterSpace(t *testing.T, e *env, j *job.Job) string {
	t.Helper()
	return apptest.ClusterSpace(t, e.s.Client, j, "gcp")
}

// Each family a GCP space offers: the job completes through the server, what it made
// carries its label, a re-run makes nothing new, and DELETE leaves nothing of it.
func TestFamiliesCreateAndTeardown(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		kind, config string
		made         []string // resource kinds the job must have made, one each
	}{
		"registry": {kind: "registry", config: `{"name":"team-images"}`, made: []string{"artifactregistry.repository"}},
		"dns_zone": {kind: "dns_zone", config: `{"domain":"shop.example.com"}`,
			made: []string{"dns#managedZone"}},
		"network": {kind: "network", config: `{"cidr":"10.30.0.0/16"}`, made: []string{"compute#network", "compute#subnetwork",
			"compute#router", "compute#address"}},
		"datastore postgres": {kind: "datastore", config: `{"engine":"postgres","version":"16","instanceClass":"db-custom-2-7680","allocatedStorageGB":50,"multiAZ":true,"backupRetentionDays":14}`,
			made: []string{"sql#instance", "compute#network"}},
		"datastore mysql": {kind: "datastore", config: `{"engine":"mysql","version":"8.0","allocatedStorageGB":20}`,
			made: []string{"sql#instance", "compute#network"}},
		"datastore redis": {kind: "datastore", config: `{"engine":"redis","version":"7.2","multiAZ":true}`,
			made: []string{"redis.instance"}},
		"kubernetes": {kind: "kubernetes", config: `{"name":"platform-prod","version":"1.33","nodeGroups":[{"name":"system","instanceType":"e2-standard-4","min":2,"max":4},{"name":"batch","instanceType":"n2-standard-8","min":0,"max":10}]}`,
			made: []string{"container.cluster", "iam.serviceAccount", "compute#network", "compute#subnetwork"}},
		"vm_pool fixed with load balancer": {kind: "vm_pool", config: `{"name":"web","instanceType":"e2-small","min":2,"max":2,"createLoadBalancer":true}`,
			made: []string{"compute#instanceTemplate", "compute#instanceGroup", "compute#backendService", "compute#healthCheck",
				"compute#urlMap", "compute#targetHttpProxy", "compute#targetHttpsProxy", "compute#sslCertificate", "iam.serviceAccount", "compute#network"}},
		"vm_pool asg": {kind: "vm_pool", config: `{"name":"workers","instanceType":"e2-medium","mode":"asg","min":2,"max":4}`,
			made: []string{"compute#instanceTemplate", "compute#instanceGroupManager", "compute#autoscaler", "iam.serviceAccount"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			j := e.jobs.Create(t, e.space.ID, tc.kind, tc.config)
			j = e.jobs.WaitStatus(t, j.ID, job.StatusCompleted)
			made := labelled(e.cloud, j.ID)
			for _, kind := range tc.made {
				if made[kind] != 1 {
					t.Fatalf("after create the project holds %v of the job; want one %s", made, kind)
				}
			}
			if tc.kind == "vm_pool" {
				checkPool(t, e, j, made)
			}
			clusterSpace := ""
			if tc.kind == "kubernetes" {
				clusterSpace = checkClusterSpace(t, e, j)
			}
			e.jobs.Teardown(t, j.ID)
			if left := labelled(e.cloud, j.ID); len(left) > 0 {
				t.Fatalf("after teardown the project still holds %v of the job", left)
			}
			if left := e.cloud.Policy(); len(left) != 1 {
				t.Fatalf("after teardown the project's IAM policy holds %v", left)
			}
			if clusterSpace != "" {
				var sp store.Space
				err := e.s.Client.Do(testCtx(t), http.MethodGet, "/api/spaces/"+clusterSpace, nil, &sp)
				var ce *client.Error
				if !errors.As(err, &ce) || ce.Status != http.StatusNotFound {
					t.Fatalf("the cluster's space after teardown: %v", err)
				}
			}
		})
	}
}

// Each class of Google refusal reaches the job's failure with its code, its fix and a Cloud
// Console link; a passing one (503) is retried and the job completes.
func TestErrorClassesEndToEnd(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		inject   func(c *gcpfake.Cloud)
		failCode string
		hint     string // the fix hint holds it
		console  string // the console URL holds it
	}{
		"api not enabled": {inject: func(c *gcpfake.Cloud) { c.Disable(gcpfake.HostDNS) },
			failCode: "ApiNotEnabled", hint: "gcloud services enable dns.googleapis.com", console: "apis/library/dns.googleapis.com"},
		"permission denied": {inject: func(c *gcpfake.Cloud) { c.Deny(gcpfake.HostDNS, "/managedZones", "dns.managedZones.create") },
			failCode: "PermissionDenied", hint: "roles", console: "iam-admin/iam"},
		"quota": {inject: func(c *gcpfake.Cloud) {
			c.Fail(gcpfake.HostDNS, http.MethodPost, "/managedZones", -1, http.StatusForbidden, "quotaExceeded")
		}, failCode: "QuotaExceeded", hint: "quota", console: "iam-admin/quotas"},
		"billing": {inject: func(c *gcpfake.Cloud) {
			c.Fail(gcpfake.HostDNS, http.MethodPost, "/managedZones", -1, http.StatusForbidden, "billingNotEnabled")
		}, failCode: "BillingDisabled", hint: "billing", console: "billing/linkedaccount"},
		"unavailable then fine": {inject: func(c *gcpfake.Cloud) {
			c.Fail(gcpfake.HostDNS, http.MethodPost, "/managedZones", 2, http.StatusServiceUnavailable, "backendError")
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			tc.inject(e.cloud)
			j := e.jobs.Create(t, e.space.ID, "dns_zone", `{"domain":"errors.example.com"}`)
			if tc.failCode == "" {
				e.jobs.WaitStatus(t, j.ID, job.StatusCompleted)
				// The job completed through the refusals, not around them.
				refused := 0
				for _, call := range e.cloud.Calls() {
					if call.Status == http.StatusServiceUnavailable {
						refused++
					}
				}
				if refused != 2 {
					t.Fatalf("%d calls answered 503, want the 2 injected", refused)
				}
				return
			}
			j = e.jobs.WaitStatus(t, j.ID, job.StatusFailed)
			f := j.Failure
			if f == nil || f.Class != job.ClassUserAction || f.Code != tc.failCode || !strings.Contains(f.FixHint, tc.hint) ||
				!strings.HasPrefix(f.ConsoleURL, "https://console.cloud.google.com/"+tc.console) || !strings.Contains(f.ConsoleURL, "project="+gcpfake.Project) {
				t.Fatalf("failure %+v; want user_action %s with a hint holding %q and a console URL at %s", f, tc.failCode, tc.hint, tc.console)
			}
		})
	}
}

// A plan of a GCP job, through the API: every step's permissions are known, the policy is a
// custom role holding them, and planning calls nothing in the project.
func TestPlanOfAGCPJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var p struct {
		Provider        string `json:"provider"`
		OperationsKnown bool   `json:"operationsKnown"`
		Policy          struct {
			Format   string `json:"format"`
			Document struct {
				Stage               string   `json:"stage"`
				IncludedPermissions []string `json:"includedPermissions"`
			} `json:"document"`
		} `json:"policy"`
	}
	if err := e.s.Client.Do(testCtx(t), http.MethodPost, "/api/provisioning-jobs/plan", map[string]any{"spaceID": e.space.ID,
		"kind": "dns_zone", "config": json.RawMessage(`{"domain":"plan.example.com"}`)}, &p); err != nil {
		t.Fatal(err)
	}
	if p.Provider != "gcp" || !p.OperationsKnown || p.Policy.Format != "gcp-custom-role" || p.Policy.Document.Stage != "GA" ||
		!slices.Contains(p.Policy.Document.IncludedPermissions, "dns.managedZones.create") {
		t.Fatalf("plan %+v", p)
	}
	if calls := e.cloud.Calls(); len(calls) != 0 {
		t.Fatalf("planning reached Google: %v", calls)
	}
}

// Through the API: a space's networks before any job are none; once a network job completes,
// a refreshed listing has its network, managed, and its subnet under it; the datastore
// versions are those a job may ask for.
func TestDiscoveryThroughTheAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	list := func(kind string, refresh bool) []discovery.Item {
		t.Helper()
		var items []discovery.Item
		q := "?refresh=" + strconv.FormatBool(refresh)
		for {
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
		t.Fatalf("networks of an empty project = %+v", got)
	}
	j := e.jobs.Create(t, e.space.ID, "network", `{"cidr":"10.34.0.0/16"}`)
	e.jobs.WaitStatus(t, j.ID, job.StatusCompleted)
	got := list("networks", true)
	if len(got) != 1 || !got[0].Managed || !strings.HasPrefix(got[0].ID, "projects/"+gcpfake.Project+"/global/networks/gw-") {
		t.Fatalf("networks = %+v; want the job's network, managed", got)
	}
	subnets := list("subnets", true)
	if len(subnets) != 1 || subnets[0].VPCID != got[0].ID || subnets[0].CIDR != "10.34.0.0/17" {
		t.Fatalf("subnets = %+v; want the job's one subnet in %s", subnets, got[0].ID)
	}
	versions := list("versions", false)
	if !slices.ContainsFunc(versions, func(it discovery.Item) bool { return it.Engine == "mysql" && it.Version == "8.0" }) {
		t.Fatalf("versions = %+v", versions)
	}
}

// A read-only GCP account: a job is refused before anything runs, naming the permissions it
// would need and the custom role that grants them.
func TestReadOnlyAccountIsRefusedWithTheRole(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	var acc store.CloudAccount
	if err := e.s.Client.Do(ctx, http.MethodPost, "/api/cloud-accounts", map[string]any{"name": "ro", "provider": "gcp",
		"region": "europe-west1", "authMethod": "none", "permissionLevel": "read_only",
		"config": map[string]any{"projectId": gcpfake.Project, "endpoints": e.cloud.Endpoints()}}, &acc); err != nil {
		t.Fatal(err)
	}
	var sp store.Space
	if err := e.s.Client.Do(ctx, http.MethodPost, "/api/spaces", map[string]any{"name": "ro", "provider": "gcp",
		"region": "europe-west1", "cloudAccountID": acc.ID}, &sp); err != nil {
		t.Fatal(err)
	}
	err := e.s.Client.Do(ctx, http.MethodPost, "/api/provisioning-jobs", map[string]any{"spaceID": sp.ID, "kind": "dns_zone",
		"config": json.RawMessage(`{"domain":"ro.example.com"}`)}, nil)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusForbidden || !strings.Contains(ce.Error(), "dns.managedZones.create") ||
		strings.Contains(ce.Error(), "dns.managedZones.get,") {
		t.Fatalf("a job on a read-only account: %v; want 403 naming dns.managedZones.create and not the reads", err)
	}
	if calls := e.cloud.Calls(); len(calls) != 0 {
		t.Fatalf("the refused job reached Google: %v", calls)
	}
}

// A pool with a domain in a zone a dns_zone job made: its 443 listener gets a Google-managed
// certificate for the domain, and the zone an A record of the domain to the load balancer's
// address, which the pool's teardown removes while the zone stays.
func TestVMPoolWithADomain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	zj := e.jobs.WaitStatus(t, e.jobs.Create(t, e.space.ID, "dns_zone", `{"domain":"shop.example.org"}`).ID, job.StatusCompleted)
	var zinfra struct {
		Zone struct {
			ID string `json:"id"`
		} `json:"zone"`
	}
	if err := json.Unmarshal(zj.Infra, &zinfra); err != nil || zinfra.Zone.ID == "" {
		t.Fatalf("zone job infra %s (%v)", zj.Infra, err)
	}
	pj := e.jobs.Create(t, e.space.ID, "vm_pool", `{"name":"shop","instanceType":"e2-small","min":1,"max":1,"createLoadBalancer":true,"domain":"www.shop.example.org","zoneID":"`+zinfra.Zone.ID+`"}`)
	pj = e.jobs.WaitStatus(t, pj.ID, job.StatusCompleted)
	var infra struct {
		LB struct {
			DNSName    string `json:"dnsName"`
			SelfSigned bool   `json:"selfSignedCertificate"`
		} `json:"loadBalancer"`
	}
	if err := json.Unmarshal(pj.Infra, &infra); err != nil || infra.LB.DNSName == "" || infra.LB.SelfSigned {
		t.Fatalf("pool infra %s (%v); want an address and a managed certificate", pj.Infra, err)
	}
	record := func() (gcpfake.Resource, bool) {
		return e.cloud.Lookup(gcpfake.HostDNS, zinfra.Zone.ID+"/rrsets/www.shop.example.org.|A")
	}
	rr, ok := record()
	if !ok || fmt.Sprint(rr.Body["rrdatas"]) != "["+infra.LB.DNSName+"]" {
		t.Fatalf("the zone's A record %+v (%v); want www.shop.example.org → %s", rr.Body, ok, infra.LB.DNSName)
	}
	managed := false
	for _, r := range e.cloud.Resources() {
		if r.Kind == "compute#sslCertificate" && r.Body["type"] == "MANAGED" {
			m, _ := r.Body["managed"].(map[string]any)
			managed = fmt.Sprint(m["domains"]) == "[www.shop.example.org]"
		}
	}
	if !managed {
		t.Fatal("no Google-managed certificate for the domain")
	}
	e.jobs.Teardown(t, pj.ID)
	if _, ok := record(); ok {
		t.Fatal("the A record outlives the pool")
	}
	if left := labelled(e.cloud, pj.ID); len(left) > 0 {
		t.Fatalf("after teardown the project still holds %v of the pool", left)
	}
	e.jobs.Teardown(t, zj.ID)
}
