package gcpfake

import (
	"net/http"
	"regexp"
	"slices"
)

// permission maps a request to the IAM permission Google checks for it.
type permission struct {
	host, method string
	path         *regexp.Regexp
	// perm is the permission; "" for a read of a long-running operation that the service
	// authorises by its caller alone (it lists no permission of its own).
	perm string
}

func p(host, method, path, perm string) permission {
	return permission{host: host, method: method, path: regexp.MustCompile("^" + path + "$"), perm: perm}
}

const seg = `[^/]+`

// permissions are the IAM permissions of the calls the fake serves, from each API's
// reference ("Authorization requires the following IAM permission").
var permissions = []permission{
	// Compute Engine.
	p(HostCompute, http.MethodGet, `/compute/v1/projects/`+seg+`/global/operations/`+seg, "compute.globalOperations.get"),
	p(HostCompute, http.MethodGet, `/compute/v1/projects/`+seg+`/regions/`+seg+`/operations/`+seg, "compute.regionOperations.get"),
	p(HostCompute, http.MethodGet, `/compute/v1/projects/`+seg+`/zones/`+seg+`/operations/`+seg, "compute.zoneOperations.get"),
	p(HostCompute, http.MethodPost, `/compute/v1/projects/`+seg+`/global/networks/`+seg+`/addPeering`, "compute.networks.addPeering"),
	p(HostCompute, http.MethodPost, `/compute/v1/projects/`+seg+`/global/networks/`+seg+`/removePeering`, "compute.networks.removePeering"),
	p(HostCompute, http.MethodPatch, `/compute/v1/projects/`+seg+`/global/networks/`+seg, "compute.networks.update"),
	// Custom verbs: each is checked as the permission its reference names.
	p(HostCompute, http.MethodGet, `/compute/v1/projects/`+seg+`/zones/`+seg+`/instances/`+seg+`/getGuestAttributes`, "compute.instances.getGuestAttributes"),
	p(HostCompute, http.MethodGet, `/compute/v1/projects/`+seg+`/zones/`+seg+`/instances/`+seg+`/serialPort`, "compute.instances.getSerialPortOutput"),
	p(HostCompute, http.MethodPost, `/compute/v1/projects/`+seg+`/(regions|zones)/`+seg+`/instanceGroupManagers/`+seg+`/listManagedInstances`, "compute.instanceGroupManagers.get"),
	p(HostCompute, http.MethodPost, `/compute/v1/projects/`+seg+`/(regions|zones)/`+seg+`/instanceGroupManagers/`+seg+`/resize`, "compute.instanceGroupManagers.update"),
	p(HostCompute, http.MethodPost, `/compute/v1/projects/`+seg+`/zones/`+seg+`/instanceGroups/`+seg+`/(addInstances|removeInstances)`, "compute.instanceGroups.update"),
	// Reading a backend service's health is reading the service.
	p(HostCompute, http.MethodPost, `/compute/v1/projects/`+seg+`/global/backendServices/`+seg+`/getHealth`, "compute.backendServices.get"),
	// An autoscaler's patch names it in a query parameter, not the path.
	p(HostCompute, http.MethodPatch, `/compute/v1/projects/`+seg+`/(regions|zones)/`+seg+`/autoscalers`, "compute.autoscalers.update"),
	// Global forwarding rules are a collection of their own in IAM.
	p(HostCompute, http.MethodPost, `/compute/v1/projects/`+seg+`/global/forwardingRules`, "compute.globalForwardingRules.create"),
	p(HostCompute, http.MethodGet, `/compute/v1/projects/`+seg+`/global/forwardingRules/`+seg, "compute.globalForwardingRules.get"),
	p(HostCompute, http.MethodGet, `/compute/v1/projects/`+seg+`/global/forwardingRules`, "compute.globalForwardingRules.list"),
	p(HostCompute, http.MethodDelete, `/compute/v1/projects/`+seg+`/global/forwardingRules/`+seg, "compute.globalForwardingRules.delete"),
	p(HostCompute, http.MethodPost, `/compute/v1/projects/`+seg+`/global/addresses`, "compute.globalAddresses.create"),
	p(HostCompute, http.MethodGet, `/compute/v1/projects/`+seg+`/global/addresses(/`+seg+`)?`, "compute.globalAddresses.get"),
	p(HostCompute, http.MethodDelete, `/compute/v1/projects/`+seg+`/global/addresses/`+seg, "compute.globalAddresses.delete"),
	// Compute's other collections follow one rule: compute.<collection>.<verb>.
	p(HostCompute, http.MethodPost, `/compute/v1/projects/`+seg+`/(global|regions/`+seg+`|zones/`+seg+`)/(?P<c>`+seg+`)`, "compute.$c.create"),
	p(HostCompute, http.MethodGet, `/compute/v1/projects/`+seg+`/(global|regions/`+seg+`|zones/`+seg+`)/(?P<c>`+seg+`)/`+seg, "compute.$c.get"),
	p(HostCompute, http.MethodGet, `/compute/v1/projects/`+seg+`/(global|regions/`+seg+`|zones/`+seg+`)/(?P<c>`+seg+`)`, "compute.$c.list"),
	p(HostCompute, http.MethodPatch, `/compute/v1/projects/`+seg+`/(global|regions/`+seg+`|zones/`+seg+`)/(?P<c>`+seg+`)/`+seg, "compute.$c.update"),
	p(HostCompute, http.MethodDelete, `/compute/v1/projects/`+seg+`/(global|regions/`+seg+`|zones/`+seg+`)/(?P<c>`+seg+`)/`+seg, "compute.$c.delete"),

	// Cloud DNS.
	p(HostDNS, http.MethodPost, `/dns/v1/projects/`+seg+`/managedZones`, "dns.managedZones.create"),
	p(HostDNS, http.MethodGet, `/dns/v1/projects/`+seg+`/managedZones`, "dns.managedZones.list"),
	p(HostDNS, http.MethodGet, `/dns/v1/projects/`+seg+`/managedZones/`+seg, "dns.managedZones.get"),
	p(HostDNS, http.MethodDelete, `/dns/v1/projects/`+seg+`/managedZones/`+seg, "dns.managedZones.delete"),
	p(HostDNS, http.MethodPost, `/dns/v1/projects/`+seg+`/managedZones/`+seg+`/rrsets`, "dns.resourceRecordSets.create"),
	p(HostDNS, http.MethodGet, `/dns/v1/projects/`+seg+`/managedZones/`+seg+`/rrsets`, "dns.resourceRecordSets.list"),
	p(HostDNS, http.MethodGet, `/dns/v1/projects/`+seg+`/managedZones/`+seg+`/rrsets/`+seg+`/`+seg, "dns.resourceRecordSets.get"),
	p(HostDNS, http.MethodPatch, `/dns/v1/projects/`+seg+`/managedZones/`+seg+`/rrsets/`+seg+`/`+seg, "dns.resourceRecordSets.update"),
	p(HostDNS, http.MethodDelete, `/dns/v1/projects/`+seg+`/managedZones/`+seg+`/rrsets/`+seg+`/`+seg, "dns.resourceRecordSets.delete"),

	// Artifact Registry.
	p(HostArtifactRegistry, http.MethodPost, `/v1/projects/`+seg+`/locations/`+seg+`/repositories`, "artifactregistry.repositories.create"),
	p(HostArtifactRegistry, http.MethodGet, `/v1/projects/`+seg+`/locations/`+seg+`/repositories`, "artifactregistry.repositories.list"),
	p(HostArtifactRegistry, http.MethodGet, `/v1/projects/`+seg+`/locations/`+seg+`/repositories/`+seg, "artifactregistry.repositories.get"),
	p(HostArtifactRegistry, http.MethodDelete, `/v1/projects/`+seg+`/locations/`+seg+`/repositories/`+seg, "artifactregistry.repositories.delete"),
	p(HostArtifactRegistry, http.MethodGet, `/v1/projects/`+seg+`/locations/`+seg+`/operations/`+seg, ""),

	// Cloud SQL Admin: reading an operation is authorised as reading its instance.
	p("sqladmin.googleapis.com", http.MethodPost, `/v1/projects/`+seg+`/instances`, "cloudsql.instances.create"),
	p("sqladmin.googleapis.com", http.MethodGet, `/v1/projects/`+seg+`/instances`, "cloudsql.instances.list"),
	p("sqladmin.googleapis.com", http.MethodGet, `/v1/projects/`+seg+`/instances/`+seg, "cloudsql.instances.get"),
	p("sqladmin.googleapis.com", http.MethodPatch, `/v1/projects/`+seg+`/instances/`+seg, "cloudsql.instances.update"),
	p("sqladmin.googleapis.com", http.MethodDelete, `/v1/projects/`+seg+`/instances/`+seg, "cloudsql.instances.delete"),
	p("sqladmin.googleapis.com", http.MethodGet, `/v1/projects/`+seg+`/operations/`+seg, "cloudsql.instances.get"),
	p("sqladmin.googleapis.com", http.MethodGet, `/v1/projects/`+seg+`/operations`, "cloudsql.instances.get"),
	p("sqladmin.googleapis.com", http.MethodPost, `/v1/projects/`+seg+`/instances/`+seg+`/users`, "cloudsql.users.create"),
	p("sqladmin.googleapis.com", http.MethodPut, `/v1/projects/`+seg+`/instances/`+seg+`/users`, "cloudsql.users.update"),
	p("sqladmin.googleapis.com", http.MethodGet, `/v1/projects/`+seg+`/instances/`+seg+`/users(/`+seg+`)?`, "cloudsql.users.list"),
	p("sqladmin.googleapis.com", http.MethodDelete, `/v1/projects/`+seg+`/instances/`+seg+`/users`, "cloudsql.users.delete"),

	// Memorystore for Redis.
	p("redis.googleapis.com", http.MethodPost, `/v1/projects/`+seg+`/locations/`+seg+`/instances`, "redis.instances.create"),
	p("redis.googleapis.com", http.MethodGet, `/v1/projects/`+seg+`/locations/`+seg+`/instances`, "redis.instances.list"),
	p("redis.googleapis.com", http.MethodGet, `/v1/projects/`+seg+`/locations/`+seg+`/instances/`+seg+`/authString`, "redis.instances.getAuthString"),
	p("redis.googleapis.com", http.MethodGet, `/v1/projects/`+seg+`/locations/`+seg+`/instances/`+seg, "redis.instances.get"),
	p("redis.googleapis.com", http.MethodPatch, `/v1/projects/`+seg+`/locations/`+seg+`/instances/`+seg, "redis.instances.update"),
	p("redis.googleapis.com", http.MethodDelete, `/v1/projects/`+seg+`/locations/`+seg+`/instances/`+seg, "redis.instances.delete"),
	p("redis.googleapis.com", http.MethodGet, `/v1/projects/`+seg+`/locations/`+seg+`/operations/`+seg, "redis.operations.get"),

	// Secret Manager.
	p("secretmanager.googleapis.com", http.MethodPost, `/v1/projects/`+seg+`/secrets`, "secretmanager.secrets.create"),
	p("secretmanager.googleapis.com", http.MethodPost, `/v1/projects/`+seg+`/secrets/`+seg+`:addVersion`, "secretmanager.versions.add"),
	p("secretmanager.googleapis.com", http.MethodGet, `/v1/projects/`+seg+`/secrets/`+seg+`/versions/`+seg+`:access`, "secretmanager.versions.access"),
	p("secretmanager.googleapis.com", http.MethodGet, `/v1/projects/`+seg+`/secrets/`+seg, "secretmanager.secrets.get"),
	p("secretmanager.googleapis.com", http.MethodDelete, `/v1/projects/`+seg+`/secrets/`+seg, "secretmanager.secrets.delete"),

	// Service Networking (private services access).
	p("servicenetworking.googleapis.com", http.MethodPost, `/v1/services/`+seg+`/connections`, "servicenetworking.services.addPeering"),
	p("servicenetworking.googleapis.com", http.MethodGet, `/v1/services/`+seg+`/connections`, "servicenetworking.services.get"),
	p("servicenetworking.googleapis.com", http.MethodPatch, `/v1/services/`+seg+`/connections/`+seg, "servicenetworking.services.addPeering"),
	// connections.deleteConnection is a POST on the connection's name, with no verb.
	p("servicenetworking.googleapis.com", http.MethodPost, `/v1/services/`+seg+`/connections/`+seg, "servicenetworking.services.deleteConnection"),
	p("servicenetworking.googleapis.com", http.MethodGet, `/v1/operations/`+seg, ""),

	// Kubernetes Engine: node pools are the cluster's, so changing them is updating it.
	p("container.googleapis.com", http.MethodPost, `/v1/projects/`+seg+`/locations/`+seg+`/clusters`, "container.clusters.create"),
	p("container.googleapis.com", http.MethodGet, `/v1/projects/`+seg+`/locations/`+seg+`/clusters`, "container.clusters.list"),
	p("container.googleapis.com", http.MethodGet, `/v1/projects/`+seg+`/locations/`+seg+`/clusters/`+seg, "container.clusters.get"),
	p("container.googleapis.com", http.MethodDelete, `/v1/projects/`+seg+`/locations/`+seg+`/clusters/`+seg, "container.clusters.delete"),
	p("container.googleapis.com", http.MethodPut, `/v1/projects/`+seg+`/locations/`+seg+`/clusters/`+seg, "container.clusters.update"),
	p("container.googleapis.com", http.MethodPost, `/v1/projects/`+seg+`/locations/`+seg+`/clusters/`+seg+`/nodePools`, "container.clusters.update"),
	p("container.googleapis.com", http.MethodGet, `/v1/projects/`+seg+`/locations/`+seg+`/clusters/`+seg+`/nodePools(/`+seg+`)?`, "container.clusters.get"),
	p("container.googleapis.com", http.MethodDelete, `/v1/projects/`+seg+`/locations/`+seg+`/clusters/`+seg+`/nodePools/`+seg, "container.clusters.update"),
	p("container.googleapis.com", http.MethodPost, `/v1/projects/`+seg+`/locations/`+seg+`/clusters/`+seg+`/nodePools/`+seg+`:(setAutoscaling|setSize|setManagement|update)`, "container.clusters.update"),
	p("container.googleapis.com", http.MethodPut, `/v1/projects/`+seg+`/locations/`+seg+`/clusters/`+seg+`/nodePools/`+seg, "container.clusters.update"),
	p("container.googleapis.com", http.MethodGet, `/v1/projects/`+seg+`/locations/`+seg+`/operations/`+seg, "container.operations.get"),

	// IAM Credentials: minting a service account's token is acting as it.
	p(HostIAMCredentials, http.MethodPost, `/v1/projects/-/serviceAccounts/`+seg+`:generateAccessToken`, "iam.serviceAccounts.getAccessToken"),

	// IAM and the project's policy.
	p("iam.googleapis.com", http.MethodPost, `/v1/projects/`+seg+`/serviceAccounts`, "iam.serviceAccounts.create"),
	p("iam.googleapis.com", http.MethodGet, `/v1/projects/`+seg+`/serviceAccounts`, "iam.serviceAccounts.list"),
	p("iam.googleapis.com", http.MethodGet, `/v1/projects/`+seg+`/serviceAccounts/`+seg, "iam.serviceAccounts.get"),
	p("iam.googleapis.com", http.MethodDelete, `/v1/projects/`+seg+`/serviceAccounts/`+seg, "iam.serviceAccounts.delete"),
	p("cloudresourcemanager.googleapis.com", http.MethodGet, `/v3/projects/`+seg, "resourcemanager.projects.get"),
	p("cloudresourcemanager.googleapis.com", http.MethodPost, `/v3/projects/`+seg+`:getIamPolicy`, "resourcemanager.projects.getIamPolicy"),
	p("cloudresourcemanager.googleapis.com", http.MethodPost, `/v3/projects/`+seg+`:setIamPolicy`, "resourcemanager.projects.setIamPolicy"),
}

// Permission is the IAM permission Google checks for call: "" for an operation read the
// service authorises by its caller alone, and "?<method> <path>" for a call this table does
// not know, so that a test comparing permissions fails on it rather than passing it by.
func Permission(call Call) string {
	for _, pm := range permissions {
		if pm.host != call.Service || pm.method != call.Method {
			continue
		}
		m := pm.path.FindStringSubmatchIndex(call.Path)
		if m == nil {
			continue
		}
		return string(pm.path.ExpandString(nil, pm.perm, call.Path, m))
	}
	return "?" + call.Method + " " + call.Service + call.Path
}

// Mark is where the calls answered so far end: PermissionsSince(Mark()) are the permissions
// of the calls that come after.
func (c *Cloud) Mark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls)
}

// PermissionsSince are the permissions of the calls answered after mark, each once, sorted;
// operation reads that need none are left out.
func (c *Cloud) PermissionsSince(mark int) []string {
	c.mu.Lock()
	calls := slices.Clone(c.calls[min(mark, len(c.calls)):])
	c.mu.Unlock()
	var out []string
	for _, call := range calls {
		if pm := Permission(call); pm != "" {
			out = append(out, pm)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
