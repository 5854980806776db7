package azure

import (
	"encoding/json"
	"fmt"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
)

// stateOf reads a GET's answer: not found is no error; a resource of the job's name that is
// not the job's (its tags say another job's) is refused, as reusing it would hand one job's
// resource to another.
func stateOf(err error, tags map[string]*string, props any, j *job.Job) (State, error) {
	if notFound(err) {
		return State{}, nil
	}
	if err != nil {
		return State{}, err
	}
	if !owns(j, tags) {
		return State{}, fault.UserAction(errNotOurs, "NameTaken",
			"A resource with this job's name exists without the job's groundwork-job tag; delete or rename it, then retry.", "")
	}
	return State{Found: true, Provisioning: provisioning(props)}, nil
}

// provisioning is properties.provisioningState of any resource's properties.
func provisioning(props any) string {
	raw, err := json.Marshal(props)
	if err != nil {
		return ""
	}
	var p struct {
		ProvisioningState any `json:"provisioningState"`
	}
	_ = json.Unmarshal(raw, &p)
	if p.ProvisioningState == nil {
		return ""
	}
	return fmt.Sprint(p.ProvisioningState)
}
