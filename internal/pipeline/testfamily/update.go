package testfamily

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// PlanUpdate makes the test family updatable (the jobs service's Updater): every top-level
// config key may change in place except "fixed", which is refused; a change re-runs every
// step. A smaller "retention" drops data, as a datastore's shorter backup retention does: it
// is refused unless the request allows data loss.
func (p *Pipeline) PlanUpdate(_ context.Context, j *job.Job, req pipeline.UpdateRequest) (*pipeline.UpdatePlan, error) {
	var from, to map[string]any
	_ = json.Unmarshal(j.Config, &from)
	if err := json.Unmarshal(req.Config, &to); err != nil || to == nil {
		return nil, validation.New("config", "type", "must be an object")
	}
	var keys []string
	for k := range from {
		keys = append(keys, k)
	}
	for k := range to {
		if _, ok := from[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	rc := pipeline.ResourceChange{Resource: "test", Action: pipeline.ActionNoOp, Changes: []pipeline.FieldChange{}, Disruption: "none"}
	for _, k := range keys {
		if reflect.DeepEqual(from[k], to[k]) {
			continue
		}
		if k == "fixed" {
			return nil, validation.New("config.fixed", "immutable", "cannot change in place")
		}
		if k == "retention" {
			was, _ := from[k].(float64)
			now, _ := to[k].(float64)
			if now < was {
				if !req.AllowDataLoss {
					return nil, validation.New("config.retention", "dataLoss", "a shorter retention drops the older data; send allowDataLoss: true to accept")
				}
				rc.DataLoss = true
			}
		}
		rc.Changes = append(rc.Changes, pipeline.FieldChange{Field: k, From: from[k], To: to[k]})
	}
	out := &pipeline.UpdatePlan{Resources: []pipeline.ResourceChange{rc}, Config: req.Config, Steps: slices.Clone(j.Steps), Rerun: []string{}}
	if len(rc.Changes) > 0 {
		out.Resources[0].Action = pipeline.ActionInPlace
		for i, s := range out.Steps {
			out.Steps[i] = job.StepRecord{Name: s.Name, Status: job.StepPending, Message: "config update"}
			out.Rerun = append(out.Rerun, s.Name)
		}
	}
	return out, nil
}
