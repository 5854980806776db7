package gcp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/pipeline/dnszone"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
	"github.com/groundworkhq/groundwork/internal/pipeline/registry"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
	"github.com/groundworkhq/groundwork/internal/plan"
	"github.com/groundworkhq/groundwork/internal/provider/drivertest"
	"github.com/groundworkhq/groundwork/internal/provider/gcp/gcpfake"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/secrets/secretstest"
	"github.com/groundworkhq/groundwork/internal/store"
)

// runMarked runs the steps and their undos and returns what each step's requests needed.
func runMarked(ctx context.Context, t *testing.T, cloud *gcpfake.Cloud, j *job.Job, steps []pipeline.Step) map[string][]string {
	t.Helper()
	return drivertest.RunMarked(ctx, t, drivertest.MarkerOf(cloud.Mark, cloud.PermissionsSince), j, steps)
}

// Every permission a pipeline's steps were seen to need is in the plan of that step, and the
// custom role grants them all and nothing else.
func TestPlanListsEveryPermissionAPipelineCalls(t *testing.T) {
	t.Parallel()
	type build func(t *testing.T, c *Client, j *job.Job) pipeline.Pipeline
	netw := func(_ *testing.T, c *Client, _ *job.Job) pipeline.Pipeline {
		return network.New(func(context.Context, *job.Job) (network.Driver, error) { return NetworkDriver{C: c}, nil }, time.Millisecond)
	}
	// Without the account's Secret Manager the password stays in the server's own store.
	ds := func(t *testing.T, c *Client, j *job.Job) pipeline.Pipeline {
		var store secrets.SecretStore
		if c.SecretManager {
			store = secretStore(t, c, j)
		} else {
			local, err := secrets.OpenLocal(t.TempDir(), "")
			if err != nil {
				t.Fatal(err)
			}
			store = local
		}
		return dspipe.New(dspipe.Options{Drivers: map[string]dspipe.Driver{Name: datastoreWith(c, j.Config)}, Secrets: secretstest.Vault(store), Poll: time.Millisecond})
	}
	k8s := func(_ *testing.T, c *Client, _ *job.Job) pipeline.Pipeline {
		return kubernetes.New(func(context.Context, *job.Job) (kubernetes.Driver, error) { return KubernetesDriver{C: c}, nil }, nil, time.Millisecond)
	}
	vms := func(_ *testing.T, c *Client, _ *job.Job) pipeline.Pipeline {
		return vmpool.New(func(context.Context, *job.Job) (vmpool.Driver, error) { return VMPoolDriver{C: c}, nil }, time.Millisecond)
	}
	cases := []struct {
		name   string
		family job.Family
		config string
		// secretManager opens the account with its Secret Manager.
		secretManager bool
		build         build
	}{
		{"registry", job.FamilyRegistry, `{"name":"team/api"}`, false, func(_ *testing.T, c *Client, _ *job.Job) pipeline.Pipeline {
			return registry.New(func(context.Context, *job.Job) (registry.Driver, error) { return RegistryDriver{C: c}, nil })
		}},
		{"dns_zone", job.FamilyDNSZone, `{"domain":"svc.example.org","records":[{"name":"api.svc.example.org","type":"A","values":["10.0.0.5"]},{"name":"www.svc.example.org","type":"CNAME","values":["api.svc.example.org"]}]}`, false,
			func(_ *testing.T, c *Client, _ *job.Job) pipeline.Pipeline {
				return dnszone.New(func(context.Context, *job.Job) (dnszone.Driver, error) { return DNSZoneDriver{C: c}, nil })
			}},
		{"network", job.FamilyNetwork, `{"cidr":"10.20.0.0/16"}`, false, netw},
		{"network without NAT", job.FamilyNetwork, `{"cidr":"10.21.0.0/16","noNAT":true}`, false, netw},
		{"network with peering", job.FamilyNetwork, `{"cidr":"10.22.0.0/16","noNAT":true,"peering":{"peerVPCID":"$peer"}}`, false, netw},
		{"network adopted", job.FamilyNetwork, `{"vpcID":"$peer"}`, false, netw},
		{"datastore postgres", job.FamilyDatastore, `{"engine":"postgres","name":"orders","instanceClass":"db-custom-2-7680","allocatedStorageGB":50,"multiAZ":true}`, false, ds},
		{"datastore mysql", job.FamilyDatastore, `{"engine":"mysql","name":"shop","allocatedStorageGB":20}`, false, ds},
		{"datastore redis", job.FamilyDatastore, `{"engine":"redis","name":"sessions"}`, false, ds},
		{"datastore postgres in a network", job.FamilyDatastore, `{"engine":"postgres","name":"orders","vpcID":"$peer"}`, false, ds},
		{"datastore postgres in Secret Manager", job.FamilyDatastore, `{"engine":"postgres","name":"orders"}`, true, ds},
		{"datastore mysql in Secret Manager", job.FamilyDatastore, `{"engine":"mysql","name":"shop"}`, true, ds},
		{"datastore redis in Secret Manager", job.FamilyDatastore, `{"engine":"redis","name":"sessions"}`, true, ds},
		{"kubernetes", job.FamilyKubernetes, `{"name":"plat","version":"1.33","nodeGroups":[{"name":"system","instanceType":"e2-standard-4","min":1,"max":3},{"name":"workers","instanceType":"g2-standard-8","min":0,"max":4}]}`, false, k8s},
		{"kubernetes private", job.FamilyKubernetes, `{"name":"priv","privateCluster":true,"nodeGroups":[{"name":"system","instanceType":"e2-standard-4","min":1,"max":2}]}`, false, k8s},
		{"kubernetes in a network", job.FamilyKubernetes, `{"name":"adopt","vpcID":"$peer","nodeGroups":[{"name":"system","instanceType":"e2-standard-4","min":1,"max":2}]}`, false, k8s},
		{"vm_pool fixed", job.FamilyVMPool, `{"name":"web","instanceType":"e2-small","min":2,"max":2}`, false, vms},
		{"vm_pool asg", job.FamilyVMPool, `{"name":"web","instanceType":"e2-small","mode":"asg","min":1,"max":3,"desired":2}`, false, vms},
		{"vm_pool fixed with load balancer", job.FamilyVMPool, `{"name":"web","instanceType":"e2-small","min":1,"max":1,"createLoadBalancer":true,"domain":"web.svc.example.org","zoneID":"$zone"}`, false, vms},
		{"vm_pool asg with load balancer", job.FamilyVMPool, `{"name":"web","instanceType":"e2-small","mode":"asg","min":1,"max":2,"createLoadBalancer":true,"listenerPorts":[80,443]}`, false, vms},
		{"vm_pool in a network", job.FamilyVMPool, `{"name":"web","instanceType":"e2-small","min":1,"max":1,"vpcID":"$peer"}`, false, vms},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c, cloud := testClient(t)
			if tc.secretManager {
				c, cloud = secretClient(t)
			}
			// What the job refers to is made outside it, before the steps' permissions are noted.
			if strings.Contains(tc.config, "$peer") {
				peer := networkJob(t, "job_peer", network.Config{CIDR: "10.99.0.0/16", NoNAT: true})
				n := ensureReady(t, NetworkDriver{C: c}, peer, network.Config{CIDR: "10.99.0.0/16", NoNAT: true})
				tc.config = strings.ReplaceAll(tc.config, "$peer", n.VPCID)
			}
			if strings.Contains(tc.config, "$zone") {
				zj := &job.Job{ID: "job_zone", OrgID: "org_plan", SpaceID: "spc_plan", Provider: Name, Family: job.FamilyDNSZone}
				var z dnszone.Zone
				until(t, ctx, "zone", func() (done bool, err error) {
					z, err = DNSZoneDriver{C: c}.EnsureZone(ctx, zj, dnszone.Config{Name: "svc.example.org"})
					return err == nil, err
				})
				tc.config = strings.ReplaceAll(tc.config, "$zone", z.ID)
			}
			j := &job.Job{ID: "job_" + strings.NewReplacer(" ", "", "_", "").Replace(tc.name), OrgID: "org_plan", SpaceID: "spc_plan",
				Kind: job.KindProvisioning, Family: tc.family, Provider: Name, Mode: job.ModeCreate, Config: json.RawMessage(tc.config), Infra: json.RawMessage(`{}`)}
			pl := tc.build(t, c, j)
			if err := pl.Validate(ctx, j); err != nil {
				t.Fatal(err)
			}
			steps := pl.Steps(j)
			mark := cloud.Mark()
			seen := runMarked(ctx, t, cloud, j, steps)
			if len(cloud.PermissionsSince(mark)) == 0 {
				t.Fatal("the cloud noted no permission: it is not wired")
			}
			// The plan reads the account's secretManager from the module's records.
			acc := &store.CloudAccount{ID: "acc_plan", OrgID: j.OrgID, Provider: Name, Config: json.RawMessage(fmt.Sprintf(`{"secretManager":%v}`, tc.secretManager))}
			sp := &store.Space{ID: j.SpaceID, OrgID: j.OrgID, Provider: Name, CloudAccountID: acc.ID}
			src := NewModule(ModuleOptions{Records: records{spaces: map[string]*store.Space{sp.ID: sp}, accounts: map[string]*store.CloudAccount{acc.ID: acc}}}).PlanSource()
			if !src.Knows(j) {
				t.Fatalf("the plan source does not know %s jobs", j.Family)
			}
			names := make([]string, len(steps))
			for i, s := range steps {
				names[i] = s.Name
			}
			planned, err := src.Steps(ctx, j, names)
			if err != nil {
				t.Fatal(err)
			}
			var missing []string
			for i, s := range steps {
				for _, pm := range seen[s.Name] {
					if !slices.Contains(planned[i].Operations, pm) {
						missing = append(missing, fmt.Sprintf("%s: %s", s.Name, pm))
					}
				}
			}
			sort.Strings(missing)
			if len(missing) > 0 {
				t.Fatalf("permissions needed but not in the plan:\n%s", strings.Join(slices.Compact(missing), "\n"))
			}
			all := (&plan.Plan{Steps: planned}).Operations()
			pol, err := src.Policy(j, all)
			if err != nil {
				t.Fatal(err)
			}
			var role CustomRole
			if err := json.Unmarshal(pol.Document, &role); err != nil || pol.Format != plan.FormatGCP {
				t.Fatalf("policy %s %s: %v", pol.Format, pol.Document, err)
			}
			for _, pm := range cloud.PermissionsSince(mark) {
				if !slices.Contains(role.IncludedPermissions, pm) {
					t.Errorf("the custom role does not include %s", pm)
				}
			}
			if !slices.Equal(role.IncludedPermissions, plan.SortedUnique(all)) {
				t.Errorf("the custom role holds %v, the plan %v", role.IncludedPermissions, all)
			}
		})
	}
}

