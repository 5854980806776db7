package gcp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/job"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/pipeline/dnszone"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
	"github.com/groundworkhq/groundwork/internal/pipeline/registry"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
	"github.com/groundworkhq/groundwork/internal/plan"
	"github.com/groundworkhq/groundwork/internal/provider"
)

// The permissions below are what each step's Do and Undo call, as gcpfake notes them in
// TestPlanListsEveryPermissionAPipelineCalls (which fails when a step calls one not listed
// here), plus the linked permissions Google checks on a call without a request of their own,
// which the fake cannot observe: a firewall rule changes its network's policy
// (compute.networks.updatePolicy); a private services access range is an internal address
// (compute.globalAddresses.createInternal, deleteInternal); an instance made from a template
// reads the template, uses its subnetwork, creates its boot disk, sets its metadata, tags and
// service account, and acts as that account (compute.instanceTemplates.useReadOnly,
// compute.subnetworks.use, compute.disks.create, compute.instances.setMetadata, setTags,
// setServiceAccount, iam.serviceAccounts.actAs); a managed instance group makes its instances
// as Google's service agent but its creator still reads the template and acts as its
// account; an unmanaged group's members are used (compute.instances.use); a backend service
// uses its health check and instance groups (compute.healthChecks.useReadOnly,
// compute.instanceGroups.use); a URL map uses its backend service, a proxy its URL map and
// certificate, a forwarding rule its proxy and its address, and sets its labels; a GKE node
// pool runs as the nodes' service account (iam.serviceAccounts.actAs). Reads of long-running
// operations that Google authorises by the caller alone are not listed.

// crud is get, create and delete of each collection ("dns.managedZones").
func crud(collections ...string) []string {
	var out []string
	for _, c := range collections {
		out = append(out, c+".get", c+".create", c+".delete")
	}
	return out
}

// computeOps are the operation reads of Compute Engine's global and regional calls.
var computeOps = []string{"compute.globalOperations.get", "compute.regionOperations.get"}

// firewallOps make and delete firewall rules, which are their network's policy.
var firewallOps = append(crud("compute.firewalls"), "compute.networks.updatePolicy")

// psaRangeOps reserve and release a private services access range: an internal global
// address.
var psaRangeOps = append(crud("compute.globalAddresses"), "compute.globalAddresses.createInternal", "compute.globalAddresses.deleteInternal")

// iamOps make a service account and bind its roles in the project's policy, and undo both.
var iamOps = append(crud("iam.serviceAccounts"), "resourcemanager.projects.getIamPolicy", "resourcemanager.projects.setIamPolicy")

// PlanAccount is what a plan needs to know of the job's space's account.
type PlanAccount struct {
	// SecretManager: the account keeps datastore passwords in the project's Secret Manager.
	SecretManager bool
}

