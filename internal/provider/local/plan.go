package local

import (
	"context"
	"encoding/json"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/plan"
)

// PlanSource plans the jobs of local spaces (plan.Source): the servers and secrets the
// datastore family makes on this machine. Nothing is called in a cloud, so no step lists an
// operation and there is no policy to grant.
type PlanSource struct{}

// Knows implements plan.Source: the datastore family calls no cloud here; what another
// family (a remote provisioner's) calls is not known.
func (PlanSource) Knows(j *job.Job) bool { return j.Family == job.FamilyDatastore }

// Steps implements plan.Source.
func (PlanSource) Steps(_ context.Context, j *job.Job, names []string) ([]plan.Step, error) {
	out := plan.BareSteps(names)
	if j.Family != job.FamilyDatastore {
		return out, nil
	}
	var c struct {
		Engine string `json:"engine"`
		Name   string `json:"name"`
		Host   string `json:"host"`
	}
	_ = json.Unmarshal(j.Config, &c)
	name := j.Name
	if name == "" {
		name = c.Name
	}
	if name == "" {
		name = j.ID
	}
	for i := range out {
		switch out[i].Name {
		case "credentials":
			if j.Mode == job.ModeCreate {
				out[i].Resources = []plan.Resource{{Type: "local_secret", Action: plan.ActionCreate, Name: j.ID + "/admin"}}
			}
		case "create_server":
			if j.Mode == job.ModeAdopt {
				out[i].Resources = []plan.Resource{{Type: "local_" + c.Engine + "_server", Action: plan.ActionAdopt, Name: c.Host}}
			} else {
				out[i].Resources = []plan.Resource{{Type: "local_" + c.Engine + "_server", Action: plan.ActionCreate, Name: name}}
			}
		}
	}
	return out, nil
}

// Policy implements plan.Source.
func (PlanSource) Policy(*job.Job, []string) (plan.Policy, error) { return plan.NoPolicy(), nil }
