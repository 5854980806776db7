package azure

import (
	"context"
	"fmt"
	"testing"
	"time"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/job"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/pipeline/dnszone"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
	"github.com/groundworkhq/groundwork/internal/pipeline/registry"
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
					return drivertest.EnsureCluster(ctx, d, j, kubernetes.Config{Name: "refused",
						NodeGroups: []kubernetes.NodeGroup{{Name: "system", InstanceType: "Standard_D2s_v5", Min: 1, Max: 1}}})
				}},
			Options: opts,
		})
	})
	t.Run("registry", func(t *testing.T) {
		t.Parallel()
		var elsewhere RegistryDriver
		cfg := registry.Config{Name: "team/api"}
		drivertest.Registry(t, drivertest.Harness[registry.Driver, registry.Config]{
			Provider: Name,
			Open: func(t *testing.T) (registry.Driver, drivertest.Observer) {
				c, cloud := testClient(t)
				elsewhere = RegistryDriver{C: clientOn(t, cloud, "rg-elsewhere")}
				return RegistryDriver{C: c}, observe(cloud)
			},
			Config: cfg,
			// The job's registry name held by a registry in another resource group: ACR
			// names are unique across Azure, so the job cannot have it.
			Refusal: drivertest.Refusal[registry.Driver]{Class: job.ClassUserAction,
				Call: func(ctx context.Context, d registry.Driver, j *job.Job) error {
					if _, err := elsewhere.EnsureRepository(ctx, j, cfg); err != nil {
						// Unclassified (%v), so that the suite fails rather than
						// taking this error for the refusal.
						return fmt.Errorf("the registry elsewhere: %v", err)
					}
					_, err := d.EnsureRepository(ctx, j, cfg)
					if derr := elsewhere.DeleteRepository(ctx, j, cfg.Name); derr != nil {
						t.Errorf("delete the registry elsewhere: %v", derr)
					}
					return err
				}},
			Options: opts,
		})
	})
	t.Run("dns_zone", func(t *testing.T) {
		t.Parallel()
		drivertest.DNSZone(t, drivertest.Harness[dnszone.Driver, dnszone.Config]{
			Provider: Name,
			Open: func(t *testing.T) (dnszone.Driver, drivertest.Observer) {
				c, cloud := testClient(t)
				return DNSZoneDriver{C: c}, observe(cloud)
			},
			Config: dnszone.Config{Name: "conformance.example.org", Records: []dnszone.Record{
				{Name: "api.conformance.example.org", Type: "A", TTL: 300, Values: []string{"10.0.0.5"}},
				{Name: "www.conformance.example.org", Type: "CNAME", Values: []string{"api.conformance.example.org"}},
				{Name: "conformance.example.org", Type: "TXT", Values: []string{`"v=spf1 -all"`}},
			}},
			// A record for a zone that is not there, in the space's group.
			Refusal: drivertest.Refusal[dnszone.Driver]{Class: job.ClassUserAction,
				Call: func(ctx context.Context, d dnszone.Driver, _ *job.Job) error {
					rg := d.(DNSZoneDriver).C.ResourceGroup
					return d.UpsertRecord(ctx, "/subscriptions/"+azurefake.Subscription+"/resourceGroups/"+rg+"/providers/Microsoft.Network/dnszones/missing.example.org",
						dnszone.Record{Name: "a.missing.example.org", Type: "A", TTL: 60, Values: []string{"10.0.0.1"}})
				}},
			Options: opts,
		})
	})
	settings := map[ds.Engine]map[string]any{
		ds.EnginePostgres: {"instanceClass": "Standard_D2ds_v5", "multiAZ": true},
		ds.EngineMySQL:    {"instanceClass": "Standard_D2ds_v5", "multiAZ": true},
		ds.EngineRedis:    {"instanceClass": "Premium_P1", "multiAZ": true},
	}
	for _, engine := range []ds.Engine{ds.EnginePostgres, ds.EngineMySQL, ds.EngineRedis} {
		t.Run("datastore "+string(engine), func(t *testing.T) {
			t.Parallel()
			drivertest.Datastore(t, drivertest.Harness[dspipe.Driver, drivertest.DatastoreRequest]{
				Provider: Name,
				Open: func(t *testing.T) (dspipe.Driver, drivertest.Observer) {
					c, cloud := testClient(t)
					return datastoreOn(c), observe(cloud)
				},
				Config: drivertest.DatastoreRequest{Engine: engine, Settings: settings[engine]},
				// A version Azure does not offer.
				Refusal: drivertest.Refusal[dspipe.Driver]{Class: job.ClassUserAction,
					Call: func(ctx context.Context, d dspipe.Driver, _ *job.Job) error {
						_, err := d.Servers.Check(ctx, dspipe.CheckParams{Engine: engine, Version: "5.1"})
						return err
					}},
				Options: opts,
			})
		})
	}
}
