package gcp

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
	"github.com/groundworkhq/groundwork/internal/provider/gcp/gcpfake"
)

func networkJob(t *testing.T, id string, cfg network.Config) *job.Job {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &job.Job{ID: id, OrgID: "org_net", Family: job.FamilyNetwork, Provider: Name, Config: raw}
}

// record keeps a result on the job as the engine does with a step's result.
func record(t *testing.T, j *job.Job, r network.Result) {
	t.Helper()
	raw, err := json.Marshal(map[string]any{network.InfraNetwork: r})
	if err != nil {
		t.Fatal(err)
	}
	j.Infra = raw
}

// eventually calls f until it reports done; transient errors are retried, as the engine does.
func eventually(t *testing.T, what string, f func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		done, err := f()
		if err != nil && fault.ClassOf(err) != job.ClassTransient {
			t.Fatalf("%s: %v", what, err)
		}
		if err == nil && done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not done in time (last error %v)", what, err)
		}
		time.Sleep(time.Millisecond)
	}
}

func ensureReady(t *testing.T, d NetworkDriver, j *job.Job, cfg network.Config) network.Result {
	t.Helper()
	var res network.Result
	eventually(t, "ensure network", func() (bool, error) {
		r, err := d.EnsureNetwork(context.Background(), j, cfg)
		if err == nil {
			record(t, j, r)
			res = r
		}
		return r.Ready, err
	})
	return res
}

func deleteAll(t *testing.T, d NetworkDriver, j *job.Job) {
	t.Helper()
	eventually(t, "delete network", func() (bool, error) { return d.DeleteNetwork(context.Background(), j) })
}

// kinds counts the fake project's resources by kind.
func kinds(cloud *gcpfake.Cloud) map[string]int {
	out := map[string]int{}
	for _, r := range made(cloud) {
		out[r.Kind]++
	}
	return out
}

