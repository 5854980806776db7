package network_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
	"github.com/groundworkhq/groundwork/internal/validation"
)

func doneJob(config string, peering job.StepStatus) *job.Job {
	return &job.Job{ID: "job-1", Provider: "aws", Family: job.FamilyNetwork, Config: json.RawMessage(config), Steps: []job.StepRecord{
		{Name: network.StepValidate, Status: job.StepDone},
		{Name: network.StepNetwork, Status: job.StepDone},
		{Name: network.StepPeering, Status: peering},
		{Name: network.StepFinalize, Status: job.StepDone},
	}}
}

func TestPlanUpdate(t *testing.T) {
	t.Parallel()
	const base = `{"cidr":"10.0.0.0/16","azCount":2}`
	const peered = `{"cidr":"10.0.0.0/16","azCount":2,"peering":{"peerVPCID":"vpc-a"}}`
	cases := map[string]struct {
		from, to string
		peering  job.StepStatus // the create_peering step's status (done unless set)
		provider string         // aws unless set
		// refused: the field errors' field → rule; else the plan's actions and rerun.
		refused map[string]string
		actions []pipeline.Action
		rerun   []string
	}{
		"nothing changes":             {from: base, to: base, actions: []pipeline.Action{pipeline.ActionNoOp}, rerun: []string{}},
		"default azCount is 2":        {from: `{"cidr":"10.0.0.0/16"}`, to: base, actions: []pipeline.Action{pipeline.ActionNoOp}, rerun: []string{}},
		"default cidr is 10.0.0.0/16": {from: `{"azCount":2}`, to: base, actions: []pipeline.Action{pipeline.ActionNoOp}, rerun: []string{}},
		"more zones add subnets":      {from: base, to: `{"cidr":"10.0.0.0/16","azCount":3}`, actions: []pipeline.Action{pipeline.ActionInPlace}, rerun: []string{network.StepNetwork, network.StepFinalize}},
		"fewer zones are refused":     {from: `{"cidr":"10.0.0.0/16","azCount":3}`, to: base, refused: map[string]string{"config.azCount": "shrink"}},
		"peering added":               {from: base, to: peered, peering: job.StepSkipped, actions: []pipeline.Action{pipeline.ActionInPlace}, rerun: []string{network.StepPeering, network.StepFinalize}},
		"peering removed":             {from: peered, to: base, actions: []pipeline.Action{pipeline.ActionInPlace}, rerun: []string{network.StepPeering, network.StepFinalize}},
		"peer VPC changed":            {from: peered, to: `{"cidr":"10.0.0.0/16","azCount":2,"peering":{"peerVPCID":"vpc-b"}}`, actions: []pipeline.Action{pipeline.ActionReplace}, rerun: []string{network.StepPeering, network.StepFinalize}},
		"zones and peering at once":   {from: base, to: `{"cidr":"10.0.0.0/16","azCount":4,"peering":{"peerVPCID":"vpc-a"}}`, peering: job.StepSkipped, actions: []pipeline.Action{pipeline.ActionInPlace, pipeline.ActionInPlace}, rerun: []string{network.StepNetwork, network.StepPeering, network.StepFinalize}},
		"failed step runs again":      {from: base, to: `{"cidr":"10.0.0.0/16","azCount":3}`, peering: job.StepFailed, actions: []pipeline.Action{pipeline.ActionInPlace}, rerun: []string{network.StepNetwork, network.StepPeering, network.StepFinalize}},
		"cidr, noNAT refused": {from: base, to: `{"cidr":"10.1.0.0/16","azCount":2,"noNAT":true}`,
			refused: map[string]string{"config.cidr": "immutable", "config.noNAT": "immutable"}},
		"adopted VPC and subnets refused": {from: `{"vpcID":"vpc-1","subnetIDs":["s-1"]}`, to: `{"vpcID":"vpc-2","subnetIDs":["s-2"]}`,
			refused: map[string]string{"config.vpcID": "immutable", "config.subnetIDs": "immutable"}},
		"adopted network adds no zones": {from: `{"vpcID":"vpc-1"}`, to: `{"vpcID":"vpc-1","azCount":3}`, refused: map[string]string{"config.azCount": "immutable"}},
		"other providers add no zones": {from: base, to: `{"cidr":"10.0.0.0/16","azCount":3,"peering":{"peerVPCID":"vpc-a"}}`, provider: "local",
			refused: map[string]string{"config.azCount": "provider", "config.peering": "provider"}},
		"regional subnets: more zones refused": {from: base, to: `{"cidr":"10.0.0.0/16","azCount":3}`, provider: "gcp",
			refused: map[string]string{"config.azCount": "provider"}},
		"regional subnets: fewer zones refused": {from: `{"cidr":"10.0.0.0/16","azCount":3}`, to: base, provider: "gcp",
			refused: map[string]string{"config.azCount": "provider"}},
		"regional subnets: peering moved": {from: peered, to: `{"cidr":"10.0.0.0/16","azCount":2,"peering":{"peerVPCID":"vpc-b"}}`, provider: "gcp",
			actions: []pipeline.Action{pipeline.ActionReplace}, rerun: []string{network.StepPeering, network.StepFinalize}},
		"azure moves a peering": {from: peered, to: `{"cidr":"10.0.0.0/16","azCount":2,"peering":{"peerVPCID":"vpc-b"}}`, provider: "azure",
			actions: []pipeline.Action{pipeline.ActionReplace}, rerun: []string{network.StepPeering, network.StepFinalize}},
		"azure removes a peering": {from: peered, to: base, provider: "azure", actions: []pipeline.Action{pipeline.ActionInPlace}, rerun: []string{network.StepPeering, network.StepFinalize}},
		"azure subnets span the zones": {from: base, to: `{"cidr":"10.0.0.0/16","azCount":3,"peering":{"peerVPCID":"vpc-a"}}`, provider: "azure",
			refused: map[string]string{"config.azCount": "provider"}},
		"invalid config": {from: base, to: `{"azCount":9}`, refused: map[string]string{"config": "invalid"}},
	}
	p := network.New(nil, 0).WithUpdates("aws", network.Updates{Zones: true, Peering: true}).
		WithUpdates("gcp", network.Updates{Peering: true, RegionalSubnets: true}).
		WithUpdates("azure", network.Updates{Peering: true, RegionalSubnets: true})
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := tc.peering
			if st == "" {
				st = job.StepDone
			}
			j := doneJob(tc.from, st)
			if tc.provider != "" {
				j.Provider = tc.provider
			}
			plan, err := p.PlanUpdate(context.Background(), j, pipeline.UpdateRequest{Config: json.RawMessage(tc.to)})
			if tc.refused != nil {
				fields, ok := validation.Fields(err)
				if !ok {
					t.Fatalf("err = %v, want field errors %v", err, tc.refused)
				}
				got := map[string]string{}
				for _, f := range fields {
					got[f.Field] = f.Rule
				}
				if len(got) != len(tc.refused) {
					t.Fatalf("refused %v, want %v", got, tc.refused)
				}
				for f, r := range tc.refused {
					if got[f] != r {
						t.Fatalf("refused %v, want %v", got, tc.refused)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("plan: %v", err)
			}
			var actions []pipeline.Action
			for _, r := range plan.Resources {
				actions = append(actions, r.Action)
			}
			if !slices.Equal(actions, tc.actions) || !slices.Equal(plan.Rerun, tc.rerun) {
				t.Fatalf("actions %v rerun %v, want %v %v", actions, plan.Rerun, tc.actions, tc.rerun)
			}
			for _, s := range plan.Steps {
				if (s.Status == job.StepPending) != slices.Contains(tc.rerun, s.Name) {
					t.Fatalf("step %s is %s; rerun %v", s.Name, s.Status, tc.rerun)
				}
			}
			if string(plan.Config) != tc.to {
				t.Fatalf("config = %s", plan.Config)
			}
		})
	}
}

func TestDecodeConfigTakesTheFormerAdoptionName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, raw, want string }{
		{"former name", `{"existingVpcID":"vpc-1"}`, "vpc-1"},
		{"current name", `{"vpcID":"vpc-2"}`, "vpc-2"},
		{"current name wins", `{"vpcID":"vpc-2","existingVpcID":"vpc-1"}`, "vpc-2"},
		{"neither", `{}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := network.DecodeConfig(json.RawMessage(tc.raw))
			if err != nil || c.VPCID != tc.want {
				t.Fatalf("DecodeConfig(%s) = %q, %v; want %q", tc.raw, c.VPCID, err, tc.want)
			}
		})
	}
}