func TestPolicyRefusesWhatIsNotAPermission(t *testing.T) {
	t.Parallel()
	j := &job.Job{ID: "job_pol", Family: job.FamilyRegistry, Provider: Name}
	if _, err := (PlanSource{}).Policy(j, []string{"artifactregistry.repositories.create", "Microsoft.Cache/redis/write"}); err == nil {
		t.Fatal("an Azure action made it into a GCP custom role")
	}
}

// What a step lists follows the job's config and account: a router's only with NAT, the
// peering's only with a peering, Secret Manager's only on an account that keeps passwords
// there, node pool changes only on a cluster already made, the load balancer's parts only
// with a load balancer and each listener's only with its port, a self-signed certificate
// only without a domain, the DNS record only with a domain and zone.
func TestStepPlanFollowsTheConfig(t *testing.T) {
	t.Parallel()
	sm := PlanAccount{SecretManager: true}
	router, addPeering := "compute.routers.create", "compute.networks.addPeering"
	for _, tc := range []struct {
		family       job.Family
		config       string
		infra        string
		acc          PlanAccount
		step         string
		has, hasNo   []string
		types, typNo []string
	}{
		{family: job.FamilyNetwork, config: `{"cidr":"10.0.0.0/16"}`, step: network.StepNetwork,
			has:   []string{router, "compute.networks.create", "servicenetworking.services.addPeering", "compute.globalAddresses.createInternal"},
			types: []string{"google_compute_router_nat", "google_service_networking_connection"}},
		{family: job.FamilyNetwork, config: `{"noNAT":true}`, step: network.StepNetwork,
			has: []string{"compute.networks.create", "compute.routers.get"}, hasNo: []string{router}, typNo: []string{"google_compute_router"}},
		{family: job.FamilyNetwork, config: `{"vpcID":"projects/p/global/networks/n"}`, step: network.StepNetwork,
			has: []string{"compute.networks.get"}, hasNo: []string{"compute.networks.create", router, "servicenetworking.services.addPeering"}},
		{family: job.FamilyNetwork, config: `{}`, step: network.StepPeering, has: []string{"compute.networks.get"},
			hasNo: []string{addPeering, "compute.networks.removePeering"}},
		{family: job.FamilyNetwork, config: `{"peering":{"peerVPCID":"projects/p/global/networks/n"}}`, step: network.StepPeering,
			has: []string{addPeering, "compute.networks.removePeering"}, types: []string{"google_compute_network_peering"}},

		{family: job.FamilyDatastore, config: `{"engine":"postgres"}`, step: dspipe.StepCredentials, hasNo: []string{"secretmanager.secrets.create"}},
		{family: job.FamilyDatastore, config: `{"engine":"postgres"}`, acc: sm, step: dspipe.StepCredentials,
			has: []string{"secretmanager.secrets.create", "secretmanager.versions.add"}, types: []string{"google_secret_manager_secret"}},
		{family: job.FamilyDatastore, config: `{"engine":"mysql"}`, step: dspipe.StepCreateServer,
			has: []string{"cloudsql.instances.create"}, hasNo: []string{"redis.instances.create", "secretmanager.versions.access"},
			types: []string{"google_sql_database_instance"}},
		{family: job.FamilyDatastore, config: `{"engine":"redis"}`, acc: sm, step: dspipe.StepCreateServer,
			has: []string{"redis.instances.create", "secretmanager.versions.access"}, hasNo: []string{"cloudsql.instances.create"},
			types: []string{"google_redis_instance"}},
		{family: job.FamilyDatastore, config: `{"engine":"redis"}`, step: dspipe.StepWaitReady,
			has: []string{"redis.instances.getAuthString"}, hasNo: []string{"secretmanager.versions.add"}},
		{family: job.FamilyDatastore, config: `{"engine":"redis"}`, acc: sm, step: dspipe.StepWaitReady,
			has: []string{"redis.instances.getAuthString", "secretmanager.versions.add"}},
		{family: job.FamilyDatastore, config: `{"engine":"postgres","vpcID":"projects/p/global/networks/n"}`, step: dspipe.StepNetwork,
			has: []string{"compute.networks.get"}, hasNo: []string{"compute.networks.create", "compute.globalAddresses.create"}},
		{family: job.FamilyDatastore, config: `{"engine":"postgres"}`, step: dspipe.StepNetwork,
			has: []string{"compute.networks.create", "compute.globalAddresses.create"}},

		{family: job.FamilyKubernetes, config: `{"name":"k","nodeGroups":[{"name":"system"}]}`, step: kubernetes.StepCluster,
			has: []string{"container.clusters.create", "iam.serviceAccounts.actAs"}, hasNo: []string{"container.clusters.update"},
			types: []string{"google_container_cluster", "google_container_node_pool"}},
		{family: job.FamilyKubernetes, config: `{"name":"k","nodeGroups":[{"name":"system"}]}`, infra: `{"cluster":{"name":"k"}}`, step: kubernetes.StepCluster,
			has: []string{"container.clusters.update"}},
		{family: job.FamilyKubernetes, config: `{"name":"k","vpcID":"projects/p/global/networks/n"}`, step: kubernetes.StepNetwork,
			has: []string{"compute.subnetworks.list"}, hasNo: []string{"compute.networks.create"}},

		{family: job.FamilyVMPool, config: `{"name":"p","instanceType":"e2-small","min":1,"max":1}`, step: vmpool.StepVMs,
			has:   []string{"compute.instances.create", "compute.subnetworks.use", "iam.serviceAccounts.actAs", "compute.instances.getGuestAttributes"},
			hasNo: []string{"compute.instanceGroupManagers.create", "compute.autoscalers.create"}, typNo: []string{"google_compute_region_instance_group_manager"}},
		{family: job.FamilyVMPool, config: `{"name":"p","instanceType":"e2-small","mode":"asg","min":1,"max":3}`, step: vmpool.StepVMs,
			has:   []string{"compute.instanceGroupManagers.create", "compute.autoscalers.create", "iam.serviceAccounts.actAs"},
			hasNo: []string{"compute.instances.create"}, types: []string{"google_compute_region_instance_group_manager"}},
		{family: job.FamilyVMPool, config: `{"name":"p","instanceType":"e2-small","min":1,"max":1}`, step: vmpool.StepNetwork,
			has: []string{router}},
		{family: job.FamilyVMPool, config: `{"name":"p","instanceType":"e2-small","min":1,"max":1,"vpcID":"projects/p/global/networks/n"}`, step: vmpool.StepNetwork,
			has: []string{"compute.networks.get"}, hasNo: []string{router, "compute.networks.create"}},
		{family: job.FamilyVMPool, config: `{"name":"p","instanceType":"e2-small","min":1,"max":1,"createLoadBalancer":true}`, step: vmpool.StepTargetGroup,
			has: []string{"compute.instanceGroups.create", "compute.instanceGroups.update", "compute.healthChecks.useReadOnly"}},
		{family: job.FamilyVMPool, config: `{"name":"p","instanceType":"e2-small","mode":"asg","min":1,"max":2,"createLoadBalancer":true}`, step: vmpool.StepTargetGroup,
			has: []string{"compute.backendServices.create"}, hasNo: []string{"compute.instanceGroups.create"}},
		{family: job.FamilyVMPool, config: `{"name":"p","instanceType":"e2-small","min":1,"max":1,"createLoadBalancer":true,"listenerPorts":[80]}`, step: vmpool.StepListeners,
			has:   []string{"compute.targetHttpProxies.create", "compute.urlMaps.use", "compute.globalForwardingRules.create", "compute.globalAddresses.use"},
			hasNo: []string{"compute.targetHttpsProxies.create", "compute.sslCertificates.create"}},
		{family: job.FamilyVMPool, config: `{"name":"p","instanceType":"e2-small","min":1,"max":1,"createLoadBalancer":true}`, step: vmpool.StepListeners,
			has: []string{"compute.targetHttpsProxies.create", "compute.sslCertificates.create"}, types: []string{"google_compute_ssl_certificate"},
			typNo: []string{"google_compute_managed_ssl_certificate"}},
		{family: job.FamilyVMPool, config: `{"name":"p","instanceType":"e2-small","min":1,"max":1,"createLoadBalancer":true,"domain":"a.example.org"}`, step: vmpool.StepListeners,
			types: []string{"google_compute_managed_ssl_certificate"}},
		{family: job.FamilyVMPool, config: `{"name":"p","instanceType":"e2-small","min":1,"max":1,"createLoadBalancer":true,"listenerPorts":[443],"certificateArn":"mine"}`, step: vmpool.StepListeners,
			has: []string{"compute.sslCertificates.get"}, hasNo: []string{"compute.sslCertificates.create"}},
		{family: job.FamilyVMPool, config: `{"name":"p","instanceType":"e2-small","min":1,"max":1,"createLoadBalancer":true,"domain":"a.example.org","zoneID":"projects/p/managedZones/z"}`,
			step: vmpool.StepDNSRecord, has: []string{"dns.resourceRecordSets.create"}, types: []string{"google_dns_record_set"}},
		{family: job.FamilyVMPool, config: `{"name":"p","instanceType":"e2-small","min":1,"max":1,"createLoadBalancer":true}`, step: vmpool.StepDNSRecord,
			hasNo: []string{"dns.resourceRecordSets.create"}},
	} {
		j := &job.Job{ID: "job_cfg", Family: tc.family, Provider: Name, Mode: job.ModeCreate, Config: json.RawMessage(tc.config), Infra: json.RawMessage(tc.infra)}
		s := StepPlan(j, tc.step, tc.acc)
		var types []string
		for _, r := range s.Resources {
			types = append(types, r.Type)
		}
		what := fmt.Sprintf("%s %s %s (secret manager %v)", tc.family, tc.config, tc.step, tc.acc.SecretManager)
		for _, a := range tc.has {
			if !slices.Contains(s.Operations, a) {
				t.Errorf("%s: %s not listed in %v", what, a, s.Operations)
			}
		}
		for _, a := range tc.hasNo {
			if slices.Contains(s.Operations, a) {
				t.Errorf("%s: %s listed", what, a)
			}
		}
		for _, typ := range tc.types {
			if !slices.Contains(types, typ) {
				t.Errorf("%s: no %s in %v", what, typ, types)
			}
		}
		for _, typ := range tc.typNo {
			if slices.Contains(types, typ) {
				t.Errorf("%s: %s planned", what, typ)
			}
		}
	}
	// Adopting a datastore calls no cloud, whatever the account.
	adopted := &job.Job{ID: "job_ad", Family: job.FamilyDatastore, Provider: Name, Mode: job.ModeAdopt, Config: json.RawMessage(`{"engine":"postgres","host":"db.example.org"}`)}
	for _, step := range []string{dspipe.StepNetwork, dspipe.StepCredentials, dspipe.StepCreateServer, dspipe.StepWaitReady, dspipe.StepRegister} {
		s := StepPlan(adopted, step, sm)
		if len(s.Operations) != 0 {
			t.Errorf("adopted datastore step %s calls %v", step, s.Operations)
		}
		if step == dspipe.StepCreateServer && (len(s.Resources) != 1 || s.Resources[0].Action != plan.ActionAdopt || s.Resources[0].Name != "db.example.org") {
			t.Errorf("adopted datastore step %s = %+v", step, s)
		}
	}
}

