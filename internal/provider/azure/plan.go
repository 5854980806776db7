package azure

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/dnszone"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
	"github.com/groundworkhq/groundwork/internal/plan"
)

// The actions below are what each step's Do and Undo call, as noted by the azurefake cloud in
// TestPlanListsEveryActionAPipelineCalls (which fails when a step calls one not listed here),
// plus the linked access checks Azure makes without a request of their own: a subnet that
// names a network security group or a NAT gateway needs their join/action, an AKS cluster or
// a flexible server placed in a subnet needs the subnet's join/action, a cluster given a
// user-assigned identity needs its assign/action, a peering needs the local network's
// peer/action. Operation status polls are not listed (see azurefake/actions.go).

const (
	actRG         = "Microsoft.Resources/subscriptions/resourceGroups/"
	actNet        = "Microsoft.Network/"
	actSecret     = "Microsoft.KeyVault/vaults/secrets/"
	actAssignment = "Microsoft.Authorization/roleAssignments/"
)

// rwd is read, write and delete of each resource type.
func rwd(types ...string) []string {
	var out []string
	for _, t := range types {
		out = append(out, t+"/read", t+"/write", t+"/delete")
	}
	return out
}

// groupOps make sure the space's resource group exists (EnsureGroup).
var groupOps = []string{actRG + "read", actRG + "write"}

// vnetOps are EnsureVNet's and DeleteVNet's without a NAT gateway: the teardown reads the NAT
// gateway and its address to learn that there are none.
var vnetOps = append(append(slices.Clone(groupOps), rwd(actNet+"networkSecurityGroups", actNet+"virtualNetworks")...),
	actNet+"natGateways/read", actNet+"publicIPAddresses/read", actNet+"networkSecurityGroups/join/action")

// natOps are added when the network has a NAT gateway.
var natOps = append(rwd(actNet+"natGateways", actNet+"publicIPAddresses"), actNet+"natGateways/join/action", actNet+"publicIPAddresses/join/action")

// secretOps are the Key Vault data actions of the datastore's admin password, when the
// space's account names a Key Vault (without one the password stays in the server's store).
var secretOps = []string{actSecret + "setSecret/action", actSecret + "getSecret/action", actSecret + "delete", actSecret + "purge/action"}

