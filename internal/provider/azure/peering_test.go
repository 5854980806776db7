package azure

import (
	"context"
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