// A plan source without records plans for an account without Secret Manager, and one whose
// space is gone says so rather than guessing.
func TestPlanSourceReadsTheAccount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := &job.Job{ID: "job_acc", OrgID: "org_1", SpaceID: "spc_1", Family: job.FamilyDatastore, Provider: Name, Mode: job.ModeCreate,
		Config: json.RawMessage(`{"engine":"postgres"}`)}
	steps, err := (&Module{}).PlanSource().Steps(ctx, j, []string{dspipe.StepCredentials})
	if err != nil || len(steps[0].Operations) != 0 {
		t.Fatalf("without records: %+v, %v", steps, err)
	}
	acc := &store.CloudAccount{ID: "acc_1", OrgID: "org_1", Provider: Name, Config: json.RawMessage(`{"projectID":"p","secretManager":true}`)}
	sp := &store.Space{ID: "spc_1", OrgID: "org_1", Provider: Name, CloudAccountID: acc.ID}
	src := NewModule(ModuleOptions{Records: records{spaces: map[string]*store.Space{sp.ID: sp}, accounts: map[string]*store.CloudAccount{acc.ID: acc}}}).PlanSource()
	steps, err = src.Steps(ctx, j, []string{dspipe.StepCredentials})
	if err != nil || !slices.Contains(steps[0].Operations, "secretmanager.secrets.create") {
		t.Fatalf("with an account that keeps secrets in Secret Manager: %+v, %v", steps, err)
	}
	gone := *j
	gone.SpaceID = "spc_gone"
	if _, err := src.Steps(ctx, &gone, []string{dspipe.StepCredentials}); fault.ClassOf(err) != job.ClassUserAction {
		t.Fatalf("space gone: %v, want user_action", err)
	}
}

