package azure

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/dns/armdns"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v7"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/discovery"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/pipeline/dnszone"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
	"github.com/groundworkhq/groundwork/internal/provider/azure/azurefake"
	"github.com/groundworkhq/groundwork/internal/store"
)

// ensureNetwork runs a network job's driver call until the network is ready, recording each
// result as the engine does.
func ensureNetwork(ctx context.Context, t *testing.T, d NetworkDriver, j *job.Job, cidr string) network.Result {
	t.Helper()
	for i := 0; ; i++ {
		res, err := d.EnsureNetwork(ctx, j, network.Config{CIDR: cidr})
		if err != nil {
			t.Fatal(err)
		}
		if res.Ready {
			return res
		}
		if i == 100 {
			t.Fatalf("network %s not ready after 100 calls", j.ID)
		}
		record(t, j, network.InfraNetwork, res)
	}
}

// pollDone waits on a long-running operation of the fake.
func pollDone[T any](ctx context.Context, t *testing.T, p *runtime.Poller[T], err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
}

func byID(items []discovery.Item) map[string]discovery.Item {
	m := map[string]discovery.Item{}
	for _, it := range items {
		m[it.ID] = it
	}
	return m
}

// A space's discovery lists, in its location only, the networks two network jobs made
// (managed) beside one made by hand (not managed), their subnets under them, every DNS zone
// of the subscription, and the AKS clusters; each listing takes more than one of the cloud's
// pages.
func TestDiscover(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	cloud := azurefake.New(t)
	m := NewModule(ModuleOptions{Records: oneSpace{endpoint: cloud.URL}, Transport: azurefake.Transport(cloud.URL), Poll: time.Millisecond})
	sp := &store.Space{ID: "spc_test", OrgID: "org_test", Provider: Name, Region: "westeurope", CloudAccountID: "acc_test"}
	l, err := m.Lister(ctx, sp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Lister(ctx, &store.Space{ID: "spc_local", OrgID: "org_test", Provider: Name}); !errors.Is(err, discovery.ErrUnsupported) {
		t.Errorf("a space with no cloud account: %v, want ErrUnsupported", err)
	}
	c, err := m.ClientFor(ctx, sp.OrgID, sp.ID)
	if err != nil {
		t.Fatal(err)
	}

	// Two networks by jobs of the space.
	ja, jb := testJob("job_disc0000a"), testJob("job_disc0000b")
	na := ensureNetwork(ctx, t, NetworkDriver{C: c}, ja, "10.50.0.0/16")
	nb := ensureNetwork(ctx, t, NetworkDriver{C: c}, jb, "10.51.0.0/16")
	subnetsA, _ := na.Data["subnets"].(map[string]string)

	// One by hand in the same location, with two address prefixes and a subnet; one in
	// another location.
	if err := cloud.CreateGroup("rg-hand", "westeurope", nil); err != nil {
		t.Fatal(err)
	}
	vnets, err := armnetwork.NewVirtualNetworksClient(azurefake.Subscription, c.Credential(), c.Options())
	if err != nil {
		t.Fatal(err)
	}
	hand := func(name, location string, prefixes ...string) string {
		var ps []*string
		for _, p := range prefixes {
			ps = append(ps, to.Ptr(p))
		}
		p, err := vnets.BeginCreateOrUpdate(ctx, "rg-hand", name, armnetwork.VirtualNetwork{Location: to.Ptr(location),
			Tags: map[string]*string{"team": to.Ptr("payments")},
			Properties: &armnetwork.VirtualNetworkPropertiesFormat{AddressSpace: &armnetwork.AddressSpace{AddressPrefixes: ps},
				Subnets: []*armnetwork.Subnet{{Name: to.Ptr("default"), Properties: &armnetwork.SubnetPropertiesFormat{AddressPrefix: ps[0]}}}}}, nil)
		pollDone(ctx, t, p, err)
		return "/subscriptions/" + azurefake.Subscription + "/resourceGroups/rg-hand/providers/Microsoft.Network/virtualNetworks/" + name
	}
	handID := hand("vnet-hand", "westeurope", "10.60.0.0/16", "10.61.0.0/16")
	awayID := hand("vnet-away", "northeurope", "10.70.0.0/16")

	// Zones: one by a DNS zone job, two by hand in another group.
	zj := testJob("job_disc0000z")
	oursZone, err := DNSZoneDriver{C: c}.EnsureZone(ctx, zj, dnszone.Config{Domain: "ours.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	zones, err := armdns.NewZonesClient(azurefake.Subscription, c.Credential(), c.Options())
	if err != nil {
		t.Fatal(err)
	}
	for _, z := range []string{"a.example.org", "b.example.org"} {
		if _, err := zones.CreateOrUpdate(ctx, "rg-hand", z, armdns.Zone{Location: to.Ptr("global")}, nil); err != nil {
			t.Fatal(err)
		}
	}

	// Clusters by hand: one tagged as a job's on the job's network, one outside Groundwork,
	// one in another location. By id, the last in the location comes on the second page.
	mcs, err := armcontainerservice.NewManagedClustersClient(azurefake.Subscription, c.Credential(), c.Options())
	if err != nil {
		t.Fatal(err)
	}
	cluster := func(rg, name, location, version, subnet string, tags map[string]*string) string {
		pool := &armcontainerservice.ManagedClusterAgentPoolProfile{Name: to.Ptr("system"), VMSize: to.Ptr("Standard_D2s_v5"),
			Count: to.Ptr[int32](1), Mode: to.Ptr(armcontainerservice.AgentPoolModeSystem)}
		if subnet != "" {
			pool.VnetSubnetID = to.Ptr(subnet)
		}
		mc := armcontainerservice.ManagedCluster{Location: to.Ptr(location), Tags: tags,
			Properties: &armcontainerservice.ManagedClusterProperties{DNSPrefix: to.Ptr(name), AgentPoolProfiles: []*armcontainerservice.ManagedClusterAgentPoolProfile{pool}}}
		if version != "" {
			mc.Properties.KubernetesVersion = to.Ptr(version)
		}
		p, err := mcs.BeginCreateOrUpdate(ctx, rg, name, mc, nil)
		pollDone(ctx, t, p, err)
		return "/subscriptions/" + azurefake.Subscription + "/resourceGroups/" + rg + "/providers/Microsoft.ContainerService/managedClusters/" + name
	}
	oursCluster := cluster(c.ResourceGroup, "aks-ours", "westeurope", "1.30.4", subnetsA[SubnetPrivate], tags(ja, "aks"))
	handCluster := cluster("rg-hand", "aks-hand", "westeurope", "", "", nil)
	awayCluster := cluster("rg-hand", "aks-away", "northeurope", "", "", nil)

	// Each listing must span pages of the cloud for the test to prove the pager is followed.
	count := map[string]int{}
	for _, r := range cloud.Resources() {
		count[strings.ToLower(r.Type)]++
	}
	for _, typ := range []string{"microsoft.network/virtualnetworks", "microsoft.network/dnszones", "microsoft.containerservice/managedclusters"} {
		if count[typ] <= azurefake.ListPageSize {
			t.Fatalf("%d of %s: one page of the cloud holds them all", count[typ], typ)
		}
	}

	list := func(kind string) map[string]discovery.Item {
		t.Helper()
		items, err := l.Discover(ctx, kind)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		got := byID(items)
		if len(got) != len(items) {
			t.Fatalf("%s: an item listed twice: %+v", kind, items)
		}
		return got
	}

	t.Run("networks", func(t *testing.T) {
		got := list(discovery.KindNetworks)
		want := map[string]struct {
			cidr    string
			managed bool
		}{na.VPCID: {"10.50.0.0/16", true}, nb.VPCID: {"10.51.0.0/16", true}, handID: {"10.60.0.0/16", false}}
		if len(got) != len(want) {
			t.Fatalf("networks = %+v; want the three in westeurope", got)
		}
		for id, w := range want {
			it, ok := got[id]
			if !ok || it.CIDR != w.cidr || it.Managed != w.managed || it.Name != id[strings.LastIndex(id, "/")+1:] {
				t.Errorf("network %s = %+v, %v; want cidr %s, managed %v", id, it, ok, w.cidr, w.managed)
			}
		}
		if got[handID].Tags["team"] != "payments" || got[na.VPCID].Tags[TagJob] != ja.ID {
			t.Errorf("tags: %v, %v", got[handID].Tags, got[na.VPCID].Tags)
		}
		if _, ok := got[awayID]; ok {
			t.Error("the network in northeurope is listed")
		}
	})
	t.Run("subnets", func(t *testing.T) {
		got := list(discovery.KindSubnets)
		if len(got) != 5 {
			t.Fatalf("subnets = %+v; want two per job's network and the hand-made one's", got)
		}
		for _, it := range got {
			want := map[string]bool{na.VPCID: true, nb.VPCID: true, handID: false}
			managed, ok := want[it.VPCID]
			if !ok || !strings.HasPrefix(it.ID, it.VPCID+"/subnets/") || it.CIDR == "" || it.Managed != managed {
				t.Errorf("subnet %+v", it)
			}
		}
		if it := got[handID+"/subnets/default"]; it.CIDR != "10.60.0.0/16" || it.Managed {
			t.Errorf("hand-made subnet = %+v", it)
		}
		if it := got[subnetsA[SubnetPrivate]]; it.CIDR != "10.50.0.0/20" || it.Name != SubnetPrivate {
			t.Errorf("job's private subnet = %+v", it)
		}
	})
	t.Run("dns-zones", func(t *testing.T) {
		got := list(discovery.KindDNSZones)
		if len(got) != 3 {
			t.Fatalf("zones = %+v; want all three", got)
		}
		if it := got[oursZone.ID]; !it.Managed || it.Name != "ours.example.com" {
			t.Errorf("job's zone = %+v", it)
		}
		for id, it := range got {
			if id != oursZone.ID && (it.Managed || !strings.HasSuffix(it.Name, ".example.org")) {
				t.Errorf("zone %+v", it)
			}
		}
	})
	t.Run("clusters", func(t *testing.T) {
		got := list(discovery.KindClusters)
		if len(got) != 2 {
			t.Fatalf("clusters = %+v; want the two in westeurope", got)
		}
		if it := got[oursCluster]; !it.Managed || it.Version != "1.30.4" || it.VPCID != na.VPCID || it.Name != "aks-ours" {
			t.Errorf("job's cluster = %+v", it)
		}
		if it := got[handCluster]; it.Managed || it.Version != azurefake.DefaultKubernetesVersion || it.VPCID != "" {
			t.Errorf("hand-made cluster = %+v", it)
		}
		if _, ok := got[awayCluster]; ok {
			t.Error("the cluster in northeurope is listed")
		}
	})
	t.Run("instance-types", func(t *testing.T) {
		got := list(discovery.KindInstanceTypes)
		if it := got["Standard_D2s_v5"]; it.Name != "Standard_D2s_v5 (2 vCPU, 8 GiB)" {
			t.Errorf("Standard_D2s_v5 = %+v", it)
		}
		// The datastore's default sizes are offered.
		for _, s := range []string{"Standard_B1ms", "Standard_D2ds_v4"} {
			if _, ok := got[s]; !ok {
				t.Errorf("%s is not listed", s)
			}
		}
	})
	t.Run("versions", func(t *testing.T) {
		got := list(discovery.KindVersions)
		want := []string{"postgres-12", "postgres-13", "postgres-14", "postgres-15", "postgres-16", "mysql-8.0", "mysql-5.7", "redis-6"}
		if len(got) != len(want) {
			t.Errorf("versions = %+v; want %v", got, want)
		}
		for _, id := range want {
			it, ok := got[id]
			if !ok {
				t.Errorf("%s is not listed", id)
				continue
			}
			// What is offered is what a datastore job on Azure may ask for.
			if _, err := (DatastoreDriver{}).Check(ctx, dspipe.CheckParams{Engine: ds.Engine(it.Engine), Version: it.Version}); err != nil {
				t.Errorf("%s is listed but refused: %v", id, err)
			}
		}
	})
	t.Run("refused", func(t *testing.T) {
		if _, err := l.Discover(ctx, "vpcs"); !errors.Is(err, discovery.ErrUnknownKind) {
			t.Errorf("unknown kind: %v", err)
		}
		cloud.Fail(http.MethodGet, "/providers/Microsoft.ContainerService/managedClusters", http.StatusForbidden, "AuthorizationFailed", "no role", 1)
		_, err := l.Discover(ctx, discovery.KindClusters)
		if fe := fault.As(err); fe.Class != job.ClassUserAction || fe.Code != "AuthorizationFailed" {
			t.Errorf("a refused listing: %v", err)
		}
	})
}
