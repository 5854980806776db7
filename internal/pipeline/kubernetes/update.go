package kubernetes

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// WithUpdates names the providers whose driver converges node groups to the config on a
// re-run of the cluster step (creates the missing ones, resizes, deletes the job's groups the
// config no longer lists). Config updates of jobs on other providers are refused: their
// drivers only ever add groups, so a removal would be recorded and not carried out.
func (p *Pipeline) WithUpdates(providers ...string) *Pipeline {
	p.updatable = append(slices.Clone(p.updatable), providers...)
	return p
}

// fixedFields are the cluster settings that cannot change on a live cluster, with why.
var fixedFields = []struct {
	field, why string
	get        func(Config) any
}{
	{"name", "the cluster's name is its identity in the cloud; make a new cluster", func(c Config) any { return c.Name }},
	{"vpcID", "a cluster stays in the network it was made in; make a new cluster", func(c Config) any { return c.VPCID }},
	{"subnetIDs", "the control plane's subnets are set when the cluster is made; make a new cluster", func(c Config) any { return fmt.Sprint(c.SubnetIDs) }},
	{"privateCluster", "the endpoint's access is set when the cluster is made; make a new cluster", func(c Config) any { return c.PrivateCluster }},
	{"components", "the default components are installed when the cluster is made; install others as component jobs", func(c Config) any { return fmt.Sprint(c.Components) }},
}

// PlanUpdate plans a configuration update of a live cluster (jobs.Updater). A control-plane
// upgrade of one minor version and node group changes are carried out in place by running the cluster step again, which converges the cloud to the
// config: a group the config adds is created, a resized one gets its new min/max, a group the
// config no longer lists is deleted. A group's instance type is fixed (a managed node group
// keeps its instance types), as are the cluster's identity and network settings; they are
// refused by field, all at once.
func (p *Pipeline) PlanUpdate(_ context.Context, j *job.Job, req pipeline.UpdateRequest) (*pipeline.UpdatePlan, error) {
	cur, err := DecodeConfig(j.Config)
	if err != nil {
		return nil, validation.New("config", "stored", "the job's stored config cannot be read: "+err.Error())
	}
	next, err := DecodeConfig(req.Config)
	if err != nil {
		return nil, validation.New("config", "type", err.Error())
	}
	if err := next.Validate(); err != nil {
		return nil, validation.New("config", "invalid", err.Error())
	}
	var refused validation.Error
	for _, f := range fixedFields {
		if from, to := f.get(cur), f.get(next); !reflect.DeepEqual(from, to) {
			refused = append(refused, validation.FieldError{Field: "config." + f.field, Rule: "immutable", Message: f.why})
		}
	}
	updatable := slices.Contains(p.updatable, j.Provider)
	var resources []pipeline.ResourceChange
	if cur.Version != next.Version && next.Version != "" {
		if fe, ok := versionChange(cur.Version, next.Version); !ok {
			refused = append(refused, fe)
		} else if !updatable {
			refused = append(refused, validation.FieldError{Field: "config.version", Rule: "provider",
				Message: "the " + j.Provider + " driver does not upgrade a live control plane yet"})
		} else {
			resources = append(resources, pipeline.ResourceChange{Resource: "cluster/" + cur.Name, Action: pipeline.ActionInPlace,
				Changes:    []pipeline.FieldChange{{Field: "version", From: cur.Version, To: next.Version}},
				Disruption: "none: the control plane is upgraded in place, then its node groups"})
			// The job's node groups follow the control plane: each kept group is upgraded to
			// the new version once the control plane runs it (a group added in the same
			// update is made at it).
			kept := map[string]bool{}
			for _, g := range cur.NodeGroups {
				kept[g.Name] = true
			}
			for i, g := range next.NodeGroups {
				if kept[g.Name] {
					resources = append(resources, pipeline.ResourceChange{Resource: "node-group/" + g.Name, Action: pipeline.ActionInPlace,
						Changes:    []pipeline.FieldChange{{Field: fmt.Sprintf("nodeGroups[%d].version", i), From: cur.Version, To: next.Version}},
						Disruption: "rolling: the group's nodes are replaced by nodes of the new version, each drained first"})
				}
			}
		}
	}
	groups, groupRefusals := nodeGroupChanges(cur, next)
	refused = append(refused, groupRefusals...)
	if len(groups) > 0 && !updatable {
		refused = append(refused, validation.FieldError{Field: "config.nodeGroups", Rule: "provider",
			Message: "the " + j.Provider + " driver does not change a live cluster's node groups yet"})
	}
	groups = mergeResources(append(resources, groups...))
	if len(refused) > 0 {
		return nil, refused
	}
	out := &pipeline.UpdatePlan{Config: req.Config, Steps: slices.Clone(j.Steps), Rerun: []string{},
		Resources: []pipeline.ResourceChange{{Resource: "cluster/" + cur.Name, Action: pipeline.ActionNoOp, Changes: []pipeline.FieldChange{}, Disruption: "none"}}}
	if len(groups) == 0 {
		return out, nil
	}
	out.Resources = groups
	if err := out.Reopen(j, StepCluster, StepFinalize); err != nil {
		return nil, err
	}
	return out, nil
}

