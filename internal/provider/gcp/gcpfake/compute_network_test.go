package gcpfake_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/provider/gcp/gcpfake"
)

type api struct {
	t    *testing.T
	base string
}

func (a api) call(method, path string, body any) (int, map[string]any) {
	a.t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, a.base+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// done waits for a compute operation answered by a mutation.
func (a api) done(status int, op map[string]any) map[string]any {
	a.t.Helper()
	if status != http.StatusOK {
		a.t.Fatalf("mutation answered %d: %v", status, op)
	}
	self := strings.TrimPrefix(op["selfLink"].(string), gcpfake.SelfLinkBase)
	deadline := time.Now().Add(10 * time.Second)
	for op["status"] != "DONE" {
		if time.Now().After(deadline) {
			a.t.Fatalf("operation %s not done", self)
		}
		_, op = a.call(http.MethodGet, "compute/v1/"+self, nil)
	}
	if op["error"] != nil {
		a.t.Fatalf("operation failed: %v", op["error"])
	}
	return op
}

const global = "compute/v1/projects/" + gcpfake.Project + "/global/"
const region = "compute/v1/projects/" + gcpfake.Project + "/regions/europe-west1/"

func newNetwork(a api, name string) string {
	a.done(a.call(http.MethodPost, global+"networks", map[string]any{"name": name, "autoCreateSubnetworks": false}))
	return gcpfake.SelfLinkBase + "projects/" + gcpfake.Project + "/global/networks/" + name
}

// A network is not deleted while a router, a firewall rule or a reserved range is on it,
// as Google refuses (resourceInUseByAnotherResource); it is once that is gone.
func TestNetworkInUse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, collection string
		body             func(link string) map[string]any
	}{
		{"router", region + "routers", func(link string) map[string]any {
			return map[string]any{"name": "r", "network": link, "nats": []any{map[string]any{"name": "n",
				"natIpAllocateOption": "AUTO_ONLY", "sourceSubnetworkIpRangesToNat": "ALL_SUBNETWORKS_ALL_IP_RANGES"}}}
		}},
		{"firewall", global + "firewalls", func(link string) map[string]any {
			return map[string]any{"name": "r", "network": link, "sourceRanges": []any{"10.0.0.0/8"},
				"allowed": []any{map[string]any{"IPProtocol": "tcp"}}}
		}},
		{"address", global + "addresses", func(link string) map[string]any {
			return map[string]any{"name": "r", "network": link, "purpose": "VPC_PEERING", "addressType": "INTERNAL", "prefixLength": 20}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cloud := gcpfake.New(t)
			a := api{t: t, base: cloud.Endpoints()[gcpfake.HostCompute]}
			link := newNetwork(a, "net")
			a.done(a.call(http.MethodPost, tc.collection, tc.body(link)))
			status, body := a.call(http.MethodDelete, global+"networks/net", nil)
			errs, _ := body["error"].(map[string]any)["errors"].([]any)
			if status != http.StatusBadRequest || len(errs) == 0 || errs[0].(map[string]any)["reason"] != "resourceInUseByAnotherResource" {
				t.Fatalf("delete of a network in use = %d %v", status, body)
			}
			a.done(a.call(http.MethodDelete, tc.collection+"/r", nil))
			a.done(a.call(http.MethodDelete, global+"networks/net", nil))
		})
	}
}

func TestPeeringStates(t *testing.T) {
	t.Parallel()
	cloud := gcpfake.New(t)
	a := api{t: t, base: cloud.Endpoints()[gcpfake.HostCompute]}
	linkA, linkB := newNetwork(a, "a"), newNetwork(a, "b")
	state := func(network, peering string) any {
		_, n := a.call(http.MethodGet, global+"networks/"+network, nil)
		ps, _ := n["peerings"].([]any)
		for _, p := range ps {
			if p.(map[string]any)["name"] == peering {
				return p.(map[string]any)["state"]
			}
		}
		return nil
	}
	a.done(a.call(http.MethodPost, global+"networks/a/addPeering",
		map[string]any{"networkPeering": map[string]any{"name": "a-b", "network": linkB, "exchangeSubnetRoutes": true}}))
	if s := state("a", "a-b"); s != "INACTIVE" {
		t.Fatalf("one-sided peering %v", s)
	}
	if status, _ := a.call(http.MethodPost, global+"networks/a/addPeering",
		map[string]any{"networkPeering": map[string]any{"name": "a-b2", "network": linkB}}); status != http.StatusBadRequest {
		t.Fatalf("a second peering to the same network answered %d", status)
	}
	a.done(a.call(http.MethodPost, global+"networks/b/addPeering",
		map[string]any{"networkPeering": map[string]any{"name": "b-a", "network": linkA, "exchangeSubnetRoutes": true}}))
	if sa, sb := state("a", "a-b"), state("b", "b-a"); sa != "ACTIVE" || sb != "ACTIVE" {
		t.Fatalf("peered both ways: %v %v", sa, sb)
	}
	a.done(a.call(http.MethodPost, global+"networks/a/removePeering", map[string]any{"name": "a-b"}))
	if sa, sb := state("a", "a-b"), state("b", "b-a"); sa != nil || sb != "INACTIVE" {
		t.Fatalf("after remove: %v %v", sa, sb)
	}
	if status, _ := a.call(http.MethodPost, global+"networks/a/addPeering",
		map[string]any{"networkPeering": map[string]any{"name": "a-x", "network": gcpfake.SelfLinkBase + "projects/" + gcpfake.Project + "/global/networks/x"}}); status != http.StatusNotFound {
		t.Fatalf("a peering to a missing network answered %d", status)
	}
}