// StepPlan is what step of j does in the project of an account like acc: the resources it
// creates or adopts and the IAM permissions its Do and Undo call. A step this module does
// not know calls nothing.
func StepPlan(j *job.Job, step string, acc PlanAccount) plan.Step {
	var res []plan.Resource
	var ops []string
	create := func(typ, n string, count int) {
		res = append(res, plan.Resource{Type: typ, Action: plan.ActionCreate, Name: n, Count: count})
	}
	adopt := func(typ, n string) { res = append(res, plan.Resource{Type: typ, Action: plan.ActionAdopt, Name: n}) }
	switch j.Family {
	case job.FamilyRegistry:
		if step == registry.StepRepository {
			create("google_artifact_registry_repository", name(j, "images"), 1)
			ops = append(ops, crud("artifactregistry.repositories")...)
		}
	case job.FamilyDNSZone:
		var c dnszone.Config
		_ = json.Unmarshal(j.Config, &c)
		switch step {
		case dnszone.StepZone:
			create("google_dns_managed_zone", name(j, "zone"), 1)
			// The teardown empties the zone of its record sets before deleting it.
			ops = append(ops, crud("dns.managedZones")...)
			ops = append(ops, "dns.resourceRecordSets.list", "dns.resourceRecordSets.delete")
		case dnszone.StepRecords:
			if len(c.Records) > 0 {
				create("google_dns_record_set", name(j, "zone"), len(c.Records))
				ops = append(ops, crud("dns.resourceRecordSets")...)
				ops = append(ops, "dns.resourceRecordSets.update")
			}
		}
	case job.FamilyNetwork:
		var c network.Config
		_ = json.Unmarshal(j.Config, &c)
		switch step {
		case network.StepNetwork:
			if c.VPCID != "" {
				// The network names its subnetworks: reading it is all adopting it takes.
				adopt("google_compute_network", c.VPCID)
				ops = append(ops, "compute.networks.get")
				break
			}
			res, ops = ownNetwork(j, res, ops, !c.NoNAT)
			res, ops = privateServicesAccess(j, res, ops)
		case network.StepPeering:
			// The undo reads the job's network for its peering whether or not the job asked
			// for one.
			ops = append(ops, "compute.networks.get")
			switch {
			case c.Peering != nil:
				create("google_compute_network_peering", name(j, rolePeering), 1)
				ops = append(ops, "compute.networks.addPeering", "compute.networks.removePeering", "compute.globalOperations.get")
			case infraHas(j, network.InfraPeering):
				// A config update took the peering away: the step removes it.
				ops = append(ops, "compute.networks.removePeering", "compute.globalOperations.get")
			}
		}
	case job.FamilyDatastore:
		res, ops = datastorePlan(j, step, acc, res, ops)
	case job.FamilyKubernetes:
		var c kubernetes.Config
		_ = json.Unmarshal(j.Config, &c)
		switch step {
		case kubernetes.StepNetwork:
			if c.VPCID != "" {
				adopt("google_compute_network", c.VPCID)
				ops = append(ops, "compute.networks.get", "compute.subnetworks.get", "compute.subnetworks.list")
				break
			}
			// The cluster's nodes have no external addresses and no NAT: the network is
			// a network and a subnetwork with the pods' and services' secondary ranges.
			create("google_compute_network", name(j, "gke"), 1)
			create("google_compute_subnetwork", name(j, "gke-nodes"), 1)
			ops = append(append(ops, crud("compute.networks", "compute.subnetworks")...), computeOps...)
		case kubernetes.StepIAM:
			create("google_service_account", name(j, roleNodes), len(accounts))
			create("google_project_iam_member", name(j, roleNodes), len(NodeRoles))
			ops = append(ops, iamOps...)
		case kubernetes.StepCluster:
			create("google_container_cluster", name(j, "gke"), 1)
			create("google_container_node_pool", name(j, "gke"), len(c.NodeGroups))
			// The node pools go in the cluster's create and run as the nodes' account.
			ops = append(ops, crud("container.clusters")...)
			ops = append(ops, "container.operations.get", "iam.serviceAccounts.actAs")
			if clusterMade(j) {
				// A cluster already made gets its pools added or their bounds changed in
				// place, which is updating the cluster.
				ops = append(ops, "container.clusters.update")
			}
		}
	case job.FamilyVMPool:
		res, ops = vmPoolPlan(j, step, res, ops)
	}
	return plan.NewStep(step, res, ops)
}

// ownNetwork is a job's own network as the network family makes it: a custom-mode network,
// its subnetwork and firewall rules, and Cloud NAT on a router when nat. The teardown reads
// the router to learn whether there is one.
// privateServicesAccess is what the network family's network adds for the datastores that go
// in it: a range and Service Networking's connection, which names the network by the
// project's number.
func privateServicesAccess(j *job.Job, res []plan.Resource, ops []string) ([]plan.Resource, []string) {
	res = append(res, plan.Resource{Type: "google_compute_global_address", Action: plan.ActionCreate, Name: name(j, rolePSARange), Count: 1},
		plan.Resource{Type: "google_service_networking_connection", Action: plan.ActionCreate, Name: psaPeering, Count: 1})
	ops = append(ops, psaRangeOps...)
	return res, append(ops, "resourcemanager.projects.get", "servicenetworking.services.get",
		"servicenetworking.services.addPeering", "servicenetworking.services.deleteConnection")
}

