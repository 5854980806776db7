package azure

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
)

// A peering to a network of the subscription is made once and named after the job; one to a
// network that does not exist is the user's to fix.
func TestPeering(t *testing.T) {
	t.Parallel()
	c, cloud := testClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d := NetworkDriver{C: c}
	nets := map[string]network.Result{}
	for _, id := range []string{"job_01JPEERA", "job_01JPEERB"} {
		j := &job.Job{ID: id, OrgID: "org_a", SpaceID: "spc_a", Provider: Name}
		for {
			r, err := d.EnsureNetwork(ctx, j, network.Config{CIDR: map[string]string{"job_01JPEERA": "10.1.0.0/16", "job_01JPEERB": "10.2.0.0/16"}[id], NoNAT: true})
			if err != nil {
				t.Fatal(err)
			}
			if r.Ready {
				nets[id] = r
				break
			}
		}
	}
	a := &job.Job{ID: "job_01JPEERA", OrgID: "org_a", SpaceID: "spc_a", Provider: Name}
	for range 2 {
		id, err := d.EnsurePeering(ctx, a, nets["job_01JPEERA"].VPCID, network.Peering{PeerVPCID: nets["job_01JPEERB"].VPCID})
		if err != nil || !strings.HasSuffix(id, "/virtualNetworkPeerings/"+name(a, "peering")) {
			t.Fatalf("peering %q, %v", id, err)
		}
	}
	puts := 0
	for _, call := range cloud.Calls() {
		if strings.HasPrefix(call, "PUT ") && strings.Contains(call, "/virtualNetworkPeerings/") {
			puts++
		}
	}
	if puts != 1 {
		t.Errorf("%d peering PUTs, want 1", puts)
	}
	b := &job.Job{ID: "job_01JPEERB", OrgID: "org_a", SpaceID: "spc_a", Provider: Name}
	_, err := d.EnsurePeering(ctx, b, nets["job_01JPEERB"].VPCID, network.Peering{PeerVPCID: missingVNet})
	if fe := fault.As(err); err == nil || fe.Class != job.ClassUserAction || fe.Code != "PeerNotFound" {
		t.Fatalf("peering to a missing network: %v (%s %s)", err, fe.Class, fe.Code)
	}
	if err := d.DeletePeering(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := d.DeletePeering(ctx, a); err != nil {
		t.Fatalf("second delete: %v", err)
	}
}

// A config update that moves the peering to another network: Azure keeps a peering's remote
// network, so the job's peering is deleted and made again to the new one; a second run sends
// nothing.
func TestPeeringMovesToAnotherNetwork(t *testing.T) {
	t.Parallel()
	c, cloud := testClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d := NetworkDriver{C: c}
	nets := map[string]network.Result{}
	cidrs := map[string]string{"job_01JMOVEA": "10.1.0.0/16", "job_01JMOVEB": "10.2.0.0/16", "job_01JMOVEC": "10.3.0.0/16"}
	for id, cidr := range cidrs {
		j := &job.Job{ID: id, OrgID: "org_a", SpaceID: "spc_a", Provider: Name}
		until(t, ctx, "network "+id, func() (bool, error) {
			r, err := d.EnsureNetwork(ctx, j, network.Config{CIDR: cidr, NoNAT: true})
			nets[id] = r
			return r.Ready, err
		})
	}
	a := &job.Job{ID: "job_01JMOVEA", OrgID: "org_a", SpaceID: "spc_a", Provider: Name}
	count := func(method string) int {
		n := 0
		for _, call := range cloud.Calls() {
			if strings.HasPrefix(call, method+" ") && strings.Contains(call, "/virtualNetworkPeerings/") {
				n++
			}
		}
		return n
	}
	remote := func() string {
		raw, ok := cloud.Raw(nets[a.ID].VPCID + "/virtualNetworkPeerings/" + name(a, "peering"))
		if !ok {
			return ""
		}
		var v struct {
			Properties struct {
				RemoteVirtualNetwork struct{ ID string } `json:"remoteVirtualNetwork"`
			} `json:"properties"`
		}
		_ = json.Unmarshal(raw, &v)
		return v.Properties.RemoteVirtualNetwork.ID
	}
	for _, peer := range []string{"job_01JMOVEB", "job_01JMOVEC", "job_01JMOVEC"} {
		if _, err := d.EnsurePeering(ctx, a, nets[a.ID].VPCID, network.Peering{PeerVPCID: nets[peer].VPCID}); err != nil {
			t.Fatalf("peering to %s: %v", peer, err)
		}
		if got := remote(); !strings.EqualFold(got, nets[peer].VPCID) {
			t.Fatalf("the peering goes to %q, want %s", got, nets[peer].VPCID)
		}
	}
	if puts, dels := count("PUT"), count("DELETE"); puts != 2 || dels != 1 {
		t.Errorf("%d peering PUTs and %d DELETEs; want 2 and 1 (the move), none on the second run", puts, dels)
	}
	if err := d.DeletePeering(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got := remote(); got != "" {
		t.Errorf("peering left to %s", got)
	}
}
