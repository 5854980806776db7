package azure

import (
	"context"
	"encoding/json"
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
			out = append(out, drivertest.Resource{Kind: r.Type, ID: r.ID, JobID: jobOf(cloud, r, all)})
		}
		return out, nil
	}
}

// jobOf is the job a resource names: in its tags, in its properties' tags (an AKS agent
// pool's), or, for a role assignment, which has no tags, in its description.
func jobOf(cloud *azurefake.Cloud, r azurefake.Resource, all []azurefake.Resource) string {
	if id := r.Tags[TagJob]; id != "" {
		return id
	}
	raw, _ := cloud.Raw(r.ID)
	var v struct {
		Properties struct {
			Tags        map[string]string `json:"tags"`
			Description string            `json:"description"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(raw, &v)
	if strings.EqualFold(r.Type, "Microsoft.Authorization/roleAssignments") {
		id, _ := strings.CutPrefix(v.Properties.Description, AssignmentDescriptionPrefix)
		return id
	}
	if id := v.Properties.Tags[TagJob]; id != "" {
		return id
	}
	parent := azurefake.Resource{}
	for _, p := range all {
		if len(p.ID) > len(parent.ID) && strings.HasPrefix(strings.ToLower(r.ID), strings.ToLower(p.ID)+"/") {
			parent = p
		}
	}
	return parent.Tags[TagJob]
}