func ownNetwork(j *job.Job, res []plan.Resource, ops []string, nat bool) ([]plan.Resource, []string) {
	create := func(typ, n string, count int) {
		res = append(res, plan.Resource{Type: typ, Action: plan.ActionCreate, Name: n, Count: count})
	}
	create("google_compute_network", name(j, roleNetwork), 1)
	create("google_compute_subnetwork", name(j, roleSubnet), 1)
	create("google_compute_firewall", name(j, roleFWInternal), 2)
	ops = append(append(append(ops, crud("compute.networks", "compute.subnetworks")...), firewallOps...), computeOps...)
	ops = append(ops, "compute.routers.get", "compute.globalAddresses.get")
	if nat {
		create("google_compute_router", name(j, roleRouter), 1)
		create("google_compute_router_nat", name(j, roleNAT), 1)
		ops = append(ops, "compute.routers.create", "compute.routers.delete")
	}
	return res, ops
}

// clusterMade reports whether j's infra holds its cluster already.
func clusterMade(j *job.Job) bool { return infraHas(j, kubernetes.InfraCluster) }

// infraHas reports whether j's infra records key.
func infraHas(j *job.Job, key string) bool {
	var infra map[string]json.RawMessage
	_ = json.Unmarshal(j.Infra, &infra)
	c, ok := infra[key]
	return ok && string(c) != "null"
}

// datastorePlan is StepPlan of a datastore job: Cloud SQL for postgres and mysql,
// Memorystore for redis, in the job's own network with a private services access range,
// unless the config names a network. The admin password is in Secret Manager when the
// space's account keeps secrets there, else in Groundwork's own store, which calls no cloud.
func datastorePlan(j *job.Job, step string, acc PlanAccount, res []plan.Resource, ops []string) ([]plan.Resource, []string) {
	var c struct {
		Engine string `json:"engine"`
		Host   string `json:"host"`
		VPCID  string `json:"vpcID"`
	}
	_ = json.Unmarshal(j.Config, &c)
	create := func(typ, n string) {
		res = append(res, plan.Resource{Type: typ, Action: plan.ActionCreate, Name: n, Count: 1})
	}
	if j.Mode == job.ModeAdopt {
		// Adopting a datastore calls no cloud.
		if step == dspipe.StepCreateServer {
			res = append(res, plan.Resource{Type: "google_datastore_server", Action: plan.ActionAdopt, Name: c.Host})
		}
		return res, ops
	}
	e := ds.Engine(c.Engine)
	_, sql := sqlEngines[e]
	redis := e == ds.EngineRedis
	if !sql && !redis {
		return res, ops
	}
	var secret []string
	if acc.SecretManager {
		secret = []string{"secretmanager.versions.access"}
	}
	switch step {
	case dspipe.StepNetwork:
		if c.VPCID != "" {
			// The network must have private services access: its connection is read.
			res = append(res, plan.Resource{Type: "google_compute_network", Action: plan.ActionAdopt, Name: c.VPCID})
			ops = append(ops, "compute.networks.get", "resourcemanager.projects.get", "servicenetworking.services.get")
			break
		}
		// The datastore's own network is the network family's, without NAT.
		res, ops = ownNetwork(j, res, ops, false)
		res, ops = privateServicesAccess(j, res, ops)
	case dspipe.StepCredentials:
		if acc.SecretManager {
			create("google_secret_manager_secret", secretID(j.ID+"/admin"))
			ops = append(ops, crud("secretmanager.secrets")...)
			ops = append(ops, "secretmanager.versions.add")
		}
	case dspipe.StepCreateServer:
		ops = append(ops, secret...)
		if sql {
			create("google_sql_database_instance", (Placement{J: j}).sqlInstanceName(e))
			ops = append(ops, crud("cloudsql.instances")...)
			if infraHas(j, dspipe.InfraServer) {
				// The server on record is changed in place by a config update
				// (instances.patch, its operations listed first).
				ops = append(ops, "cloudsql.instances.update")
			}
		} else {
			create("google_redis_instance", name(j, roleRedis))
			ops = append(ops, crud("redis.instances")...)
			ops = append(ops, "redis.operations.get")
			if infraHas(j, dspipe.InfraServer) {
				// The server on record has its memory changed by a config update.
				ops = append(ops, "redis.instances.update")
			}
		}
	case dspipe.StepWaitReady:
		ops = append(ops, secret...)
		if sql {
			ops = append(ops, "cloudsql.instances.get")
		} else {
			// The instance's AUTH string becomes the stored admin password.
			ops = append(ops, "redis.instances.get", "redis.instances.getAuthString")
			if acc.SecretManager {
				ops = append(ops, "secretmanager.secrets.get", "secretmanager.versions.add")
			}
		}
	case dspipe.StepRegister:
		ops = append(ops, secret...)
	}
	return res, ops
}

