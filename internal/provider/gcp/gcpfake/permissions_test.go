package gcpfake_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/groundworkhq/groundwork/internal/provider/gcp/gcpfake"
)

// Each call is checked as the permission Google's reference names for it: custom verbs as
// theirs, global forwarding rules as their own collection, and a call the table does not
// know as "?", which no plan lists.
func TestPermissionOfEachCall(t *testing.T) {
	t.Parallel()
	const pr = "/compute/v1/projects/p/"
	for _, tc := range []struct {
		host, method, path, want string
	}{
		{gcpfake.HostCompute, http.MethodGet, pr + "zones/z/instances/vm-0/getGuestAttributes", "compute.instances.getGuestAttributes"},
		{gcpfake.HostCompute, http.MethodGet, pr + "zones/z/instances/vm-0/serialPort", "compute.instances.getSerialPortOutput"},
		{gcpfake.HostCompute, http.MethodGet, pr + "zones/z/instances/vm-0", "compute.instances.get"},
		{gcpfake.HostCompute, http.MethodPost, pr + "regions/r/instanceGroupManagers/mig/listManagedInstances", "compute.instanceGroupManagers.get"},
		{gcpfake.HostCompute, http.MethodPost, pr + "regions/r/instanceGroupManagers/mig/resize", "compute.instanceGroupManagers.update"},
		{gcpfake.HostCompute, http.MethodPost, pr + "regions/r/instanceGroupManagers", "compute.instanceGroupManagers.create"},
		{gcpfake.HostCompute, http.MethodPost, pr + "zones/z/instanceGroups/g/addInstances", "compute.instanceGroups.update"},
		{gcpfake.HostCompute, http.MethodPost, pr + "zones/z/instanceGroups/g/removeInstances", "compute.instanceGroups.update"},
		{gcpfake.HostCompute, http.MethodPatch, pr + "regions/r/autoscalers", "compute.autoscalers.update"},
		{gcpfake.HostCompute, http.MethodPost, pr + "global/networks/n/addPeering", "compute.networks.addPeering"},
		{gcpfake.HostCompute, http.MethodPost, pr + "global/networks/n/removePeering", "compute.networks.removePeering"},
		{gcpfake.HostCompute, http.MethodPost, pr + "global/forwardingRules", "compute.globalForwardingRules.create"},
		{gcpfake.HostCompute, http.MethodGet, pr + "global/forwardingRules/r", "compute.globalForwardingRules.get"},
		{gcpfake.HostCompute, http.MethodDelete, pr + "global/forwardingRules/r", "compute.globalForwardingRules.delete"},
		{gcpfake.HostCompute, http.MethodDelete, pr + "regions/r/forwardingRules/r", "compute.forwardingRules.delete"},
		{gcpfake.HostCompute, http.MethodPost, pr + "global/targetHttpsProxies", "compute.targetHttpsProxies.create"},
		{gcpfake.HostContainer, http.MethodPost, "/v1/projects/p/locations/l/clusters/c/nodePools/pool:setAutoscaling", "container.clusters.update"},
		{gcpfake.HostContainer, http.MethodPost, "/v1/projects/p/locations/l/clusters/c/nodePools", "container.clusters.update"},
		{gcpfake.HostContainer, http.MethodGet, "/v1/projects/p/locations/l/clusters/c/nodePools/pool", "container.clusters.get"},
		{gcpfake.HostServiceNetworking, http.MethodPost, "/v1/services/servicenetworking.googleapis.com/connections", "servicenetworking.services.addPeering"},
		{gcpfake.HostServiceNetworking, http.MethodPost, "/v1/services/servicenetworking.googleapis.com/connections/servicenetworking-googleapis-com", "servicenetworking.services.deleteConnection"},
		{gcpfake.HostServiceNetworking, http.MethodGet, "/v1/operations/op-1", ""},
		{gcpfake.HostResourceManager, http.MethodGet, "/v3/projects/p", "resourcemanager.projects.get"},
		{gcpfake.HostResourceManager, http.MethodPost, "/v3/projects/p:setIamPolicy", "resourcemanager.projects.setIamPolicy"},
		{"secretmanager.googleapis.com", http.MethodPost, "/v1/projects/p/secrets/s:addVersion", "secretmanager.versions.add"},
		{"secretmanager.googleapis.com", http.MethodGet, "/v1/projects/p/secrets/s/versions/latest:access", "secretmanager.versions.access"},
		{"iam.googleapis.com", http.MethodDelete, "/v1/projects/p/serviceAccounts/a@p.iam.gserviceaccount.com", "iam.serviceAccounts.delete"},
		{gcpfake.HostCompute, http.MethodPost, pr + "zones/z/instances/vm-0/stop", "?"},
	} {
		got := gcpfake.Permission(gcpfake.Call{Service: tc.host, Method: tc.method, Path: tc.path})
		if got != tc.want && !(tc.want == "?" && strings.HasPrefix(got, "?")) {
			t.Errorf("%s %s%s: %q, want %q", tc.method, tc.host, tc.path, got, tc.want)
		}
	}
}
