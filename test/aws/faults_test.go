package aws

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/job"
	awsp "github.com/groundworkhq/groundwork/internal/provider/aws"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/testenv/faultproxy"
)

// network is what every family that builds its own network holds in moto: one VPC, a public
// and a private subnet in each of two zones, one internet gateway, a public and a private
// route table, one Elastic IP and one NAT gateway.
var network = map[string]int{"vpc": 1, "subnet": 4, "internet-gateway": 1, "route-table": 2, "elastic-ip": 1, "nat-gateway": 1}

// privateNetwork is a datastore's network: no NAT gateway, so no Elastic IP either.
var privateNetwork = map[string]int{"vpc": 1, "subnet": 4, "internet-gateway": 1, "route-table": 2}

func with(base map[string]int, more map[string]int) map[string]int {
	out := maps.Clone(base)
	maps.Copy(out, more)
	return out
}

// faultFamilies are the AWS families run through the fault proxy, each with exactly what its
// job must leave in moto: a duplicate made by a repeated create shows up as a count of 2.
var faultFamilies = []struct {
	name, kind, config string
	want               map[string]int
	// noTeardown: moto cannot finish this family's delete (see redisTeardownWaits).
	noTeardown bool
}{
	{name: "network", kind: "network", config: `{"cidr":"10.62.0.0/16"}`, want: network},
	{name: "registry", kind: "registry", config: `{"name":"team-images"}`, want: map[string]int{"ecr-repository": 1}},
	{name: "dns_zone", kind: "dns_zone", config: `{"domain":"shop.example.com"}`, want: map[string]int{"hosted-zone": 1}},
	{name: "kubernetes", kind: "kubernetes", config: `{"name":"platform","version":"1.30","nodeGroups":[{"name":"default","instanceType":"m5.large","min":1,"max":2}]}`,
		want: with(network, map[string]int{"eks-cluster": 1, "iam-role": 2})},
	{name: "vm_pool_lb", kind: "vm_pool", config: `{"name":"web","instanceType":"t3.micro","min":2,"max":2,"createLoadBalancer":true,"listenerPorts":[80,443]}`,
		want: with(network, map[string]int{"iam-role": 1, "security-group": 2, "launch-template": 1, "instance": 2, "load-balancer": 1, "target-group": 1, "certificate": 1})},
	{name: "vm_pool_asg", kind: "vm_pool", config: `{"name":"web","instanceType":"t3.micro","mode":"asg","min":1,"max":2}`,
		want: with(network, map[string]int{"iam-role": 1, "security-group": 1, "launch-template": 1, "instance": 1, "auto-scaling-group": 1})},
	{name: "datastore_postgres", kind: "datastore", config: `{"engine":"postgres","version":"16.3","instanceClass":"db.t3.medium","allocatedStorageGB":20}`,
		want: with(privateNetwork, map[string]int{"rds-instance": 1, "db-subnet-group": 1, "secret": 1})},
	{name: "datastore_redis", kind: "datastore", config: `{"engine":"redis","version":"7.1","instanceClass":"cache.t3.micro"}`, noTeardown: true,
		want: with(privateNetwork, map[string]int{"replication-group": 1, "cache-subnet-group": 1, "secret": 1})},
}

// faultConfig is the bad network of these tests: the first call of every kind of mutation and
// a quarter of the later ones lose their answer after moto acted on them, one call in ten is
// throttled, a few connections are reset and a fifth of answers come late.
func faultConfig(t *testing.T, seed uint64) faultproxy.Config {
	return faultproxy.Config{Seed: seed, DropFirst: true, DropAnswer: 0.25, Throttle: 0.1, Reset: 0.03, Delay: 0.2, MaxDelay: 30 * time.Millisecond, Logf: t.Logf}
}

