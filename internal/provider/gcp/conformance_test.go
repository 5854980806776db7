package gcp

import (
	"context"
	"fmt"
	"testing"
	"time"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/pipeline/dnszone"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
	"github.com/groundworkhq/groundwork/internal/pipeline/registry"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
	"github.com/groundworkhq/groundwork/internal/provider/drivertest"
	"github.com/groundworkhq/groundwork/internal/provider/gcp/gcpfake"
)

// The GCP module's drivers pass the conformance suite every cloud's drivers do, on gcpfake.
func TestDriverConformance(t *testing.T) {
	t.Parallel()
	opts := drivertest.Options{Timeout: time.Minute, Poll: time.Millisecond}
	t.Run("registry", func(t *testing.T) {
		t.Parallel()
		var cloud *gcpfake.Cloud
		drivertest.Registry(t, drivertest.Harness[registry.Driver, registry.Config]{
			Provider: Name,
			Open: func(t *testing.T) (registry.Driver, drivertest.Observer) {
				var c *Client
				c, cloud = testClient(t)
				return RegistryDriver{C: c}, observe(cloud)
			},
			Config: registry.Config{Name: "team/api", ImmutableTags: true},
			// The project has not enabled the Artifact Registry API.
			Refusal: drivertest.Refusal[registry.Driver]{Class: job.ClassUserAction,
				Call: func(ctx context.Context, d registry.Driver, j *job.Job) error {
					cloud.Disable(ServiceArtifactRegistry)
					defer cloud.Enable(ServiceArtifactRegistry)
					_, err := d.EnsureRepository(ctx, j, registry.Config{Name: "refused"})
					return err
				}},
			Options: opts,
		})
	})
	t.Run("kubernetes", func(t *testing.T) {
		t.Parallel()
		var cloud *gcpfake.Cloud
		drivertest.Kubernetes(t, drivertest.Harness[kubernetes.Driver, kubernetes.Config]{
			Provider: Name,
			Open: func(t *testing.T) (kubernetes.Driver, drivertest.Observer) {
				var c *Client
				c, cloud = testClient(t)
				return KubernetesDriver{C: c}, observe(cloud)
			},
			Config: kubernetes.Config{Name: "conformance", Version: "1.33", NodeGroups: []kubernetes.NodeGroup{
				{Name: "system", InstanceType: "e2-standard-4", Min: 1, Max: 3},
				{Name: "workers", InstanceType: "n2-standard-8", Min: 0, Max: 5}}},
			// The project has not enabled the Kubernetes Engine API: the network and the
			// nodes' account are made, the cluster's create is refused, and the teardown
			// removes what was made.
			Refusal: drivertest.Refusal[kubernetes.Driver]{Class: job.ClassUserAction,
				Call: func(ctx context.Context, d kubernetes.Driver, j *job.Job) error {
					cloud.Disable(ServiceContainer)
					defer cloud.Enable(ServiceContainer)
					err := drivertest.EnsureCluster(ctx, d, j, kubernetes.Config{Name: "refused",
						NodeGroups: []kubernetes.NodeGroup{{Name: "system", InstanceType: "e2-standard-4", Min: 1, Max: 1}}})
					if fe := fault.As(err); fe == nil || fe.Code != "ApiNotEnabled" {
						return fmt.Errorf("refusal %v, want ApiNotEnabled", err)
					}
					return err
				}},
			Options: opts,
		})
	})
	for _, mode := range []string{"fixed", "asg"} {
		t.Run("vm_pool "+mode, func(t *testing.T) {
			t.Parallel()
			drivertest.VMPool(t, drivertest.Harness[vmpool.Driver, vmpool.Config]{
				Provider: Name,
				Open: func(t *testing.T) (vmpool.Driver, drivertest.Observer) {
					c, cloud := testClient(t)
					return VMPoolDriver{C: c}, observe(cloud)
				},
				Config: vmpool.Config{Name: "conformance", InstanceType: "e2-small", Mode: mode, Min: 2, Max: 3, Desired: 2,
					CreateLoadBalancer: true, ListenerPorts: []int32{80}, HealthCheckPath: "/healthz", HealthCheckPort: 80},
				// A machine type Compute Engine does not have.
				Refusal: drivertest.Refusal[vmpool.Driver]{Class: job.ClassUserAction,
					Call: func(ctx context.Context, d vmpool.Driver, j *job.Job) error {
						n, err := d.EnsureNetwork(ctx, j, vmpool.Config{})
						for err == nil && !n.Ready {
							n, err = d.EnsureNetwork(ctx, j, vmpool.Config{})
						}
						if err != nil {
							return fmt.Errorf("network: %v", err)
						}
						_, err = d.EnsureLaunchTemplate(ctx, j, vmpool.Config{Name: "refused", InstanceType: "z9-enormous", Min: 1, Max: 1,
							HealthCheckPort: 80}, n, "")
						return err
					}},
				Options: opts,
			})
		})
	}
	t.Run("network", func(t *testing.T) {
		t.Parallel()
		drivertest.Network(t, drivertest.Harness[network.Driver, network.Config]{
			Provider: Name,
			Open: func(t *testing.T) (network.Driver, drivertest.Observer) {
				c, cloud := testClient(t)
				return NetworkDriver{C: c}, observe(cloud)
			},
			Config: network.Config{CIDR: "10.40.0.0/16"},
			// Adopting a network the project does not hold.
			Refusal: drivertest.Refusal[network.Driver]{Class: job.ClassUserAction,
				Call: func(ctx context.Context, d network.Driver, j *job.Job) error {
					_, err := d.EnsureNetwork(ctx, j, network.Config{VPCID: "projects/" + gcpfake.Project + "/global/networks/nope"})
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
			// A record for a zone that is not there.
			Refusal: drivertest.Refusal[dnszone.Driver]{Class: job.ClassUserAction,
				Call: func(ctx context.Context, d dnszone.Driver, _ *job.Job) error {
					return d.UpsertRecord(ctx, fmt.Sprintf("projects/%s/managedZones/missing", gcpfake.Project),
						dnszone.Record{Name: "a.missing.example.org", Type: "A", TTL: 60, Values: []string{"10.0.0.1"}})
				}},
			Options: opts,
		})
	})
	settings := map[ds.Engine]map[string]any{
		ds.EnginePostgres: {"instanceClass": "db-custom-2-7680", "multiAZ": true},
		ds.EngineMySQL:    {"instanceClass": "db-custom-2-7680", "multiAZ": true},
		ds.EngineRedis:    {"allocatedStorageGB": 5, "multiAZ": true},
	}
	for _, engine := range []ds.Engine{ds.EnginePostgres, ds.EngineMySQL, ds.EngineRedis} {
		t.Run("datastore "+string(engine), func(t *testing.T) {
			t.Parallel()
			drivertest.Datastore(t, drivertest.Harness[dspipe.Driver, drivertest.DatastoreRequest]{
				Provider: Name,
				Open: func(t *testing.T) (dspipe.Driver, drivertest.Observer) {
					c, cloud := testClient(t)
					return datastoreOn(c), observeDatastore(cloud)
				},
				Config: drivertest.DatastoreRequest{Engine: engine, Settings: settings[engine]},
				// A version Google does not offer.
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