// vmPoolPlan is StepPlan of a vm_pool job: an instance template, fixed instances or a
// regional managed instance group with its autoscaler (asg), and with createLoadBalancer a
// global external Application Load Balancer and, given a domain and zoneID, its A record.
func vmPoolPlan(j *job.Job, step string, res []plan.Resource, ops []string) ([]plan.Resource, []string) {
	c, _ := vmpool.DecodeConfig(j.Config)
	create := func(typ, n string, count int) {
		res = append(res, plan.Resource{Type: typ, Action: plan.ActionCreate, Name: n, Count: count})
	}
	asg := c.Mode == "asg"
	switch step {
	case vmpool.StepNetwork:
		if c.VPCID != "" {
			// The network must have private services access: its connection is read.
			res = append(res, plan.Resource{Type: "google_compute_network", Action: plan.ActionAdopt, Name: c.VPCID})
			ops = append(ops, "compute.networks.get", "resourcemanager.projects.get", "servicenetworking.services.get")
			break
		}
		// The pool's network has Cloud NAT, the VMs' way out, and no private services
		// access.
		res, ops = ownNetwork(j, res, ops, true)
	case vmpool.StepIAM:
		create("google_service_account", name(j, roleVMs), 1)
		create("google_project_iam_member", name(j, roleVMs), len(VMRoles))
		ops = append(ops, iamOps...)
	case vmpool.StepLaunchTemplate:
		create("google_compute_firewall", name(j, rolePoolHC), 2)
		tname, _ := templateName(j, c)
		create("google_compute_instance_template", tname, 1)
		// The teardown lists the job's templates: each template change made one.
		ops = append(append(ops, firewallOps...), crud("compute.instanceTemplates")...)
		ops = append(ops, "compute.instanceTemplates.list")
	case vmpool.StepVMs:
		// The teardown looks for both kinds of pool. (This family's calls wait for what they
		// start by reading it, not its operation.)
		ops = append(ops, "compute.instances.get", "compute.instances.list", "compute.instances.getGuestAttributes", "compute.instances.getSerialPortOutput",
			"compute.instanceGroupManagers.get",
			"compute.autoscalers.get", "compute.instanceTemplates.useReadOnly", "iam.serviceAccounts.actAs")
		if asg {
			create("google_compute_region_instance_group_manager", name(j, roleMIG), 1)
			create("google_compute_region_autoscaler", name(j, roleMIG), 1)
			ops = append(ops, "compute.instanceGroupManagers.create", "compute.instanceGroupManagers.delete",
				"compute.autoscalers.create", "compute.autoscalers.delete")
		} else {
			create("google_compute_instance_from_template", name(j, roleVMs), int(c.Desired))
			ops = append(ops, "compute.instances.create", "compute.instances.delete", "compute.disks.create", "compute.subnetworks.use",
				"compute.instances.setMetadata", "compute.instances.setTags", "compute.instances.setServiceAccount")
		}
	case vmpool.StepLoadBalancer:
		create("google_compute_global_address", name(j, roleLBIP), 1)
		ops = append(ops, crud("compute.globalAddresses")...)
	case vmpool.StepTargetGroup:
		create("google_compute_health_check", name(j, roleHealth), 1)
		create("google_compute_backend_service", name(j, roleBackend), 1)
		ops = append(append(ops, crud("compute.healthChecks", "compute.backendServices")...), "compute.backendServices.update",
			"compute.healthChecks.useReadOnly", "compute.instanceGroups.use")
		if !asg {
			// A fixed pool's instances are put in an unmanaged instance group, the
			// backend service's backend.
			create("google_compute_instance_group", name(j, roleGroup), 1)
			ops = append(append(ops, crud("compute.instanceGroups")...), "compute.instanceGroups.update", "compute.instances.get",
				"compute.instances.use")
		}
	case vmpool.StepListeners:
		create("google_compute_url_map", name(j, roleURLMap), 1)
		// The proxies use the URL map, which uses the backend service.
		ops = append(append(ops, crud("compute.urlMaps")...), "compute.urlMaps.use", "compute.backendServices.use")
		rules := 0
		if slices.Contains(c.ListenerPorts, 80) {
			rules++
			create("google_compute_target_http_proxy", name(j, roleHTTP), 1)
			ops = append(append(ops, crud("compute.targetHttpProxies")...), "compute.targetHttpProxies.use")
		}
		if slices.Contains(c.ListenerPorts, 443) {
			rules++
			create("google_compute_target_https_proxy", name(j, roleHTTPS), 1)
			ops = append(append(ops, crud("compute.targetHttpsProxies")...), "compute.targetHttpsProxies.use", "compute.sslCertificates.get")
			if c.CertificateARN == "" {
				// Google-managed for the domain, or else self-signed.
				create("google_compute_managed_ssl_certificate", name(j, roleCert), 1)
				if c.Domain == "" {
					res[len(res)-1].Type = "google_compute_ssl_certificate"
				}
				ops = append(ops, crud("compute.sslCertificates")...)
			}
		}
		if rules > 0 {
			create("google_compute_global_forwarding_rule", name(j, roleHTTP+"-rule"), rules)
			ops = append(append(ops, crud("compute.globalForwardingRules")...), "compute.globalForwardingRules.setLabels", "compute.globalAddresses.use")
		}
	case vmpool.StepFinalize:
		ops = append(ops, vmPoolOpOps(j, c)...)
	case vmpool.StepDNSRecord:
		if c.Domain != "" && c.ZoneID != "" {
			create("google_dns_record_set", c.Domain, 1)
			ops = append(ops, crud("dns.resourceRecordSets")...)
			ops = append(ops, "dns.resourceRecordSets.update")
		}
	}
	return res, ops
}

