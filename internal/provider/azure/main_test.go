package azure

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/provider/azure/azurefake"
	"github.com/groundworkhq/groundwork/internal/provider/drivertest"
)

// testClient opens a client on a fresh fake subscription, with its own resource group.
func testClient(t *testing.T) (*Client, *azurefake.Cloud) {
	t.Helper()
	cloud := azurefake.New(t)
	return clientOn(t, cloud, "rg-"+strings.ToLower(strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()))), cloud
}

// clientOn opens a client on cloud, as a restarted server opens one on the same account.
func clientOn(t *testing.T, cloud *azurefake.Cloud, group string) *Client {
	t.Helper()
	c, err := Open(Account{AuthMethod: AuthNone, SubscriptionID: azurefake.Subscription, Location: "westeurope",
		ResourceGroup: group, Endpoint: cloud.URL, Transport: azurefake.Transport(cloud.URL), Poll: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// observe lists what the fake subscription holds, resource groups left out: they are the
// space's, not a job's. A child resource (a zone's record set) carries no tags of its own on
// Azure and goes with its parent, so it is reported as its parent's job's.
func observe(cloud *azurefake.Cloud) drivertest.Observer {
	return func(_ context.Context) ([]drivertest.Resource, error) {
		var out []drivertest.Resource
		all := cloud.Resources()
		for _, r := range all {
			if strings.EqualFold(r.Type, "Microsoft.Resources/resourceGroups") {
				continue
			}
			jobID := r.Tags[TagJob]
			if jobID == "" {
				for _, p := range all {
					if strings.Count(p.Type, "/") < strings.Count(r.Type, "/") && strings.HasPrefix(strings.ToLower(r.ID), strings.ToLower(p.ID)+"/") {
						jobID = p.Tags[TagJob]
					}
				}
			}
			out = append(out, drivertest.Resource{Kind: r.Type, ID: r.ID, JobID: jobID})
		}
		return out, nil
	}
}
