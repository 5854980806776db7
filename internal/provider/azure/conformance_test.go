package azure

import (
	"context"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
	"github.com/groundworkhq/groundwork/internal/provider/azure/azurefake"
	"github.com/groundworkhq/groundwork/internal/provider/drivertest"
)

// missingVNet is a well-formed virtual network id the fake subscription does not hold.
const missingVNet = "/subscriptions/" + azurefake.Subscription + "/resourceGroups/elsewhere/providers/Microsoft.Network/virtualNetworks/nope"

// The Azure module's drivers pass the conformance suite every cloud's drivers do, on the
// arm* modules' fake servers.
func TestDriverConformance(t *testing.T) {
	t.Parallel()
	opts := drivertest.Options{Timeout: time.Minute, Poll: time.Millisecond}
	t.Run("network", func(t *testing.T) {
		t.Parallel()
		drivertest.Network(t, drivertest.Harness[network.Driver, network.Config]{
			Provider: Name,
			Open: func(t *testing.T) (network.Driver, drivertest.Observer) {
				c, cloud := testClient(t)
				return NetworkDriver{C: c}, observe(cloud)
			},
			Config: network.Config{CIDR: "10.40.0.0/16"},
			Refusal: drivertest.Refusal[network.Driver]{Class: job.ClassUserAction,
				Call: func(ctx context.Context, d network.Driver, j *job.Job) error {
					_, err := d.EnsureNetwork(ctx, j, network.Config{VPCID: missingVNet})
					return err
				}},
			Options: opts,
		})
	})
	t.Run("kubernetes", func(t *testing.T) {
		t.Parallel()
		var cloud *azurefake.Cloud
		drivertest.Kubernetes(t, drivertest.Harness[kubernetes.Driver, kubernetes.Config]{
			Provider: Name,
			Open: func(t *testing.T) (kubernetes.Driver, drivertest.Observer) {
				var c *Client
				c, cloud = testClient(t)
				return KubernetesDriver{C: c}, observe(cloud)
			},
			Config: kubernetes.Config{Name: "conformance", Version: "1.30", NodeGroups: []kubernetes.NodeGroup{
				{Name: "system", InstanceType: "Standard_D2s_v5", Min: 1, Max: 2},
				{Name: "workers", InstanceType: "Standard_D4s_v5", Min: 0, Max: 3}}},
			// The suite's last check: the subscription stops taking AKS clusters (a new
			// subscription has not registered Microsoft.ContainerService), so the network and
			// roles are made, the cluster's PUT is refused, and the teardown removes them.
			Refusal: drivertest.Refusal[kubernetes.Driver]{Class: job.ClassUserAction,
				Call: func(ctx context.Context, d kubernetes.Driver, j *job.Job) error {
					cloud.Unregister("Microsoft.ContainerService")
					return ensureCluster(ctx, d, j, kubernetes.Config{Name: "refused",
						NodeGroups: []kubernetes.NodeGroup{{Name: "system", InstanceType: "Standard_D2s_v5", Min: 1, Max: 1}}})
				}},
			Options: opts,
		})
	})
}
