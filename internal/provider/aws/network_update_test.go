package aws

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
)

// TestNetworkConfigUpdates carries a live network through config updates as the engine would:
// the plan's config and step records on the job, then its pending steps run. Two zones grow to
// three, a peering is added, moved to another VPC and taken away.
func TestNetworkConfigUpdates(t *testing.T) {
	t.Parallel()
	p, _ := testProvider(t, "us-west-2")
	ctx := testCtx(t)
	pl := network.New(func(context.Context, *job.Job) (network.Driver, error) { return NetworkDriver{P: p}, nil }, 1).
		WithUpdates("aws", network.Updates{Zones: true, Peering: true})
	j := &job.Job{ID: "job_" + sanitize(t.Name()), OrgID: "org_test", Provider: "aws", Family: job.FamilyNetwork, Config: json.RawMessage(`{"cidr":"10.30.0.0/16","azCount":2}`)}
	steps := pl.Steps(j)
	for _, s := range steps {
		j.Steps = append(j.Steps, job.StepRecord{Name: s.Name, Status: job.StepPending})
	}
	run := func() {
		t.Helper()
		var pending []pipeline.Step
		for i, s := range steps {
			if j.Steps[i].Status == job.StepPending {
				pending = append(pending, s)
			}
		}
		for name, outcome := range drive(ctx, t, j, pending, false) {
			st := job.StepDone
			if outcome == pipeline.OutcomeSkip {
				st = job.StepSkipped
			}
			j.Steps[j.StepIndex(name)].Status = st
		}
	}
	update := func(config string, want pipeline.Action) {
		t.Helper()
		plan, err := pl.PlanUpdate(ctx, j, pipeline.UpdateRequest{Config: json.RawMessage(config)})
		if err != nil {
			t.Fatalf("plan %s: %v", config, err)
		}
		if plan.Resources[0].Action != want {
			t.Fatalf("plan %s: %+v, want %s", config, plan.Resources, want)
		}
		j.Config, j.Steps = plan.Config, plan.Steps
		run()
	}
	subnets := func() map[string]string { // subnet ID → zone
		t.Helper()
		out, err := p.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: JobTags(j).ec2JobFilter()})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, sn := range out.Subnets {
			m[deref(sn.SubnetId)] = deref(sn.AvailabilityZone)
		}
		return m
	}
	// peeringRoutes are the job's route table entries through a peering connection, as
	// "destination via connection".
	peeringRoutes := func() []string {
		t.Helper()
		rts, err := p.jobRouteTables(ctx, JobTags(j))
		if err != nil || len(rts) != 2 {
			t.Fatalf("route tables %d: %v", len(rts), err)
		}
		var out []string
		for _, rt := range rts {
			for _, r := range rt.Routes {
				if deref(r.VpcPeeringConnectionId) != "" && r.State != ec2types.RouteStateBlackhole {
					out = append(out, deref(r.DestinationCidrBlock)+" via "+deref(r.VpcPeeringConnectionId))
				}
			}
		}
		slices.Sort(out)
		return out
	}
	livePeerings := func() map[string]string { // connection ID → peer VPC
		t.Helper()
		out, err := p.ec2.DescribeVpcPeeringConnections(ctx, &ec2.DescribeVpcPeeringConnectionsInput{Filters: JobTags(j).ec2JobFilter()})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, pc := range out.VpcPeeringConnections {
			if pc.Status.Code == ec2types.VpcPeeringConnectionStateReasonCodeActive {
				m[deref(pc.VpcPeeringConnectionId)] = deref(pc.AccepterVpcInfo.VpcId)
			}
		}
		return m
	}

	run()
	before := subnets()
	if len(before) != 4 {
		t.Fatalf("created %d subnets, want 4", len(before))
	}

	update(`{"cidr":"10.30.0.0/16","azCount":3}`, pipeline.ActionInPlace)
	after := subnets()
	zones := map[string]bool{}
	for id, az := range after {
		zones[az] = true
		delete(before, id)
	}
	if len(after) != 6 || len(zones) != 3 || len(before) != 0 {
		t.Fatalf("after azCount 3: subnets %v in %d zones; %v gone", after, len(zones), before)
	}
	var n network.Result
	if _, err := (&pipeline.Run{Job: j}).Infra(network.InfraNetwork, &n); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"publicSubnetIDs", "privateSubnetIDs", "availabilityZones"} {
		if l, _ := n.Data[k].([]any); len(l) != 3 {
			t.Fatalf("infra %s = %v, want 3", k, n.Data[k])
		}
	}
	rts, err := p.jobRouteTables(ctx, JobTags(j))
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range rts {
		if len(rt.Associations) != 3 {
			t.Fatalf("route table %s has %d subnets, want 3", deref(rt.RouteTableId), len(rt.Associations))
		}
	}
	if _, err := pl.PlanUpdate(ctx, j, pipeline.UpdateRequest{Config: json.RawMessage(`{"cidr":"10.30.0.0/16","azCount":2}`)}); err == nil {
		t.Fatal("fewer zones planned")
	}

	peerA, err := p.ec2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: ptr("10.51.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	peerB, err := p.ec2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: ptr("10.52.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	a, b := deref(peerA.Vpc.VpcId), deref(peerB.Vpc.VpcId)

	update(`{"cidr":"10.30.0.0/16","azCount":3,"peering":{"peerVPCID":"`+a+`"}}`, pipeline.ActionInPlace)
	live := livePeerings()
	var idA string
	for id, peer := range live {
		idA = id
		if peer != a || len(live) != 1 {
			t.Fatalf("peerings after adding: %v", live)
		}
	}
	if got, want := peeringRoutes(), []string{"10.51.0.0/16 via " + idA, "10.51.0.0/16 via " + idA}; !slices.Equal(got, want) {
		t.Fatalf("routes after adding: %v, want %v", got, want)
	}

	update(`{"cidr":"10.30.0.0/16","azCount":3,"peering":{"peerVPCID":"`+b+`"}}`, pipeline.ActionReplace)
	live = livePeerings()
	var idB string
	for id, peer := range live {
		idB = id
		if peer != b || len(live) != 1 || id == idA {
			t.Fatalf("peerings after replacing: %v", live)
		}
	}
	if got, want := peeringRoutes(), []string{"10.52.0.0/16 via " + idB, "10.52.0.0/16 via " + idB}; !slices.Equal(got, want) {
		t.Fatalf("routes after replacing: %v, want %v", got, want)
	}

	update(`{"cidr":"10.30.0.0/16","azCount":3}`, pipeline.ActionInPlace)
	if live := livePeerings(); len(live) != 0 {
		t.Fatalf("peerings after removing: %v", live)
	}
	if got := peeringRoutes(); len(got) != 0 {
		t.Fatalf("routes after removing: %v", got)
	}
	if ok, _ := (&pipeline.Run{Job: j}).Infra(network.InfraPeering, &map[string]any{}); ok {
		t.Fatalf("infra still records a peering: %s", j.Infra)
	}

	drive(ctx, t, j, steps, true)
	if left := subnets(); len(left) != 0 {
		t.Fatalf("%d subnets left after delete", len(left))
	}
}
