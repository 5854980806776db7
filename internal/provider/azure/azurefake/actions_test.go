package azurefake

import (
	"net/http"
	"testing"
)

func TestActionOfARequest(t *testing.T) {
	t.Parallel()
	const sub = "/subscriptions/" + Subscription
	const rg = sub + "/resourceGroups/rg"
	for _, tc := range []struct {
		method, path string
		vault        bool
		want         string
	}{
		{http.MethodGet, rg + "/providers/Microsoft.Network/virtualNetworks/v", false, "Microsoft.Network/virtualNetworks/read"},
		{http.MethodPut, rg + "/providers/Microsoft.Network/virtualNetworks/v", false, "Microsoft.Network/virtualNetworks/write"},
		{http.MethodPatch, rg + "/providers/Microsoft.Cache/redis/r", false, "Microsoft.Cache/redis/write"},
		{http.MethodDelete, rg + "/providers/Microsoft.Network/virtualNetworks/v/virtualNetworkPeerings/p", false,
			"Microsoft.Network/virtualNetworks/virtualNetworkPeerings/delete"},
		{http.MethodGet, rg + "/providers/Microsoft.Network/virtualNetworks", false, "Microsoft.Network/virtualNetworks/read"},
		{http.MethodPost, rg + "/providers/Microsoft.ContainerService/managedClusters/c/listClusterUserCredential", false,
			"Microsoft.ContainerService/managedClusters/listClusterUserCredential/action"},
		{http.MethodPost, rg + "/providers/Microsoft.Cache/redis/r/listKeys", false, "Microsoft.Cache/redis/listKeys/action"},
		{http.MethodPut, rg + "/providers/Microsoft.Network/virtualNetworks/v/subnets/s/providers/Microsoft.Authorization/roleAssignments/a", false,
			"Microsoft.Authorization/roleAssignments/write"},
		{http.MethodPut, rg + "/providers/Microsoft.Network/dnsZones/z.org/A/api", false, "Microsoft.Network/dnsZones/A/write"},
		{http.MethodPut, sub + "/resourcegroups/rg", false, "Microsoft.Resources/subscriptions/resourceGroups/write"},
		{http.MethodHead, sub + "/resourcegroups/rg", false, "Microsoft.Resources/subscriptions/resourceGroups/read"},
		{http.MethodPost, sub + "/providers/Microsoft.ContainerService/register", false, "Microsoft.ContainerService/register/action"},
		{http.MethodGet, sub + "/providers/Microsoft.ContainerService", false, "Microsoft.Resources/subscriptions/providers/read"},
		{http.MethodGet, sub + "/providers/Microsoft.Network/locations/fake/operationStatuses/op-000001", false, ""},
		{http.MethodPut, "/secrets/job-x--admin", true, "Microsoft.KeyVault/vaults/secrets/setSecret/action"},
		{http.MethodGet, "/secrets/job-x--admin/", true, "Microsoft.KeyVault/vaults/secrets/getSecret/action"},
		{http.MethodGet, "/secrets/job-x--admin/0123", true, "Microsoft.KeyVault/vaults/secrets/getSecret/action"},
		{http.MethodDelete, "/secrets/job-x--admin", true, "Microsoft.KeyVault/vaults/secrets/delete"},
		{http.MethodDelete, "/deletedsecrets/job-x--admin", true, "Microsoft.KeyVault/vaults/secrets/purge/action"},
		{http.MethodPost, "/deletedsecrets/job-x--admin/recover", true, "Microsoft.KeyVault/vaults/secrets/recover/action"},
		{http.MethodGet, "/deletedsecrets/job-x--admin", true, "Microsoft.KeyVault/vaults/secrets/readMetadata/action"},
	} {
		if got := Action(tc.method, tc.path, tc.vault); got != tc.want {
			t.Errorf("Action(%s %s) = %q, want %q", tc.method, tc.path, got, tc.want)
		}
	}
}

func TestActionsSinceAMark(t *testing.T) {
	t.Parallel()
	c := New(t)
	get := func(path string) {
		resp, err := http.Get(c.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	rg := "/subscriptions/" + Subscription + "/resourceGroups/rg"
	get(rg)
	mark := c.Mark()
	get(rg + "/providers/Microsoft.Network/virtualNetworks/v")
	get(rg + "/providers/Microsoft.Network/virtualNetworks/w")
	if got := c.ActionsSince(mark); len(got) != 1 || got[0] != "Microsoft.Network/virtualNetworks/read" {
		t.Fatalf("actions since the mark = %v", got)
	}
	if got := c.Actions(); len(got) != 2 || got[0] != "Microsoft.Network/virtualNetworks/read" || got[1] != "Microsoft.Resources/subscriptions/resourceGroups/read" {
		t.Fatalf("actions = %v", got)
	}
}
