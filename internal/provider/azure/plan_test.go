package azure

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/pipeline/dnszone"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
	"github.com/groundworkhq/groundwork/internal/pipeline/registry"
	"github.com/groundworkhq/groundwork/internal/plan"
	"github.com/groundworkhq/groundwork/internal/provider/azure/azurefake"
	"github.com/groundworkhq/groundwork/internal/provider/drivertest"
	"github.com/groundworkhq/groundwork/internal/secrets/secretstest"
)

// runMarked runs the steps and their undos and returns what each step's requests needed.
func runMarked(ctx context.Context, t *testing.T, cloud *azurefake.Cloud, j *job.Job, steps []pipeline.Step) map[string][]string {
	t.Helper()
	return drivertest.RunMarked(ctx, t, drivertest.MarkerOf(cloud.Mark, cloud.ActionsSince), j, steps)
}

// TestPlanListsEveryActionAPipelineCalls runs each family's create and teardown against the
// fake subscription, noting the RBAC action of every request each step makes, and fails when
// a step makes one its plan does not list: the role definition would deny it.
func TestPlanListsEveryActionAPipelineCalls(t *testing.T) {
	t.Parallel()
	type build func(c *Client, j *job.Job) pipeline.Pipeline
	netw := func(c *Client, _ *job.Job) pipeline.Pipeline {
		return network.New(func(context.Context, *job.Job) (network.Driver, error) { return NetworkDriver{C: c}, nil }, time.Millisecond)
	}
	ds := func(c *Client, j *job.Job) pipeline.Pipeline {
		kv, err := c.Secrets(j)
		if err != nil {
			t.Fatal(err)
		}
		return dspipe.New(dspipe.Options{Drivers: map[string]dspipe.Driver{Name: datastoreOn(c)}, Secrets: secretstest.Vault(kv), Poll: time.Millisecond})
	}
	k8s := func(c *Client, _ *job.Job) pipeline.Pipeline {
		return kubernetes.New(func(context.Context, *job.Job) (kubernetes.Driver, error) { return KubernetesDriver{C: c}, nil }, nil, time.Millisecond)
	}
	cases := []struct {
		name   string
		family job.Family
		config string
		build  build
	}{
		{"network", job.FamilyNetwork, `{"cidr":"10.20.0.0/16"}`, netw},
		{"network without NAT", job.FamilyNetwork, `{"cidr":"10.21.0.0/16","noNAT":true}`, netw},
		{"network with peering", job.FamilyNetwork, `{"cidr":"10.22.0.0/16","noNAT":true,"peering":{"peerVPCID":"$peer"}}`, netw},
		{"registry", job.FamilyRegistry, `{"name":"team/api"}`,
			func(c *Client, _ *job.Job) pipeline.Pipeline {
				return registry.New(func(context.Context, *job.Job) (registry.Driver, error) { return RegistryDriver{C: c}, nil })
			}},
		{"dns_zone", job.FamilyDNSZone, `{"domain":"svc.example.org","records":[{"name":"api.svc.example.org","type":"A","values":["10.0.0.5"]},{"name":"www.svc.example.org","type":"CNAME","values":["api.svc.example.org"]}]}`,
			func(c *Client, _ *job.Job) pipeline.Pipeline {
				return dnszone.New(func(context.Context, *job.Job) (dnszone.Driver, error) { return DNSZoneDriver{C: c}, nil })
			}},
		{"datastore postgres", job.FamilyDatastore, `{"engine":"postgres","name":"orders","instanceClass":"Standard_D2ds_v5","allocatedStorageGB":50,"multiAZ":true}`, ds},
		{"datastore mysql", job.FamilyDatastore, `{"engine":"mysql","name":"shop","allocatedStorageGB":20}`, ds},
		{"datastore redis", job.FamilyDatastore, `{"engine":"redis","name":"sessions"}`, ds},
		{"kubernetes", job.FamilyKubernetes, `{"name":"plat","version":"1.30","nodeGroups":[{"name":"system","instanceType":"Standard_D2s_v5","min":1,"max":3},{"name":"workers","instanceType":"Standard_D4s_v5","min":0,"max":4}]}`, k8s},
		{"kubernetes private", job.FamilyKubernetes, `{"name":"priv","privateCluster":true,"nodeGroups":[{"name":"system","instanceType":"Standard_D2s_v5","min":1,"max":2}]}`, k8s},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			cloud := azurefake.New(t)
			c, err := Open(Account{AuthMethod: AuthNone, SubscriptionID: azurefake.Subscription, Location: "westeurope", ResourceGroup: "rg-plan",
				Endpoint: cloud.URL, Transport: azurefake.Transport(cloud.URL), KeyVaultURL: testVault, Poll: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			id := "job_" + strings.NewReplacer(" ", "", "_", "").Replace(tc.name)
			// What the job refers to is made outside it, before the steps' actions are noted.
			if strings.Contains(tc.config, "$peer") {
				peer := &job.Job{ID: "job_peer", OrgID: "org_plan", SpaceID: "spc_plan", Provider: Name, Family: job.FamilyNetwork}
				var n Network
				until(t, ctx, "peer network", func() (done bool, err error) {
					n, _, done, err = clientOn(t, cloud, "rg-peer").EnsureVNet(ctx, peer, network.InfraNetwork, VNetRequest{CIDR: "10.99.0.0/16"})
					return done, err
				})
				tc.config = strings.ReplaceAll(tc.config, "$peer", n.VNetID)
			}
			j := &job.Job{ID: id, OrgID: "org_plan", SpaceID: "spc_plan", Kind: job.KindProvisioning, Family: tc.family, Provider: Name,
				Mode: job.ModeCreate, Config: json.RawMessage(tc.config), Infra: json.RawMessage(`{}`)}
			pl := tc.build(c, j)
			if err := pl.Validate(ctx, j); err != nil {
				t.Fatal(err)
			}
			steps := pl.Steps(j)
			seen := runMarked(ctx, t, cloud, j, steps)
			if len(cloud.Actions()) == 0 {
				t.Fatal("the cloud noted no action: it is not wired")
			}
			src := (&Module{}).PlanSource()
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
				for _, a := range seen[s.Name] {
					if !slices.Contains(planned[i].Operations, a) {
						missing = append(missing, fmt.Sprintf("%s: %s", s.Name, a))
					}
				}
			}
			sort.Strings(missing)
			if len(missing) > 0 {
				t.Fatalf("actions called but not in the plan:\n%s", strings.Join(slices.Compact(missing), "\n"))
			}
			// The role definition grants every action the steps were seen to call, control
			// plane and data plane, and nothing the plan does not list.
			pol, err := src.Policy(j, (&plan.Plan{Steps: planned}).Operations())
			if err != nil {
				t.Fatal(err)
			}
			if pol.Format != plan.FormatAzure {
				t.Fatalf("policy format %q", pol.Format)
			}
			var role RoleDefinition
			if err := json.Unmarshal(pol.Document, &role); err != nil {
				t.Fatal(err)
			}
			granted := append(slices.Clone(role.Actions), role.DataActions...)
			for _, a := range cloud.Actions() {
				if !slices.Contains(granted, a) {
					t.Errorf("role definition does not grant %s", a)
				}
			}
			for _, a := range granted {
				if !slices.Contains((&plan.Plan{Steps: planned}).Operations(), a) {
					t.Errorf("role definition grants %s, which no step lists", a)
				}
			}
		})
	}
}