// StepPlan is what step of j does in the subscription: the resources it creates or adopts and
// the RBAC actions (Key Vault's data actions among them) its Do and Undo call. A step this
// module does not know calls nothing.
func StepPlan(j *job.Job, step string) plan.Step {
	var res []plan.Resource
	var ops []string
	create := func(typ, n string, count int) {
		res = append(res, plan.Resource{Type: typ, Action: plan.ActionCreate, Name: n, Count: count})
	}
	adopt := func(typ, n string) { res = append(res, plan.Resource{Type: typ, Action: plan.ActionAdopt, Name: n}) }
	vnet := func(vnetID string, nat bool, subnets int) {
		if vnetID != "" {
			adopt("azure_virtual_network", vnetID)
			ops = append(ops, actNet+"virtualNetworks/read")
			return
		}
		create("azure_network_security_group", name(j, "nsg"), 1)
		create("azure_virtual_network", name(j, "vnet"), 1)
		create("azure_subnet", name(j, "vnet"), subnets)
		ops = append(ops, vnetOps...)
		if nat {
			create("azure_public_ip", name(j, "nat-ip"), 1)
			create("azure_nat_gateway", name(j, "nat"), 1)
			ops = append(ops, natOps...)
		}
	}
	switch j.Family {
	case job.FamilyNetwork:
		var c network.Config
		_ = json.Unmarshal(j.Config, &c)
		switch step {
		case network.StepNetwork:
			vnet(c.VPCID, !c.NoNAT, 2)
		case network.StepPeering:
			// The undo reads and deletes the job's peering whether or not the job asked for one.
			ops = append(ops, actNet+"virtualNetworks/virtualNetworkPeerings/read", actNet+"virtualNetworks/virtualNetworkPeerings/delete")
			if c.Peering != nil {
				create("azure_virtual_network_peering", name(j, "peering"), 1)
				ops = append(ops, rwd(actNet+"virtualNetworks/virtualNetworkPeerings")...)
				ops = append(ops, actNet+"virtualNetworks/peer/action")
			}
		}
	case job.FamilyRegistry:
		if step == "create_repository" {
			create("azure_container_registry", RegistryName(j), 1)
			ops = append(append(ops, groupOps...), rwd("Microsoft.ContainerRegistry/registries")...)
		}
	case job.FamilyDNSZone:
		var c dnszone.Config
		_ = json.Unmarshal(j.Config, &c)
		switch step {
		case dnszone.StepZone:
			create("azure_dns_zone", zoneName(firstOf(c.Domain, c.Name)), 1)
			ops = append(append(ops, groupOps...), rwd(actNet+"dnsZones")...)
		case dnszone.StepRecords:
			if len(c.Records) > 0 {
				create("azure_dns_record_set", zoneName(firstOf(c.Domain, c.Name)), len(c.Records))
			}
			for _, r := range c.Records {
				ops = append(ops, rwd(actNet+"dnsZones/"+strings.ToUpper(r.Type))...)
			}
		}
	case job.FamilyDatastore:
		var c struct {
			Engine string `json:"engine"`
			Host   string `json:"host"`
		}
		_ = json.Unmarshal(j.Config, &c)
		if j.Mode == job.ModeAdopt {
			// Adopting a datastore calls no cloud.
			if step == "create_server" {
				adopt("azure_datastore_server", c.Host)
			}
			break
		}
		es, isFlex := engines[ds.Engine(c.Engine)]
		flex := es.service
		switch step {
		case "network":
			if isFlex {
				vnet("", false, 3)
				create("azure_private_dns_zone", privateZone(j, es), 1)
				create("azure_private_dns_zone_virtual_network_link", name(j, "dns-link"), 1)
				ops = append(ops, rwd(actNet+"privateDnsZones", actNet+"privateDnsZones/virtualNetworkLinks")...)
				ops = append(ops, actNet+"privateDnsZones/join/action")
			}
		case "credentials":
			create("azure_key_vault_secret", vaultName(j.ID+"/admin"), 1)
			ops = append(ops, secretOps...)
		case "create_server":
			ops = append(append(ops, groupOps...), actSecret+"getSecret/action")
			if isFlex {
				create("azure_"+strings.ReplaceAll(c.Engine, "postgres", "postgresql")+"_flexible_server", serverName(j, es), 1)
				ops = append(ops, rwd(flex)...)
				ops = append(ops, actNet+"virtualNetworks/subnets/join/action", actNet+"privateDnsZones/join/action")
			} else if c.Engine == "redis" {
				create("azure_redis_cache", redisName(j), 1)
				ops = append(ops, rwd("Microsoft.Cache/redis")...)
			}
		case "wait_ready":
			ops = append(ops, actSecret+"getSecret/action")
			if isFlex {
				ops = append(ops, flex+"/read")
			} else if c.Engine == "redis" {
				// The cache's primary key becomes the stored admin password.
				ops = append(ops, "Microsoft.Cache/redis/read", "Microsoft.Cache/redis/listKeys/action", actSecret+"setSecret/action")
			}
		case "register":
			ops = append(ops, actSecret+"getSecret/action")
		}
	case job.FamilyKubernetes:
		var c kubernetes.Config
		_ = json.Unmarshal(j.Config, &c)
		switch step {
		case kubernetes.StepNetwork:
			vnet(c.VPCID, true, 2)
		case kubernetes.StepIAM:
			create("azure_user_assigned_identity", name(j, "identity"), 1)
			create("azure_role_assignment", "Network Contributor", 1)
			ops = append(append(append(ops, groupOps...), rwd("Microsoft.ManagedIdentity/userAssignedIdentities")...), rwd(strings.TrimSuffix(actAssignment, "/"))...)
		case kubernetes.StepCluster:
			create("azure_kubernetes_cluster", name(j, "aks"), 1)
			for _, ng := range c.NodeGroups {
				create("azure_kubernetes_cluster_node_pool", ng.Name, 1)
			}
			create("azure_role_assignment", "Azure Kubernetes Service RBAC Cluster Admin", 1)
			ops = append(append(append(ops, groupOps...), rwd("Microsoft.ContainerService/managedClusters")...), rwd(strings.TrimSuffix(actAssignment, "/"))...)
			ops = append(ops, "Microsoft.ContainerService/managedClusters/agentPools/read",
				"Microsoft.ContainerService/managedClusters/listClusterUserCredential/action",
				"Microsoft.ContainerService/managedClusters/agentPools/write", "Microsoft.ContainerService/managedClusters/agentPools/delete",
				"Microsoft.ManagedIdentity/userAssignedIdentities/assign/action", actNet+"virtualNetworks/subnets/join/action")
			// The first node group is the cluster's system pool, the others pools of their
			// own; a config update of the live cluster resizes any of them, adds pools and
			// deletes the job's pools the config no longer names, with the same role.
		}
	}
	return plan.NewStep(step, res, ops)
}

