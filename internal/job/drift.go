package job

import "time"

// ResourceRef names one cloud resource a job made: its type in the provider's words
// (security-group, vpc, subnet) and its id there.
type ResourceRef struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// Drift is one field of one resource whose value in the cloud differs from what the job
// applied. Applied and Actual are the field's two values as the inspector renders them (for
// a security group's ingress, the sorted rule lists); they never hold a secret, since they
// are stored and shown as they are. Step names the pipeline step that owns the resource:
// reconcile runs that step again.
type Drift struct {
	Resource ResourceRef `json:"resource"`
	Field    string      `json:"field"`
	Applied  any         `json:"applied"`
	Actual   any         `json:"actual"`
	Step     string      `json:"step"`
}

// Inspection is the outcome of the latest read-back of a job's resources.
type Inspection struct {
	JobID       string    `json:"-"`
	OrgID       string    `json:"-"`
	SpaceID     string    `json:"-"`
	InspectedAt time.Time `json:"inspectedAt"`
	// Drift is empty when every inspected field matches what was applied.
	Drift []Drift `json:"drift"`
}