// A kubernetes job run again with other node groups on the cluster it made adds a pool and
// changes another's bounds in place: its plan, made with the cluster in its infra, lists the
// update those calls need, and a plan without the cluster does not.
func TestPlanListsNodePoolChanges(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c, cloud := testClient(t)
	j := k8sJob("job_planpools", k8sConfig)
	j.Infra = json.RawMessage(`{}`)
	pl := kubernetes.New(func(context.Context, *job.Job) (kubernetes.Driver, error) { return KubernetesDriver{C: c}, nil }, nil, time.Millisecond)
	steps := pl.Steps(j)
	cluster := slices.IndexFunc(steps, func(s pipeline.Step) bool { return s.Name == kubernetes.StepCluster })
	if fresh := StepPlan(j, kubernetes.StepCluster, PlanAccount{}); slices.Contains(fresh.Operations, "container.clusters.update") {
		t.Fatal("a cluster not made yet is planned to be updated")
	}
	runSteps(ctx, t, j, steps[:cluster+1], false, nil)

	cfg := k8sConfig
	cfg.NodeGroups = []kubernetes.NodeGroup{{Name: "system", InstanceType: "e2-standard-4", Min: 2, Max: 6},
		k8sConfig.NodeGroups[1], {Name: "batch", InstanceType: "c3-standard-4", Min: 0, Max: 10}}
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	j.Config = raw
	again := StepPlan(j, kubernetes.StepCluster, PlanAccount{})
	seen := runMarked(ctx, t, cloud, j, steps[cluster:cluster+1])
	if !slices.Contains(seen[kubernetes.StepCluster], "container.clusters.update") {
		t.Fatalf("the pools were changed without container.clusters.update: %v", seen)
	}
	for _, pm := range seen[kubernetes.StepCluster] {
		if !slices.Contains(again.Operations, pm) {
			t.Errorf("%s needed but not in the plan %v", pm, again.Operations)
		}
	}
}
