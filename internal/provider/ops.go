package provider

import (
	"encoding/json"

	"github.com/groundworkhq/groundwork/internal/job"
)

// Ops are a step's long-running operations in flight, by resource and verb ("create
// network", "delete router"): what the cloud needs to read each again (an operation's name,
// an SDK poller's resume token). A driver returns them in its result's Data under "ops" so
// that the engine records them with the step; the next call reads them back from the job and
// polls the same operations instead of starting others, in this process or a restarted one.
type Ops map[string]string

// OpsOf reads the operations recorded under infra key (a driver result with Data.ops); none
// is an empty, writable Ops.
func OpsOf(j *job.Job, key string) Ops {
	var infra map[string]struct {
		Data struct {
			Ops Ops `json:"ops"`
		} `json:"data"`
	}
	ops := Ops{}
	if len(j.Infra) == 0 || json.Unmarshal(j.Infra, &infra) != nil {
		return ops
	}
	for k, v := range infra[key].Data.Ops {
		ops[k] = v
	}
	return ops
}
