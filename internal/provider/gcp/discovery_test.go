package gcp

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/discovery"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/dnszone"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/provider/gcp/gcpfake"
)

// Discovery follows every page (the fake answers two items a page), marks what Groundwork
// made as managed and what a person made as not, and refuses a kind it does not know.
func TestDiscoveryListsEveryPage(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, cloud := testClient(t)
	// Three zones by hand, one by a job: two pages and a half.
	for _, n := range []string{"hand-a", "hand-b", "hand-c"} {
		cloud.Put(gcpfake.Resource{Service: gcpfake.HostDNS, Kind: "dns#managedZone", Name: "projects/" + gcpfake.Project + "/managedZones/" + n,
			Body: map[string]any{"name": n, "dnsName": n + ".example.org.", "labels": map[string]any{"team": "web"}}})
	}
	j := &job.Job{ID: "job_disc", OrgID: "org_disc", Family: job.FamilyDNSZone, Provider: Name}
	if _, err := (DNSZoneDriver{C: c}).EnsureZone(ctx, j, dnszone.Config{Name: "made.example.org"}); err != nil {
		t.Fatal(err)
	}
	// Networks by hand and by Groundwork's description.
	for i, n := range []string{"net-a", "net-b", "net-c"} {
		d := "someone's"
		if i == 0 {
			d = description(j, "network")
		}
		cloud.Put(gcpfake.Resource{Service: gcpfake.HostCompute, Kind: "compute#network", Name: "projects/" + gcpfake.Project + "/global/networks/" + n,
			Body: map[string]any{"name": n, "description": d}})
	}
	d := Discoverer{C: c}
	zones, err := d.Discover(ctx, discovery.KindDNSZones)
	if err != nil {
		t.Fatal(err)
	}
	var managed []string
	for _, z := range zones {
		if z.Managed {
			managed = append(managed, z.Name)
		}
	}
	if len(zones) != 4 || !slices.Equal(managed, []string{"made.example.org"}) {
		t.Fatalf("zones %+v; want 4, made.example.org managed", zones)
	}
	nets, err := d.Discover(ctx, discovery.KindNetworks)
	if err != nil || len(nets) != 3 || !nets[0].Managed || nets[1].Managed || nets[2].Managed {
		t.Fatalf("networks %+v %v; want net-a managed of 3", nets, err)
	}
	types, err := d.Discover(ctx, discovery.KindInstanceTypes)
	if err != nil || len(types) < 5 || !slices.ContainsFunc(types, func(it discovery.Item) bool { return it.ID == "e2-standard-4" }) {
		t.Fatalf("instance types %+v %v", types, err)
	}
	versions, err := d.Discover(ctx, discovery.KindVersions)
	if err != nil || !slices.ContainsFunc(versions, func(it discovery.Item) bool { return it.Engine == "postgres" && it.Version == "16" }) ||
		!slices.ContainsFunc(versions, func(it discovery.Item) bool { return it.Engine == "redis" && it.Version == "7.2" }) {
		t.Fatalf("versions %+v %v", versions, err)
	}
	// A cluster a job made, and one made by hand.
	cj := &job.Job{ID: "job_cl", OrgID: "org_disc", Family: job.FamilyKubernetes, Provider: Name}
	kd := KubernetesDriver{C: c}
	until(t, ctx, "cluster", func() (bool, error) {
		n, err := kd.EnsureNetwork(ctx, cj, kubernetes.Config{Name: "made"})
		if err != nil || !n.Ready {
			return false, err
		}
		r, err := kd.EnsureRoles(ctx, cj)
		if err != nil {
			return false, err
		}
		cl, err := kd.EnsureCluster(ctx, cj, kubernetes.Config{Name: "made", NodeGroups: []kubernetes.NodeGroup{{Name: "a", InstanceType: "e2-small", Min: 1, Max: 1}}}, n, r)
		return cl.Ready, err
	})
	clusters, err := d.Discover(ctx, discovery.KindClusters)
	if err != nil || len(clusters) != 1 || !clusters[0].Managed || clusters[0].Version == "" ||
		!strings.HasPrefix(clusters[0].VPCID, "projects/"+gcpfake.Project+"/global/networks/") {
		t.Fatalf("clusters %+v %v", clusters, err)
	}
	if _, err := d.Discover(ctx, "buckets"); !errors.Is(err, discovery.ErrUnknownKind) {
		t.Fatalf("unknown kind: %v", err)
	}
	cloud.Disable(ServiceCompute)
	if _, err := d.Discover(ctx, discovery.KindSubnets); err == nil {
		t.Fatal("a disabled API listed")
	}
}