// What a step lists follows the job's config: a NAT gateway's actions only with NAT, a
// record type's only when a record has it.
func TestStepPlanFollowsTheConfig(t *testing.T) {
	t.Parallel()
	nat := "Microsoft.Network/natGateways/write"
	for _, tc := range []struct {
		family     job.Family
		config     string
		step       string
		has, hasNo []string
	}{
		{job.FamilyNetwork, `{"cidr":"10.0.0.0/16"}`, network.StepNetwork, []string{nat, "Microsoft.Network/natGateways/join/action"}, nil},
		{job.FamilyNetwork, `{"noNAT":true}`, network.StepNetwork, []string{"Microsoft.Network/virtualNetworks/write"}, []string{nat}},
		{job.FamilyNetwork, `{"vpcID":"` + missingVNet + `"}`, network.StepNetwork, []string{"Microsoft.Network/virtualNetworks/read"},
			[]string{"Microsoft.Network/virtualNetworks/write", nat}},
		{job.FamilyNetwork, `{}`, network.StepPeering, nil, []string{"Microsoft.Network/virtualNetworks/virtualNetworkPeerings/write"}},
		{job.FamilyDNSZone, `{"domain":"a.org","records":[{"name":"a.org","type":"mx","values":["1 m.a.org"]}]}`, dnszone.StepRecords,
			[]string{"Microsoft.Network/dnsZones/MX/write"}, []string{"Microsoft.Network/dnsZones/A/write"}},
		{job.FamilyKubernetes, `{"name":"k","nodeGroups":[{"name":"system"}]}`, kubernetes.StepCluster,
			[]string{"Microsoft.ContainerService/managedClusters/write", "Microsoft.ContainerService/managedClusters/agentPools/write",
				"Microsoft.ContainerService/managedClusters/agentPools/delete"}, nil},
		{job.FamilyDatastore, `{"engine":"redis"}`, "network", nil, []string{"Microsoft.Network/virtualNetworks/write"}},
		{job.FamilyDatastore, `{"engine":"mysql"}`, "create_server", []string{"Microsoft.DBforMySQL/flexibleServers/write"},
			[]string{"Microsoft.DBforPostgreSQL/flexibleServers/write", "Microsoft.Cache/redis/write"}},
	} {
		j := &job.Job{ID: "job_cfg", Family: tc.family, Provider: Name, Mode: job.ModeCreate, Config: json.RawMessage(tc.config)}
		ops := StepPlan(j, tc.step).Operations
		for _, a := range tc.has {
			if !slices.Contains(ops, a) {
				t.Errorf("%s %s %s: %s not listed in %v", tc.family, tc.config, tc.step, a, ops)
			}
		}
		for _, a := range tc.hasNo {
			if slices.Contains(ops, a) {
				t.Errorf("%s %s %s: %s listed", tc.family, tc.config, tc.step, a)
			}
		}
	}
	adopted := &job.Job{ID: "job_ad", Family: job.FamilyDatastore, Provider: Name, Mode: job.ModeAdopt, Config: json.RawMessage(`{"engine":"postgres","host":"db.example.org"}`)}
	if s := StepPlan(adopted, "create_server"); len(s.Operations) != 0 || len(s.Resources) != 1 || s.Resources[0].Action != plan.ActionAdopt {
		t.Errorf("adopted datastore step = %+v", s)
	}
}