func TestNetworkMakesTheJobsNetwork(t *testing.T) {
	t.Parallel()
	c, cloud := testClient(t)
	d := NetworkDriver{C: c}
	j := networkJob(t, "job_netfull01", network.Config{CIDR: "10.20.0.0/16"})
	res := ensureReady(t, d, j, network.Config{CIDR: "10.20.0.0/16"})

	want := map[string]int{"compute#network": 1, "compute#subnetwork": 1, "compute#router": 1, "compute#firewall": 2,
		"compute#address": 1, gcpfake.KindConnection: 1}
	if got := kinds(cloud); !mapsEqual(got, want) {
		t.Fatalf("resources %v, want %v", got, want)
	}
	if res.VPCID != "projects/"+gcpfake.Project+"/global/networks/"+name(j, roleNetwork) {
		t.Errorf("VPCID = %q", res.VPCID)
	}
	ids, _ := res.Data["subnetIDs"].([]any)
	if len(ids) != 1 || ids[0] != "projects/"+gcpfake.Project+"/regions/europe-west1/subnetworks/"+name(j, roleSubnet) {
		t.Errorf("subnetIDs = %v", res.Data["subnetIDs"])
	}
	net, _ := cloud.Lookup(gcpfake.HostCompute, res.VPCID)
	if net.Body["autoCreateSubnetworks"] != false {
		t.Errorf("network is not in custom mode: %v", net.Body)
	}
	sub, _ := cloud.Lookup(gcpfake.HostCompute, ids[0].(string))
	if sub.Body["ipCidrRange"] != "10.20.0.0/17" || sub.Body["privateIpGoogleAccess"] != true {
		t.Errorf("subnet %v", sub.Body)
	}
	router, _ := cloud.Lookup(gcpfake.HostCompute, "projects/"+gcpfake.Project+"/regions/europe-west1/routers/"+name(j, roleRouter))
	nats, _ := router.Body["nats"].([]any)
	if len(nats) != 1 || nats[0].(map[string]any)["sourceSubnetworkIpRangesToNat"] != "ALL_SUBNETWORKS_ALL_IP_RANGES" {
		t.Errorf("router nats %v", router.Body["nats"])
	}
	var sources []string
	for _, r := range made(cloud) {
		if r.Kind == "compute#firewall" {
			for _, s := range r.Body["sourceRanges"].([]any) {
				sources = append(sources, s.(string))
			}
		}
	}
	slices.Sort(sources)
	if want := []string{"10.20.0.0/16", "130.211.0.0/22", "35.191.0.0/16"}; !slices.Equal(sources, want) {
		t.Errorf("firewall sources %v, want %v", sources, want)
	}
	if !hasPeering(cloud, res.VPCID, gcpfake.PSAPeering, gcpfake.PeeringActive) {
		t.Error("private services access did not peer the network")
	}

	deleteAll(t, d, j)
	if left := made(cloud); len(left) != 0 {
		t.Fatalf("left after delete: %v", left)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func hasPeering(cloud *gcpfake.Cloud, networkID, peering, state string) bool {
	n, ok := cloud.Lookup(gcpfake.HostCompute, networkID)
	if !ok {
		return false
	}
	for _, p := range gcpfake.Peerings(n) {
		if p["name"] == peering {
			return p["state"] == state
		}
	}
	return false
}

// A crash between an insert and the checkpoint of its operation loses the operation's
// name; the next call re-sends the insert with the same requestId and gets the same
// operation back, and nothing is made twice.
func TestNetworkCrashBeforeCheckpointMakesOneOfEach(t *testing.T) {
	t.Parallel()
	c, cloud := testClient(t)
	d := NetworkDriver{C: c}
	cfg := network.Config{}
	j := networkJob(t, "job_netcrash1", cfg)
	ctx := context.Background()

	first, err := d.EnsureNetwork(ctx, j, cfg)
	if err != nil {
		t.Fatal(err)
	}
	op := first.Data["ops"].(Ops)["create network"]
	if first.Ready || op == "" {
		t.Fatalf("first call: ready %v, op %q", first.Ready, op)
	}
	// The result is lost: j.Infra stays empty.
	again, err := d.EnsureNetwork(ctx, j, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Data["ops"].(Ops)["create network"]; got != op {
		t.Fatalf("the re-sent insert answered operation %q, want the first call's %q", got, op)
	}
	// Recorded from here on, the operation is polled instead of re-sent.
	record(t, j, again)
	before := cloud.Mutations(gcpfake.HostCompute, "/global/networks")
	if _, err := d.EnsureNetwork(ctx, j, cfg); err != nil {
		t.Fatal(err)
	}
	if after := cloud.Mutations(gcpfake.HostCompute, "/global/networks"); after != before {
		t.Fatalf("a call with the operation on record sent %d more network mutations", after-before)
	}
	// Every later call loses its result too, and it all still ends as one of each.
	j.Infra = nil
	eventually(t, "ensure without checkpoints", func() (bool, error) {
		r, err := d.EnsureNetwork(ctx, j, cfg)
		return r.Ready, err
	})
	want := map[string]int{"compute#network": 1, "compute#subnetwork": 1, "compute#router": 1, "compute#firewall": 2,
		"compute#address": 1, gcpfake.KindConnection: 1}
	if got := kinds(cloud); !mapsEqual(got, want) {
		t.Fatalf("resources %v, want %v", got, want)
	}
	deleteAll(t, d, j)
}

func TestNetworkNoNATMakesNoRouter(t *testing.T) {
	t.Parallel()
	c, cloud := testClient(t)
	d := NetworkDriver{C: c}
	cfg := network.Config{NoNAT: true}
	j := networkJob(t, "job_netnonat1", cfg)
	res := ensureReady(t, d, j, cfg)
	if n := kinds(cloud)["compute#router"]; n != 0 {
		t.Fatalf("%d routers with noNAT", n)
	}
	if cloud.Mutations(gcpfake.HostCompute, "/routers") != 0 {
		t.Fatal("a router call was made with noNAT")
	}
	if _, ok := res.Data["routerID"]; ok {
		t.Errorf("result names a router: %v", res.Data)
	}
	if kinds(cloud)["compute#subnetwork"] != 1 {
		t.Fatalf("resources %v", kinds(cloud))
	}
	deleteAll(t, d, j)
}

// Google refuses to delete a network something still uses; the delete is retried (a
// transient fault) and finishes once that thing is gone.
func TestNetworkDeleteRefusedWhileInUseIsRetried(t *testing.T) {
	t.Parallel()
	c, cloud := testClient(t)
	d := NetworkDriver{C: c}
	cfg := network.Config{NoNAT: true}
	j := networkJob(t, "job_netinuse1", cfg)
	res := ensureReady(t, d, j, cfg)
	// A firewall rule the user added to the job's network.
	userRule := "projects/" + gcpfake.Project + "/global/firewalls/user-ssh"
	cloud.Put(gcpfake.Resource{Service: gcpfake.HostCompute, Kind: "compute#firewall", Name: userRule,
		Body: map[string]any{"name": "user-ssh", "network": gcpfake.SelfLinkBase + res.VPCID, "description": "the user's"}})

	ctx := context.Background()
	var refused error
	deadline := time.Now().Add(30 * time.Second)
	for refused == nil {
		done, err := d.DeleteNetwork(ctx, j)
		switch {
		case err != nil:
			refused = err
		case done:
			t.Fatal("the network was deleted while a rule used it")
		case time.Now().After(deadline):
			t.Fatal("the delete was never refused")
		}
	}
	if fault.ClassOf(refused) != job.ClassTransient {
		t.Fatalf("in-use refusal class %s, want transient: %v", fault.ClassOf(refused), refused)
	}
	if _, ok := cloud.Lookup(gcpfake.HostCompute, res.VPCID); !ok {
		t.Fatal("the network is gone")
	}
	if _, ok := cloud.Lookup(gcpfake.HostCompute, userRule); !ok {
		t.Fatal("the user's rule was deleted")
	}
	cloud.Remove(gcpfake.HostCompute, userRule)
	deleteAll(t, d, j)
	if _, ok := cloud.Lookup(gcpfake.HostCompute, res.VPCID); ok {
		t.Fatal("the network is still there")
	}
}

func TestNetworkPeeringGoesActiveAndIsRemoved(t *testing.T) {
	t.Parallel()
	c, cloud := testClient(t)
	d := NetworkDriver{C: c}
	ctx := context.Background()
	a := networkJob(t, "job_netpeera1", network.Config{CIDR: "10.1.0.0/16", NoNAT: true})
	b := networkJob(t, "job_netpeerb1", network.Config{CIDR: "10.2.0.0/16", NoNAT: true})
	na := ensureReady(t, d, a, network.Config{CIDR: "10.1.0.0/16", NoNAT: true})
	nb := ensureReady(t, d, b, network.Config{CIDR: "10.2.0.0/16", NoNAT: true})

	pa, err := d.EnsurePeering(ctx, a, na.VPCID, network.Peering{PeerVPCID: nb.VPCID})
	if err != nil {
		t.Fatal(err)
	}
	if !hasPeering(cloud, na.VPCID, pa, gcpfake.PeeringInactive) {
		t.Fatal("a one-sided peering is not INACTIVE")
	}
	// The peer's side, named by self link.
	pb, err := d.EnsurePeering(ctx, b, nb.VPCID, network.Peering{PeerVPCID: gcpfake.SelfLinkBase + na.VPCID})
	if err != nil {
		t.Fatal(err)
	}
	if !hasPeering(cloud, na.VPCID, pa, gcpfake.PeeringActive) || !hasPeering(cloud, nb.VPCID, pb, gcpfake.PeeringActive) {
		t.Fatal("peered both ways, the peerings are not ACTIVE")
	}
	// Ensured again: the same peering, no second addPeering.
	before := cloud.Mutations(gcpfake.HostCompute, "/addPeering")
	if again, err := d.EnsurePeering(ctx, a, na.VPCID, network.Peering{PeerVPCID: nb.VPCID}); err != nil || again != pa {
		t.Fatalf("ensure again = %q, %v", again, err)
	}
	if cloud.Mutations(gcpfake.HostCompute, "/addPeering") != before {
		t.Fatal("ensure again sent addPeering")
	}

	if err := d.DeletePeering(ctx, a); err != nil {
		t.Fatal(err)
	}
	if hasPeering(cloud, na.VPCID, pa, gcpfake.PeeringInactive) || hasPeering(cloud, na.VPCID, pa, gcpfake.PeeringActive) {
		t.Fatal("the peering is still on the network")
	}
	if !hasPeering(cloud, nb.VPCID, pb, gcpfake.PeeringInactive) {
		t.Fatal("the peer's side did not go INACTIVE")
	}
	if err := d.DeletePeering(ctx, a); err != nil {
		t.Fatalf("delete of a peering that is gone: %v", err)
	}
	if err := d.DeletePeering(ctx, b); err != nil {
		t.Fatal(err)
	}
	deleteAll(t, d, a)
	deleteAll(t, d, b)
	if err := d.DeletePeering(ctx, a); err != nil {
		t.Fatalf("delete of a peering whose network is gone: %v", err)
	}
}

func TestNetworkPeeringRefusals(t *testing.T) {
	t.Parallel()
	c, _ := testClient(t)
	d := NetworkDriver{C: c}
	cfg := network.Config{NoNAT: true}
	j := networkJob(t, "job_netpeerx1", cfg)
	n := ensureReady(t, d, j, cfg)
	for _, tc := range []struct{ name, peer, code string }{
		{"missing network", "projects/" + gcpfake.Project + "/global/networks/nope", "PeerNotFound"},
		{"not a network", "vpc-123", "InvalidNetworkID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := d.EnsurePeering(context.Background(), j, n.VPCID, network.Peering{PeerVPCID: tc.peer})
			var fe *fault.Error
			if !errors.As(err, &fe) || fe.Class != job.ClassUserAction || fe.Code != tc.code {
				t.Fatalf("err %v, want user_action %s", err, tc.code)
			}
		})
	}
}

func TestNetworkAdoptsAndNeverDeletes(t *testing.T) {
	t.Parallel()
	c, cloud := testClient(t)
	d := NetworkDriver{C: c}
	// The user's network, made by another job of the same project.
	owner := networkJob(t, "job_netowner1", network.Config{NoNAT: true})
	theirs := ensureReady(t, d, owner, network.Config{NoNAT: true})
	subnet := theirs.Data["subnetIDs"].([]any)[0].(string)
	// The fake's networks list their subnets as Google's do once they have some.
	cloud.Update(gcpfake.HostCompute, theirs.VPCID, func(r *gcpfake.Resource) {
		r.Body["subnetworks"] = []any{gcpfake.SelfLinkBase + subnet}
	})
	before := len(made(cloud))

	cfg := network.Config{VPCID: theirs.VPCID, SubnetIDs: []string{subnet}}
	j := networkJob(t, "job_netadopt1", cfg)
	res, err := d.EnsureNetwork(context.Background(), j, cfg)
	if err != nil || !res.Ready || res.VPCID != theirs.VPCID || res.Data["adopted"] != true {
		t.Fatalf("adopt = %+v, %v", res, err)
	}
	bad := network.Config{VPCID: theirs.VPCID, SubnetIDs: []string{"projects/" + gcpfake.Project + "/regions/europe-west1/subnetworks/other"}}
	if _, err := d.EnsureNetwork(context.Background(), j, bad); fault.ClassOf(err) != job.ClassUserAction {
		t.Fatalf("a subnet not in the network: %v", err)
	}
	deleteAll(t, d, j)
	if err := d.DeletePeering(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	if after := len(made(cloud)); after != before {
		t.Fatalf("deleting the adopting job changed the project: %d resources, had %d", after, before)
	}
	deleteAll(t, d, owner)
}

// A job's network deleted (an undo) and made again: Google still answers the first round's
// requestIds with their finished operations, and those must not pass for the new round's.
func TestNetworkMadeAgainAfterDelete(t *testing.T) {
	t.Parallel()
	c, cloud := testClient(t)
	d := NetworkDriver{C: c}
	ctx := context.Background()
	cfg := network.Config{}
	j := networkJob(t, "job_netagain1", cfg)
	peer := networkJob(t, "job_netagain2", network.Config{CIDR: "10.9.0.0/16", NoNAT: true})
	np := ensureReady(t, d, peer, network.Config{CIDR: "10.9.0.0/16", NoNAT: true})
	want := kinds(cloud)
	want["compute#network"]++
	want["compute#subnetwork"]++
	want["compute#router"]++
	want["compute#firewall"] += 2
	want["compute#address"]++
	want[gcpfake.KindConnection]++
	for round := range 2 {
		j.Infra = nil
		n := ensureReady(t, d, j, cfg)
		if got := kinds(cloud); !mapsEqual(got, want) {
			t.Fatalf("round %d: resources %v, want %v", round, got, want)
		}
		pname, err := d.EnsurePeering(ctx, j, n.VPCID, network.Peering{PeerVPCID: np.VPCID})
		if err != nil {
			t.Fatal(err)
		}
		if !hasPeering(cloud, n.VPCID, pname, gcpfake.PeeringInactive) {
			t.Fatalf("round %d: no peering on the network", round)
		}
		if err := d.DeletePeering(ctx, j); err != nil {
			t.Fatal(err)
		}
		if hasPeering(cloud, n.VPCID, pname, gcpfake.PeeringInactive) {
			t.Fatalf("round %d: the peering is still there", round)
		}
		deleteAll(t, d, j)
		if _, ok := cloud.Lookup(gcpfake.HostCompute, n.VPCID); ok {
			t.Fatalf("round %d: the network is still there", round)
		}
	}
	deleteAll(t, d, peer)
	if left := made(cloud); len(left) != 0 {
		t.Fatalf("left: %v", left)
	}
}

// A Cloud SQL instance on the network keeps its private services access connection: the
// delete says so (the user's to fix), and goes through once the instance is gone.
func TestNetworkDeleteRefusedWhileADatabaseUsesIt(t *testing.T) {
	t.Parallel()
	c, cloud := testClient(t)
	d := NetworkDriver{C: c}
	cfg := network.Config{NoNAT: true}
	j := networkJob(t, "job_netsql001", cfg)
	n := ensureReady(t, d, j, cfg)
	db := "projects/" + gcpfake.Project + "/instances/orders"
	cloud.Put(gcpfake.Resource{Service: "sqladmin.googleapis.com", Kind: "sql#instance", Name: db,
		Body: map[string]any{"name": "orders", "settings": map[string]any{"ipConfiguration": map[string]any{
			"ipv4Enabled": false, "privateNetwork": "projects/" + gcpfake.Project + "/global/networks/" + name(j, roleNetwork)}}}})
	_, err := d.DeleteNetwork(context.Background(), j)
	var fe *fault.Error
	if !errors.As(err, &fe) || fe.Class != job.ClassUserAction || fe.Code != "NetworkInUseByServices" {
		t.Fatalf("delete with a database on the network: %v", err)
	}
	if _, ok := cloud.Lookup(gcpfake.HostCompute, n.VPCID); !ok {
		t.Fatal("the network is gone")
	}
	cloud.Remove("sqladmin.googleapis.com", db)
	deleteAll(t, d, j)
	if left := made(cloud); len(left) != 0 {
		t.Fatalf("left: %v", left)
	}
}

// made is what the project holds besides its IAM policy, which every project has.
func made(cloud *gcpfake.Cloud) []gcpfake.Resource {
	var out []gcpfake.Resource
	for _, r := range cloud.Resources() {
		if r.Kind != "cloudresourcemanager.policy" {
			out = append(out, r)
		}
	}
	return out
}