// vmPoolOpOps are the permissions of the operation a live pool's finalize step carries out
// (its config's vmOp): a roll onto the config's template, an asg pool's resize (the
// autoscaler's bounds and CPU target, the group's size), a health check's new path; none at
// creation.
func vmPoolOpOps(j *job.Job, c vmpool.Config) []string {
	var cfg struct {
		VMOp string `json:"vmOp"`
	}
	_ = json.Unmarshal(j.Config, &cfg)
	switch cfg.VMOp {
	case vmpool.OpRoll:
		ops := []string{"compute.instanceTemplates.get", "compute.instanceTemplates.list", "compute.instanceTemplates.delete",
			"compute.instanceTemplates.useReadOnly", "iam.serviceAccounts.actAs", "compute.instances.getGuestAttributes"}
		if c.CreateLoadBalancer {
			ops = append(ops, "compute.backendServices.get")
		}
		if c.Mode == "asg" {
			// Google replaces the group's instances itself, as its service agent; the roll
			// reads the group, its autoscaler and instances once it is over.
			return append(ops, "compute.instanceGroupManagers.get", "compute.instanceGroupManagers.update", "compute.autoscalers.get",
				"compute.instances.get", "compute.instances.list")
		}
		ops = append(ops, "compute.instances.get", "compute.instances.list", "compute.instances.create", "compute.instances.delete",
			"compute.disks.create", "compute.subnetworks.use", "compute.instances.setMetadata", "compute.instances.setTags",
			"compute.instances.setServiceAccount", "compute.zoneOperations.get")
		if c.CreateLoadBalancer {
			ops = append(ops, "compute.instanceGroups.update", "compute.instances.use")
		}
		return ops
	case "health_check":
		return []string{"compute.healthChecks.get", "compute.healthChecks.update", "compute.globalOperations.get"}
	case "resize":
		return []string{"compute.autoscalers.get", "compute.autoscalers.update", "compute.instanceGroupManagers.get", "compute.instanceGroupManagers.update"}
	}
	return nil
}