func TestPolicyIsARoleDefinition(t *testing.T) {
	t.Parallel()
	j := &job.Job{ID: "job_pol", Family: job.FamilyDatastore, Provider: Name}
	pol, err := PlanSource{}.Policy(j, []string{"Microsoft.Cache/redis/write", "Microsoft.KeyVault/vaults/secrets/getSecret/action",
		"Microsoft.Cache/redis/write", "Microsoft.Resources/subscriptions/resourceGroups/write"})
	if err != nil {
		t.Fatal(err)
	}
	var role RoleDefinition
	if err := json.Unmarshal(pol.Document, &role); err != nil {
		t.Fatal(err)
	}
	if pol.Format != plan.FormatAzure || role.Name != "Groundwork datastore job_pol" || !role.IsCustom ||
		!slices.Equal(role.Actions, []string{"Microsoft.Cache/redis/write", "Microsoft.Resources/subscriptions/resourceGroups/write"}) ||
		!slices.Equal(role.DataActions, []string{"Microsoft.KeyVault/vaults/secrets/getSecret/action"}) ||
		!slices.Equal(role.AssignableScopes, []string{ScopeSubscription, ScopeResourceGroup}) || role.NotActions == nil {
		t.Fatalf("role definition %s", pol.Document)
	}
	// Without a resource group to make, the group is the only scope.
	pol, _ = PlanSource{}.Policy(j, []string{"Microsoft.Cache/redis/read"})
	if err := json.Unmarshal(pol.Document, &role); err != nil || !slices.Equal(role.AssignableScopes, []string{ScopeResourceGroup}) {
		t.Fatalf("role definition %s", pol.Document)
	}
	if _, err := (PlanSource{}).Policy(j, []string{"ec2:CreateVpc"}); err == nil {
		t.Fatal("an AWS action made a role definition")
	}
}
