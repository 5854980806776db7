package gcp

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
	"github.com/groundworkhq/groundwork/internal/provider/drivertest"
	"github.com/groundworkhq/groundwork/internal/provider/gcp/gcpfake"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// TestNetworkConfigUpdates carries a live GCP network through config updates as the engine
// would (the plan's config and step records on the job, then its pending steps run): a
// peering is added, moved to another network (the old one removed first) and taken away; a
// create_peering run again sends nothing; azCount is refused, as GCP subnets are regional.
func TestNetworkConfigUpdates(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c, cloud := testClient(t)
	d := NetworkDriver{C: c}
	pl := network.New(func(context.Context, *job.Job) (network.Driver, error) { return d, nil }, time.Millisecond).
		WithUpdates(Name, network.Updates{Peering: true, RegionalSubnets: true})
	peerA := ensureReady(t, d, networkJob(t, "job_netupda", network.Config{CIDR: "10.51.0.0/16", NoNAT: true}), network.Config{CIDR: "10.51.0.0/16", NoNAT: true})
	peerB := ensureReady(t, d, networkJob(t, "job_netupdb", network.Config{CIDR: "10.52.0.0/16", NoNAT: true}), network.Config{CIDR: "10.52.0.0/16", NoNAT: true})

	j := networkJob(t, "job_netupd1", network.Config{CIDR: "10.30.0.0/16", NoNAT: true})
	j.Infra = json.RawMessage(`{}`)
	steps := pl.Steps(j)
	for _, s := range steps {
		j.Steps = append(j.Steps, job.StepRecord{Name: s.Name, Status: job.StepPending})
	}
	run := func() {
		t.Helper()
		for i, s := range steps {
			if j.Steps[i].Status != job.StepPending {
				continue
			}
			// Every permission the step needs is in its plan, made from the job as it
			// stands before the step runs.
			planned := StepPlan(j, s.Name, PlanAccount{})
			mark := cloud.Mark()
			drivertest.RunStep(ctx, t, j, s, false, nil)
			for _, pm := range cloud.PermissionsSince(mark) {
				if !slices.Contains(planned.Operations, pm) {
					t.Errorf("step %s needed %s, not in its plan %v", s.Name, pm, planned.Operations)
				}
			}
			j.Steps[i].Status = job.StepDone
		}
	}
	run()
	var made struct {
		Network network.Result `json:"network"`
	}
	if err := json.Unmarshal(j.Infra, &made); err != nil || made.Network.VPCID == "" {
		t.Fatalf("infra %s: %v", j.Infra, err)
	}
	own := made.Network.VPCID
	update := func(config string, want ...pipeline.Action) *pipeline.UpdatePlan {
		t.Helper()
		plan, err := pl.PlanUpdate(ctx, j, pipeline.UpdateRequest{Config: json.RawMessage(config)})
		if err != nil {
			t.Fatalf("plan %s: %v", config, err)
		}
		if len(plan.Resources) != len(want) {
			t.Fatalf("plan %s: %+v, want %v", config, plan.Resources, want)
		}
		for i, a := range want {
			if plan.Resources[i].Action != a {
				t.Fatalf("plan %s: %+v, want %v", config, plan.Resources, want)
			}
		}
		if plan.Changed() {
			j.Config, j.Steps = plan.Config, plan.Steps
			run()
		}
		return plan
	}
	// peers are the networks the job's network peers with.
	peers := func() []string {
		t.Helper()
		n, ok := cloud.Lookup(gcpfake.HostCompute, own)
		if !ok {
			t.Fatalf("network %s is gone", own)
		}
		var out []string
		for _, p := range gcpfake.Peerings(n) {
			if p["name"] == name(j, rolePeering) {
				out = append(out, strings.TrimPrefix(p["network"].(string), gcpfake.SelfLinkBase))
			}
		}
		return out
	}
	mutations := func() (add, remove int) {
		return cloud.Mutations(gcpfake.HostCompute, own+"/addPeering"), cloud.Mutations(gcpfake.HostCompute, own+"/removePeering")
	}

	update(`{"cidr":"10.30.0.0/16","noNAT":true,"peering":{"peerVPCID":"`+peerA.VPCID+`"}}`, pipeline.ActionInPlace)
	if got := peers(); len(got) != 1 || got[0] != peerA.VPCID {
		t.Fatalf("peerings %v; want one to %s", got, peerA.VPCID)
	}
	// create_peering run again (a crash lost its checkpoint): nothing is sent.
	add0, remove0 := mutations()
	drivertest.RunStep(ctx, t, j, steps[j.StepIndex(network.StepPeering)], false, nil)
	if add, remove := mutations(); add != add0 || remove != remove0 || remove != 0 {
		t.Fatalf("%d addPeering, %d removePeering after a re-run; want %d, 0", add, remove, add0)
	}

	update(`{"cidr":"10.30.0.0/16","noNAT":true,"peering":{"peerVPCID":"`+peerB.VPCID+`"}}`, pipeline.ActionReplace)
	if got := peers(); len(got) != 1 || got[0] != peerB.VPCID {
		t.Fatalf("peerings %v; want one to %s", got, peerB.VPCID)
	}
	if _, remove := mutations(); remove != 1 {
		t.Fatalf("%d removePeering after the move; want 1", remove)
	}

	_, err := pl.PlanUpdate(ctx, j, pipeline.UpdateRequest{Config: json.RawMessage(`{"cidr":"10.30.0.0/16","noNAT":true,"azCount":3,"peering":{"peerVPCID":"` + peerB.VPCID + `"}}`)})
	if fields, ok := validation.Fields(err); !ok || len(fields) != 1 || fields[0].Field != "config.azCount" || fields[0].Rule != "provider" || !strings.Contains(fields[0].Message, "every zone") {
		t.Fatalf("azCount on GCP: %v; want it refused (rule provider), saying subnets span every zone", err)
	}

	update(`{"cidr":"10.30.0.0/16","noNAT":true}`, pipeline.ActionInPlace)
	if got := peers(); len(got) != 0 {
		t.Fatalf("peerings %v after the peering was taken away", got)
	}
}