// mergeResources makes one change per resource: a group upgraded to the control plane's
// version and resized in the same update is one entry with both changes (and the upgrade's
// disruption, the larger).
func mergeResources(in []pipeline.ResourceChange) []pipeline.ResourceChange {
	var out []pipeline.ResourceChange
	at := map[string]int{}
	for _, r := range in {
		if i, ok := at[r.Resource]; ok {
			out[i].Changes = append(out[i].Changes, r.Changes...)
			continue
		}
		at[r.Resource] = len(out)
		out = append(out, r)
	}
	return out
}

// nodeGroupChanges diffs the node groups by name: one resource change per group added,
// resized or removed, and a refusal per group whose instance type changed.
func nodeGroupChanges(cur, next Config) ([]pipeline.ResourceChange, validation.Error) {
	var (
		out     []pipeline.ResourceChange
		refused validation.Error
	)
	old := map[string]NodeGroup{}
	for _, g := range cur.NodeGroups {
		old[g.Name] = g
	}
	seen := map[string]bool{}
	for i, g := range next.NodeGroups {
		seen[g.Name] = true
		o, ok := old[g.Name]
		res := "node-group/" + g.Name
		if !ok {
			out = append(out, pipeline.ResourceChange{Resource: res, Action: pipeline.ActionInPlace, Disruption: "none: a new group",
				Changes: []pipeline.FieldChange{{Field: fmt.Sprintf("nodeGroups[%d]", i), From: nil, To: g}}})
			continue
		}
		if o.InstanceType != g.InstanceType {
			refused = append(refused, validation.FieldError{Field: fmt.Sprintf("config.nodeGroups[%d].instanceType", i), Rule: "immutable",
				Message: "a node group keeps its instance type: add a new group with " + g.InstanceType + " and remove " + g.Name + " in a later update"})
			continue
		}
		var ch []pipeline.FieldChange
		if o.Min != g.Min {
			ch = append(ch, pipeline.FieldChange{Field: fmt.Sprintf("nodeGroups[%d].min", i), From: o.Min, To: g.Min})
		}
		if o.Max != g.Max {
			ch = append(ch, pipeline.FieldChange{Field: fmt.Sprintf("nodeGroups[%d].max", i), From: o.Max, To: g.Max})
		}
		if len(ch) > 0 {
			out = append(out, pipeline.ResourceChange{Resource: res, Action: pipeline.ActionInPlace, Changes: ch,
				Disruption: "none; a smaller size drains and ends nodes"})
		}
	}
	for _, g := range cur.NodeGroups {
		if !seen[g.Name] {
			out = append(out, pipeline.ResourceChange{Resource: "node-group/" + g.Name, Action: pipeline.ActionInPlace,
				Disruption: "the group's nodes are drained and ended; their pods move to the other groups",
				Changes:    []pipeline.FieldChange{{Field: "nodeGroups", From: g, To: nil}}})
		}
	}
	return out, refused
}

// versionChange judges a control-plane version change: an upgrade of one minor version goes
// (the cloud upgrades the control plane in place); a downgrade or a jump of more than one
// minor version is refused as the cloud refuses it, with what a valid change is.
func versionChange(from, to string) (validation.FieldError, bool) {
	fe := validation.FieldError{Field: "config.version", Rule: "immutable"}
	fm, fok := minor(from)
	tm, tok := minor(to)
	switch {
	case !fok || !tok:
		fe.Message = "the version is MAJOR.MINOR, such as 1.30"
	case tm[0] != fm[0] || tm[1] < fm[1]:
		fe.Message = "a control plane is never downgraded (" + from + " → " + to + "); make a new cluster"
	case tm[1] > fm[1]+1:
		fe.Message = fmt.Sprintf("a control plane is upgraded one minor version at a time: %s → %d.%d first", from, fm[0], fm[1]+1)
	default:
		return fe, true
	}
	return fe, false
}

func minor(v string) ([2]int, bool) {
	a, b, ok := strings.Cut(v, ".")
	x, err1 := strconv.Atoi(a)
	y, err2 := strconv.Atoi(b)
	return [2]int{x, y}, ok && err1 == nil && err2 == nil
}