// PlanSource plans the jobs of GCP spaces (plan.Source).
type PlanSource struct {
	// Account tells what a plan needs of j's space's account; nil plans for an account
	// without Secret Manager.
	Account func(ctx context.Context, j *job.Job) (PlanAccount, error)
}

var _ plan.Source = PlanSource{}

// PlanSource implements provider.PlanSources: the account is read from the module's records
// (its config, not its credentials).
func (m *Module) PlanSource() plan.Source {
	if m.o.Records == nil {
		return PlanSource{}
	}
	return PlanSource{Account: func(ctx context.Context, j *job.Job) (PlanAccount, error) {
		sp, err := m.o.Records.GetSpace(ctx, j.OrgID, j.SpaceID)
		if err != nil {
			return PlanAccount{}, provider.LookupErr("space "+j.SpaceID, err)
		}
		if sp.CloudAccountID == "" {
			return PlanAccount{}, nil
		}
		acc, err := m.o.Records.GetCloudAccount(ctx, j.OrgID, sp.CloudAccountID)
		if err != nil {
			return PlanAccount{}, provider.LookupErr("cloud account "+sp.CloudAccountID, err)
		}
		var cfg accountConfig
		if len(acc.Config) > 0 {
			_ = json.Unmarshal(acc.Config, &cfg) // unknown shapes mean "no overrides", as ClientFor reads them
		}
		return PlanAccount{SecretManager: cfg.SecretManager}, nil
	}}
}

// planned are the families with a table in StepPlan.
var planned = []job.Family{job.FamilyNetwork, job.FamilyRegistry, job.FamilyDNSZone, job.FamilyDatastore, job.FamilyKubernetes, job.FamilyVMPool}

// Knows implements plan.Source.
func (PlanSource) Knows(j *job.Job) bool { return slices.Contains(planned, j.Family) }

// Steps implements plan.Source.
func (s PlanSource) Steps(ctx context.Context, j *job.Job, names []string) ([]plan.Step, error) {
	var acc PlanAccount
	if s.Account != nil && j.Family == job.FamilyDatastore {
		var err error
		if acc, err = s.Account(ctx, j); err != nil {
			return nil, err
		}
	}
	out := make([]plan.Step, len(names))
	for i, n := range names {
		out[i] = StepPlan(j, n, acc)
	}
	return out, nil
}

// CustomRole is a GCP custom role, as gcloud iam roles create --file takes it.
type CustomRole struct {
	Title               string   `json:"title"`
	Description         string   `json:"description"`
	Stage               string   `json:"stage"`
	IncludedPermissions []string `json:"includedPermissions"`
}

// Policy implements plan.Source: a custom role holding exactly the job's permissions, to
// grant the account's principal on the space's project.
func (PlanSource) Policy(j *job.Job, operations []string) (plan.Policy, error) {
	role := CustomRole{Title: fmt.Sprintf("Groundwork %s %s", j.Family, j.ID), Stage: "GA",
		Description:         fmt.Sprintf("What Groundwork's %s job %s calls to create and tear down its resources. Grant it on the space's project.", j.Family, j.ID),
		IncludedPermissions: []string{}}
	for _, op := range plan.SortedUnique(operations) {
		if strings.Count(op, ".") < 2 || strings.ContainsAny(op, "/ ") {
			return plan.Policy{}, fmt.Errorf("operation %q is not a GCP permission", op)
		}
		role.IncludedPermissions = append(role.IncludedPermissions, op)
	}
	doc, err := json.MarshalIndent(role, "", "  ")
	if err != nil {
		return plan.Policy{}, err
	}
	return plan.Policy{Format: plan.FormatGCP, Document: doc}, nil
}