// PlanSource plans the jobs of Azure spaces (plan.Source).
type PlanSource struct{}

// PlanSource implements provider.PlanSources.
func (m *Module) PlanSource() plan.Source { return PlanSource{} }

// Knows implements plan.Source: the families with a table in StepPlan.
func (PlanSource) Knows(j *job.Job) bool {
	return slices.Contains([]job.Family{job.FamilyNetwork, job.FamilyKubernetes, job.FamilyRegistry, job.FamilyDNSZone, job.FamilyDatastore}, j.Family)
}

// Steps implements plan.Source.
func (PlanSource) Steps(_ context.Context, j *job.Job, names []string) ([]plan.Step, error) {
	out := make([]plan.Step, len(names))
	for i, n := range names {
		out[i] = StepPlan(j, n)
	}
	return out, nil
}

// RoleDefinition is an Azure custom role definition, as az role definition create takes it.
type RoleDefinition struct {
	Name             string   `json:"Name"`
	IsCustom         bool     `json:"IsCustom"`
	Description      string   `json:"Description"`
	Actions          []string `json:"Actions"`
	NotActions       []string `json:"NotActions"`
	DataActions      []string `json:"DataActions"`
	NotDataActions   []string `json:"NotDataActions"`
	AssignableScopes []string `json:"AssignableScopes"`
}

// Scope placeholders: a job names its space, not the space's subscription or resource group
// (the account's credentials and the space's existingResourceGroup say them), so the role
// definition leaves them to be filled in.
const (
	ScopeSubscription  = "/subscriptions/{subscriptionId}"
	ScopeResourceGroup = ScopeSubscription + "/resourceGroups/{resourceGroup}"
)

// Policy implements plan.Source: a custom role definition granting exactly operations, Key
// Vault's among its data actions. It is assignable at the space's resource group; at the
// subscription too when the job may create that group (a group that does not exist yet is no
// scope to assign at).
func (PlanSource) Policy(j *job.Job, operations []string) (plan.Policy, error) {
	role := RoleDefinition{Name: fmt.Sprintf("Groundwork %s %s", j.Family, j.ID), IsCustom: true,
		Description: fmt.Sprintf("What Groundwork's %s job %s calls to create and tear down its resources.", j.Family, j.ID) +
			" Assign it at the space's resource group, or at the subscription when Groundwork makes that group." +
			" Resources the job adopts outside the group (a virtual network, a Key Vault) need it assigned at their scope as well.",
		Actions: []string{}, NotActions: []string{}, DataActions: []string{}, NotDataActions: []string{},
		AssignableScopes: []string{ScopeResourceGroup}}
	for _, op := range plan.SortedUnique(operations) {
		if strings.Count(op, "/") < 2 || !strings.HasPrefix(op, "Microsoft.") {
			return plan.Policy{}, fmt.Errorf("operation %q is not an Azure action", op)
		}
		if strings.HasPrefix(op, actSecret) {
			role.DataActions = append(role.DataActions, op)
		} else {
			role.Actions = append(role.Actions, op)
		}
		if op == actRG+"write" {
			role.AssignableScopes = []string{ScopeSubscription, ScopeResourceGroup}
		}
	}
	doc, err := json.Marshal(role)
	if err != nil {
		return plan.Policy{}, fmt.Errorf("role definition: %w", err)
	}
	return plan.Policy{Format: plan.FormatAzure, Document: doc}, nil
}
