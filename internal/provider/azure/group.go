package azure

import (
	"context"
	"errors"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources"

	"github.com/groundworkhq/groundwork/internal/fault"
)

// EnsureGroup makes sure the space's resource group exists: a named existing group must be
// there (Groundwork does not make what the user said they have); the space's own is created,
// tagged with the space. No teardown of a job deletes either: the group is the space's, and
// other jobs' resources live in it.
func (c *Client) EnsureGroup(ctx context.Context, spaceID string) error {
	c.groupMu.Lock()
	defer c.groupMu.Unlock()
	if c.groupReady {
		return nil
	}
	groups, err := armresources.NewResourceGroupsClient(c.SubscriptionID, c.cred, c.opts)
	if err != nil {
		return fault.System(err)
	}
	_, err = groups.Get(ctx, c.ResourceGroup, nil)
	switch {
	case err == nil:
	case notFound(err) && c.ExistingResourceGroup:
		return fault.UserAction(fmt.Errorf("resource group %s: %w", c.ResourceGroup, err), "ResourceGroupNotFound",
			"The space's existingResourceGroup "+c.ResourceGroup+" does not exist in subscription "+c.SubscriptionID+"; create it or remove existingResourceGroup to let Groundwork make one.",
			c.PortalURL("")+"/resourceGroups")
	case notFound(err):
		_, err = groups.CreateOrUpdate(ctx, c.ResourceGroup, armresources.ResourceGroup{
			Location: to.Ptr(c.Location),
			Tags:     map[string]*string{TagSpace: to.Ptr(spaceID), TagManagedBy: to.Ptr(managedBy)},
		}, nil)
		if err != nil {
			return c.Classify(fmt.Errorf("create resource group %s: %w", c.ResourceGroup, err))
		}
	default:
		return c.Classify(fmt.Errorf("read resource group %s: %w", c.ResourceGroup, err))
	}
	c.groupReady = true
	return nil
}

// errNotOurs is a resource with the job's name that another job (or a person) made.
var errNotOurs = errors.New("a resource of that name exists and is not this job's")
