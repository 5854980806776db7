package azure

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
)

// A step that started an operation records its resume token; the next call, here from a
// client opened anew as a restarted server opens one, polls that operation instead of
// starting another, and every resource is PUT exactly once.
func TestOperationsResumeFromRecordedTokens(t *testing.T) {
	t.Parallel()
	c, cloud := testClient(t)
	j := &job.Job{ID: "job_01JRESUMETOKENS", OrgID: "org_a", SpaceID: "spc_a", Provider: Name, Family: job.FamilyNetwork}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	d := NetworkDriver{C: c}
	res, err := d.EnsureNetwork(ctx, j, network.Config{CIDR: "10.9.0.0/16"})
	if err != nil || res.Ready {
		t.Fatalf("first call: ready=%v err=%v; want an operation in flight", res.Ready, err)
	}
	ops, _ := res.Data["ops"].(Ops)
	if len(ops) != 1 || ops["create nsg"] == "" {
		t.Fatalf("first call recorded %v; want the NSG's resume token", ops)
	}
	for i := 0; !res.Ready; i++ {
		if i == 50 {
			t.Fatal("network not ready after 50 calls")
		}
		record(t, j, network.InfraNetwork, res)
		d = NetworkDriver{C: clientOn(t, cloud, c.ResourceGroup)} // as after a restart
		if res, err = d.EnsureNetwork(ctx, j, network.Config{CIDR: "10.9.0.0/16"}); err != nil {
			t.Fatal(err)
		}
	}
	if cloud.OperationPolls() == 0 {
		t.Error("no operation status was polled: the recorded tokens were not used")
	}
	puts := map[string]int{}
	for _, call := range cloud.Calls() {
		if strings.HasPrefix(call, "PUT ") && strings.Contains(call, "/providers/") {
			puts[call]++
		}
	}
	if len(puts) != 4 {
		t.Errorf("PUTs: %v; want one each of the NSG, NAT IP, NAT gateway and VNet", puts)
	}
	for call, n := range puts {
		if n != 1 {
			t.Errorf("%s sent %d times", call, n)
		}
	}
}

// record stores a step's result in the job's infra as the engine does between calls.
func record(t *testing.T, j *job.Job, key string, v any) {
	t.Helper()
	infra := map[string]any{}
	if len(j.Infra) > 0 {
		_ = json.Unmarshal(j.Infra, &infra)
	}
	infra[key] = v
	raw, err := json.Marshal(infra)
	if err != nil {
		t.Fatal(err)
	}
	j.Infra = raw
}