// TestFamiliesSurviveLostAnswers runs every AWS family through the server with the fault
// proxy between it and moto, for a few seeds (GROUNDWORK_FAULT_SEEDS=N runs seeds 1..N,
// GROUNDWORK_FAULT_SEED=S replays one): each job completes, moto holds exactly what the job
// should have made (no second VPC, NAT gateway, Elastic IP, ... from a repeated create), and
// teardown leaves nothing.
func TestFamiliesSurviveLostAnswers(t *testing.T) {
	t.Parallel()
	for _, seed := range faultproxy.Seeds(os.Getenv, 1, 2, 3) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			upstream := motoEnv.Endpoint(t)
			// One server per seed; each family has its own account behind its own proxy, so that
			// a family's faults follow from the seed and its own calls only.
			s := apptest.Start(t, app.Options{PollInterval: 100 * time.Millisecond,
				Datastores: app.DatastoreOptions{Poll: 100 * time.Millisecond}, AWS: app.AWSOptions{
					Poll:  100 * time.Millisecond,
					Probe: func(*awsp.Provider) awsp.BootstrapProbe { return awsp.FakeBootstrapProbe{AllReady: true} },
				}})
			for _, fam := range faultFamilies {
				t.Run(fam.name, func(t *testing.T) {
					t.Parallel()
					px, err := faultproxy.Start(upstream, faultproxy.AWS, faultConfig(t, seed))
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(px.Close)
					defer func() {
						t.Logf("%s (replay: %s=%d go test ./test/aws -run 'TestFamiliesSurviveLostAnswers/seed=%d/%s')", px.Summary(), faultproxy.SeedsEnv, seed, seed, fam.name)
					}()
					e := newFaultEnv(t, s, upstream, px.URL)
					j := e.create(t, fam.kind, fam.config)
					j = waitStatus(t, s.Client, j.ID, job.StatusCompleted)
					if got := e.leftovers(t, j); !maps.Equal(got, fam.want) {
						t.Fatalf("after create moto holds %s, want exactly %s", counts(got), counts(fam.want))
					}
					if px.Count(faultproxy.DropAnswer) == 0 {
						t.Fatalf("no answer was dropped (%s): the test proved nothing", px.Summary())
					}
					if fam.noTeardown {
						return
					}
					e.teardown(t, j.ID)
					if left := e.leftovers(t, j); len(left) > 0 {
						t.Fatalf("after teardown moto still holds %s", counts(left))
					}
				})
			}
		})
	}
}

// newFaultEnv makes an account whose endpoint is the proxy, and a space on it; the test's own
// provider talks to moto directly, so its counts see no faults.
func newFaultEnv(t *testing.T, s *apptest.Server, motoURL, proxyURL string) *env {
	t.Helper()
	ctx := testCtx(t)
	acct := newAccount()
	role := "arn:aws:iam::" + acct + ":role/groundwork"
	var acc store.CloudAccount
	if err := s.Client.Do(ctx, http.MethodPost, "/api/cloud-accounts", map[string]any{"name": "moto " + acct, "provider": "aws",
		"region": "eu-west-1", "authMethod": "assume_role", "credentials": map[string]string{"roleArn": role},
		"config": map[string]string{"endpoint": proxyURL}}, &acc); err != nil {
		t.Fatalf("create cloud account: %v", err)
	}
	var sp store.Space
	if err := s.Client.Do(ctx, http.MethodPost, "/api/spaces", map[string]any{"name": "aws-" + acct, "provider": "aws",
		"region": "eu-west-1", "cloudAccountID": acc.ID}, &sp); err != nil {
		t.Fatalf("create space: %v", err)
	}
	p, err := awsp.Open(ctx, awsp.Account{AuthMethod: awsp.AuthAssumeRole, Region: "eu-west-1", Endpoint: motoURL, RoleARN: role})
	if err != nil {
		t.Fatal(err)
	}
	return &env{s: s, space: &sp, p: p, role: role}
}

// counts prints a leftovers map in a stable order.
func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return "{" + strings.Join(parts, " ") + "}"
}
