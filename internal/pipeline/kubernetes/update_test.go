package kubernetes_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/validation"
)

func completedCluster(pl *kubernetes.Pipeline, provider, config string, failed ...string) *job.Job {
	j := &job.Job{ID: "job_1", Family: job.FamilyKubernetes, Provider: provider, Config: json.RawMessage(config), Infra: json.RawMessage(`{}`)}
	for _, s := range pl.Steps(j) {
		st := job.StepDone
		if slices.Contains(failed, s.Name) {
			st = job.StepFailed
		}
		j.Steps = append(j.Steps, job.StepRecord{Name: s.Name, Status: st})
	}
	return j
}

func TestPlanUpdate(t *testing.T) {
	t.Parallel()
	pl := kubernetes.New(func(context.Context, *job.Job) (kubernetes.Driver, error) { return nil, nil }, nil, time.Millisecond).WithUpdates("aws")
	const base = `{"name":"prod","version":"1.29","nodeGroups":[{"name":"default","instanceType":"m5.large","min":1,"max":3}]}`
	ngs := func(groups string) string {
		return `{"name":"prod","version":"1.29","nodeGroups":[` + groups + `]}`
	}
	const def = `{"name":"default","instanceType":"m5.large","min":1,"max":3}`
	rerun := []string{kubernetes.StepCluster, kubernetes.StepFinalize}
	cases := []struct {
		name, provider, next string
		failed               []string
		fields               []string // refused fields, in order; nil plans
		rerun                []string
		resources            []string
		actions              []pipeline.Action
		changes              map[string][]string // the changed fields of a resource, when the case names them
	}{
		{name: "same config", next: base, rerun: []string{}, resources: []string{"cluster/prod"}, actions: []pipeline.Action{pipeline.ActionNoOp}},
		{name: "add a group", next: ngs(def + `,{"name":"gpu","instanceType":"g5.xlarge","min":0,"max":2}`),
			rerun: rerun, resources: []string{"node-group/gpu"}, actions: []pipeline.Action{pipeline.ActionInPlace}},
		{name: "resize a group", next: ngs(`{"name":"default","instanceType":"m5.large","min":2,"max":5}`),
			rerun: rerun, resources: []string{"node-group/default"}, actions: []pipeline.Action{pipeline.ActionInPlace}},
		{name: "replace a group by another", next: ngs(`{"name":"big","instanceType":"m5.2xlarge","min":1,"max":3}`),
			rerun: rerun, resources: []string{"node-group/big", "node-group/default"}, actions: []pipeline.Action{pipeline.ActionInPlace, pipeline.ActionInPlace}},
		{name: "a failed later step runs again before finalize", failed: []string{kubernetes.StepRegister},
			next:  ngs(`{"name":"default","instanceType":"m5.large","min":1,"max":4}`),
			rerun: []string{kubernetes.StepCluster, kubernetes.StepRegister, kubernetes.StepFinalize}, resources: []string{"node-group/default"},
			actions: []pipeline.Action{pipeline.ActionInPlace}},
		{name: "instance type is fixed", next: ngs(`{"name":"default","instanceType":"m5.xlarge","min":1,"max":3}`),
			fields: []string{"config.nodeGroups[0].instanceType"}},
		{name: "fixed cluster fields", next: `{"name":"prod2","version":"1.29","vpcID":"vpc-1","subnetIDs":["subnet-1"],"privateCluster":true,"nodeGroups":[` + def + `]}`,
			fields: []string{"config.name", "config.vpcID", "config.subnetIDs", "config.privateCluster"}},
		{name: "version up one minor", next: `{"name":"prod","version":"1.30","nodeGroups":[` + def + `]}`,
			rerun: rerun, resources: []string{"cluster/prod", "node-group/default"}, actions: []pipeline.Action{pipeline.ActionInPlace, pipeline.ActionInPlace},
			changes: map[string][]string{"node-group/default": {"nodeGroups[0].version"}}},
		{name: "version up with a new group", next: `{"name":"prod","version":"1.30","nodeGroups":[` + def + `,{"name":"gpu","instanceType":"g5.xlarge","min":0,"max":2}]}`,
			rerun: rerun, resources: []string{"cluster/prod", "node-group/default", "node-group/gpu"},
			actions: []pipeline.Action{pipeline.ActionInPlace, pipeline.ActionInPlace, pipeline.ActionInPlace},
			changes: map[string][]string{"node-group/default": {"nodeGroups[0].version"}, "node-group/gpu": {"nodeGroups[1]"}}},
		{name: "version and a group together", next: `{"name":"prod","version":"1.30","nodeGroups":[{"name":"default","instanceType":"m5.large","min":1,"max":9}]}`,
			rerun: rerun, resources: []string{"cluster/prod", "node-group/default"}, actions: []pipeline.Action{pipeline.ActionInPlace, pipeline.ActionInPlace},
			changes: map[string][]string{"node-group/default": {"nodeGroups[0].version", "nodeGroups[0].max"}}},
		{name: "another provider's version", provider: "azure", next: `{"name":"prod","version":"1.30","nodeGroups":[` + def + `]}`,
			fields: []string{"config.version"}},
		{name: "version jump of two minors", next: `{"name":"prod","version":"1.31","nodeGroups":[` + def + `]}`, fields: []string{"config.version"}},
		{name: "version downgrade", next: `{"name":"prod","version":"1.28","nodeGroups":[` + def + `]}`, fields: []string{"config.version"}},
		{name: "no groups left", next: ngs(``), fields: []string{"config"}},
		{name: "another provider's groups", provider: "gcp", next: ngs(def + `,{"name":"b","instanceType":"e2-standard-4","min":1,"max":2}`),
			fields: []string{"config.nodeGroups"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			provider := tc.provider
			if provider == "" {
				provider = "aws"
			}
			j := completedCluster(pl, provider, base, tc.failed...)
			plan, err := pl.PlanUpdate(t.Context(), j, pipeline.UpdateRequest{Config: json.RawMessage(tc.next)})
			if tc.fields != nil {
				fe, ok := validation.Fields(err)
				var got []string
				for _, f := range fe {
					got = append(got, f.Field)
					if want := "immutable"; tc.provider == "" && f.Field != "config" && f.Rule != want {
						t.Errorf("%s: rule %q, want immutable", f.Field, f.Rule)
					}
				}
				if !ok || !slices.Equal(got, tc.fields) {
					t.Fatalf("refusal %v; want field errors on %v", err, tc.fields)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(plan.Rerun, tc.rerun) {
				t.Errorf("re-runs %v, want %v", plan.Rerun, tc.rerun)
			}
			var res []string
			var actions []pipeline.Action
			for _, r := range plan.Resources {
				res, actions = append(res, r.Resource), append(actions, r.Action)
			}
			if !slices.Equal(res, tc.resources) || !slices.Equal(actions, tc.actions) {
				t.Errorf("resources %v %v, want %v %v", res, actions, tc.resources, tc.actions)
			}
			for _, r := range plan.Resources {
				want, ok := tc.changes[r.Resource]
				if !ok {
					continue
				}
				var got []string
				for _, c := range r.Changes {
					got = append(got, c.Field)
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s changes %v, want %v", r.Resource, got, want)
				}
			}
			for i, s := range plan.Steps {
				want := job.StepDone
				if slices.Contains(tc.rerun, s.Name) {
					want = job.StepPending
				}
				if s.Status != want {
					t.Errorf("step %s is %s, want %s", s.Name, s.Status, want)
				}
				if j.Steps[i].Status != job.StepDone && !slices.Contains(tc.failed, s.Name) {
					t.Errorf("the job's own step %s changed to %s", s.Name, j.Steps[i].Status)
				}
			}
			if string(plan.Config) != tc.next {
				t.Errorf("config %s, want %s", plan.Config, tc.next)
			}
		})
	}
}

// The refusal of an instance type change says how to get there instead.
func TestPlanUpdateInstanceTypeHint(t *testing.T) {
	t.Parallel()
	pl := kubernetes.New(func(context.Context, *job.Job) (kubernetes.Driver, error) { return nil, nil }, nil, time.Millisecond).WithUpdates("aws")
	j := completedCluster(pl, "aws", `{"name":"prod","nodeGroups":[{"name":"default","instanceType":"m5.large","min":1,"max":3}]}`)
	_, err := pl.PlanUpdate(t.Context(), j, pipeline.UpdateRequest{Config: json.RawMessage(
		`{"name":"prod","nodeGroups":[{"name":"default","instanceType":"m5.xlarge","min":1,"max":3}]}`)})
	fe, ok := validation.Fields(err)
	if !ok || len(fe) != 1 || !strings.Contains(fe[0].Message, "add a new group") || !strings.Contains(fe[0].Message, "remove default") {
		t.Fatalf("refusal %v; want one that says to add a new group and remove the old one", err)
	}
}
