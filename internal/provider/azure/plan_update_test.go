package azure

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
	"github.com/groundworkhq/groundwork/internal/provider/azure/azurefake"
	"github.com/groundworkhq/groundwork/internal/provider/drivertest"
	"github.com/groundworkhq/groundwork/internal/secrets/secretstest"
)

// updater is a family pipeline that plans config updates.
type updater interface {
	pipeline.Pipeline
	PlanUpdate(ctx context.Context, j *job.Job, req pipeline.UpdateRequest) (*pipeline.UpdatePlan, error)
}

// TestPlanListsTheActionsOfAnUpdate makes each job, then carries out a config update of it
// as the engine does (the re-opened steps run again), noting the RBAC action of every request
// of the update: each must be in the plan of the job's steps, so the role a job was planned
// with also lets its updates through.
func TestPlanListsTheActionsOfAnUpdate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name         string
		family       job.Family
		config, next string
		build        func(c *Client, j *job.Job) updater
	}{
		{"datastore postgres", job.FamilyDatastore,
			`{"engine":"postgres","name":"orders","instanceClass":"Standard_D2ds_v5","allocatedStorageGB":32}`,
			`{"engine":"postgres","name":"orders","instanceClass":"Standard_D4ds_v5","allocatedStorageGB":64,"backupRetentionDays":14,"multiAZ":true}`,
			func(c *Client, j *job.Job) updater {
				kv, err := c.Secrets(j)
				if err != nil {
					t.Fatal(err)
				}
				return dspipe.New(dspipe.Options{Drivers: map[string]dspipe.Driver{Name: datastoreOn(c)}, Secrets: secretstest.Vault(kv), Poll: time.Millisecond})
			}},
		{"kubernetes", job.FamilyKubernetes,
			`{"name":"plat","version":"1.30","nodeGroups":[{"name":"system","instanceType":"Standard_D2s_v5","min":1,"max":3},{"name":"old","instanceType":"Standard_D4s_v5","min":1,"max":1}]}`,
			`{"name":"plat","version":"1.31","nodeGroups":[{"name":"system","instanceType":"Standard_D2s_v5","min":1,"max":5},{"name":"new","instanceType":"Standard_D4s_v5","min":0,"max":2}]}`,
			func(c *Client, _ *job.Job) updater {
				return kubernetes.New(func(context.Context, *job.Job) (kubernetes.Driver, error) { return KubernetesDriver{C: c}, nil }, nil, time.Millisecond).WithUpdates(Name)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			cloud := azurefake.New(t)
			c, err := Open(Account{AuthMethod: AuthNone, SubscriptionID: azurefake.Subscription, Location: "westeurope", ResourceGroup: "rg-plan",
				Endpoint: cloud.URL, Transport: azurefake.Transport(cloud.URL), KeyVaultURL: testVault, Poll: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			j := &job.Job{ID: "job_upd" + string(tc.family)[:4], OrgID: "org_plan", SpaceID: "spc_plan", Kind: job.KindProvisioning, Family: tc.family, Provider: Name,
				Mode: job.ModeCreate, Config: json.RawMessage(tc.config), Infra: json.RawMessage(`{}`)}
			pl := tc.build(c, j)
			if err := pl.Validate(ctx, j); err != nil {
				t.Fatal(err)
			}
			steps := pl.Steps(j)
			for _, s := range steps {
				drivertest.RunStep(ctx, t, j, s, false, nil)
			}
			j.Status, j.Steps = job.StatusCompleted, nil
			for _, s := range steps {
				j.Steps = append(j.Steps, job.StepRecord{Name: s.Name, Status: job.StepDone})
			}
			up, err := pl.PlanUpdate(ctx, j, pipeline.UpdateRequest{Config: json.RawMessage(tc.next)})
			if err != nil {
				t.Fatal(err)
			}
			if len(up.Rerun) == 0 {
				t.Fatalf("the update re-runs nothing: %+v", up)
			}
			j.Config, j.Steps = up.Config, up.Steps
			src := (&Module{}).PlanSource()
			names := make([]string, 0, len(steps))
			for _, s := range pl.Steps(j) {
				names = append(names, s.Name)
			}
			planned, err := src.Steps(ctx, j, names)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range pl.Steps(j) {
				if !slices.Contains(up.Rerun, s.Name) {
					continue
				}
				mark := cloud.Mark()
				drivertest.RunStep(ctx, t, j, s, false, nil)
				i := slices.Index(names, s.Name)
				for _, a := range cloud.ActionsSince(mark) {
					if !slices.Contains(planned[i].Operations, a) {
						t.Errorf("%s: the update called %s, which the plan does not list", s.Name, a)
					}
				}
			}
		})
	}
}

// A live network's peering moved and then removed by config updates, carried out as the engine
// does (the network pipeline's plan, its re-opened steps run again): the peering follows, and
// every action the updates call is in the job's plan.
func TestNetworkPeeringUpdateThroughThePipeline(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c, cloud := testClient(t)
	var peers []string
	for i, cidr := range []string{"10.71.0.0/16", "10.72.0.0/16"} {
		peer := &job.Job{ID: "job_peer" + string(rune('a'+i)), OrgID: "org_plan", SpaceID: "spc_plan", Provider: Name, Family: job.FamilyNetwork}
		until(t, ctx, "peer network", func() (bool, error) {
			n, _, done, err := clientOn(t, cloud, "rg-peers").EnsureVNet(ctx, peer, network.InfraNetwork, VNetRequest{CIDR: cidr})
			if done {
				peers = append(peers, n.VNetID)
			}
			return done, err
		})
	}
	pl := network.New(func(context.Context, *job.Job) (network.Driver, error) { return NetworkDriver{C: c}, nil }, time.Millisecond).
		WithUpdates("azure", network.Updates{Peering: true, RegionalSubnets: true})
	j := &job.Job{ID: "job_netupd", OrgID: "org_plan", SpaceID: "spc_plan", Kind: job.KindProvisioning, Family: job.FamilyNetwork, Provider: Name,
		Mode: job.ModeCreate, Config: json.RawMessage(`{"cidr":"10.70.0.0/16","noNAT":true,"peering":{"peerVPCID":"` + peers[0] + `"}}`), Infra: json.RawMessage(`{}`)}
	if err := pl.Validate(ctx, j); err != nil {
		t.Fatal(err)
	}
	for _, s := range pl.Steps(j) {
		drivertest.RunStep(ctx, t, j, s, false, nil)
		j.Steps = append(j.Steps, job.StepRecord{Name: s.Name, Status: job.StepDone})
	}
	j.Status = job.StatusCompleted
	own := name(j, "vnet")
	remote := func() string {
		raw, ok := cloud.Raw(c.sub("Microsoft.Network", "virtualNetworks", own) + "/virtualNetworkPeerings/" + name(j, "peering"))
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
	if got := remote(); !strings.EqualFold(got, peers[0]) {
		t.Fatalf("made with a peering to %q", got)
	}
	for _, tc := range []struct {
		config string
		action pipeline.Action
		want   string
	}{
		{`{"cidr":"10.70.0.0/16","noNAT":true,"peering":{"peerVPCID":"` + peers[1] + `"}}`, pipeline.ActionReplace, peers[1]},
		{`{"cidr":"10.70.0.0/16","noNAT":true}`, pipeline.ActionInPlace, ""},
	} {
		up, err := pl.PlanUpdate(ctx, j, pipeline.UpdateRequest{Config: json.RawMessage(tc.config)})
		if err != nil {
			t.Fatal(err)
		}
		if len(up.Resources) != 1 || up.Resources[0].Action != tc.action {
			t.Fatalf("plan %+v; want one %s", up.Resources, tc.action)
		}
		planJob := *j
		planJob.Config = up.Config
		planned := StepPlan(&planJob, network.StepPeering)
		j.Config, j.Steps = up.Config, up.Steps
		for _, s := range pl.Steps(j) {
			if !slices.Contains(up.Rerun, s.Name) {
				continue
			}
			mark := cloud.Mark()
			drivertest.RunStep(ctx, t, j, s, false, nil)
			if s.Name != network.StepPeering {
				continue
			}
			for _, a := range cloud.ActionsSince(mark) {
				if !slices.Contains(planned.Operations, a) {
					t.Errorf("the update called %s, which the peering step's plan does not list", a)
				}
			}
		}
		if got := remote(); !strings.EqualFold(got, tc.want) {
			t.Fatalf("after the update the peering goes to %q, want %q", got, tc.want)
		}
	}
}
