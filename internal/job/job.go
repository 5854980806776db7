// Package job holds the provisioning job model and the transition table that decides which
// status may follow which. It does no I/O: the store persists jobs, the engine drives them.
package job

import (
	"encoding/json"
	"time"
)

// Status is where a job stands in its lifecycle.
type Status string

const (
	StatusDraft        Status = "draft"
	StatusQueued       Status = "queued"
	StatusRunning      Status = "running"
	StatusCompleted    Status = "completed"
	StatusFailed       Status = "failed"
	StatusCancelled    Status = "cancelled"
	StatusDeleted      Status = "deleted"
	StatusAwaitingUser Status = "awaiting_user"
)

// Statuses lists every status, in lifecycle order; tests walk it to check the whole table.
var Statuses = []Status{
	StatusDraft, StatusQueued, StatusRunning, StatusAwaitingUser,
	StatusCompleted, StatusFailed, StatusCancelled, StatusDeleted,
}

// Valid reports whether s is a known status.
func (s Status) Valid() bool {
	for _, k := range Statuses {
		if k == s {
			return true
		}
	}
	return false
}

// Terminal reports whether nothing may follow s.
func (s Status) Terminal() bool { return s == StatusCancelled || s == StatusDeleted }

// Kind separates infrastructure work from remediation workflows; both share one ledger.
type Kind string

const (
	KindProvisioning Kind = "provisioning"
	KindRemediation  Kind = "remediation"
)

// Family is the resource family a provisioning job works on (the API's "kind" field).
type Family string

const (
	FamilyKubernetes Family = "kubernetes"
	FamilyVMPool     Family = "vm_pool"
	FamilyDatastore  Family = "datastore"
	FamilyNetwork    Family = "network"
	FamilyRegistry   Family = "registry"
	FamilyDNSZone    Family = "dns_zone"
	FamilyComponent  Family = "component"
)

// Families lists the resource families the API accepts.
var Families = []Family{
	FamilyKubernetes, FamilyVMPool, FamilyDatastore, FamilyNetwork,
	FamilyRegistry, FamilyDNSZone, FamilyComponent,
}

// Mode says whether the job creates the resource or only adopts one that exists.
type Mode string

const (
	ModeCreate Mode = "create"
	ModeAdopt  Mode = "adopt"
)

// Phase says which direction the pipeline runs: apply walks steps forward, teardown undoes the
// completed ones in reverse.
type Phase string

const (
	PhaseApply    Phase = "apply"
	PhaseTeardown Phase = "teardown"
)

// StepStatus is the state of one step record.
type StepStatus string

const (
	StepPending StepStatus = "pending"
	StepRunning StepStatus = "running"
	StepWaiting StepStatus = "waiting"
	StepDone    StepStatus = "done"
	StepSkipped StepStatus = "skipped"
	StepFailed  StepStatus = "failed"
	StepUndoing StepStatus = "undoing"
	StepUndone  StepStatus = "undone"
)

// Completed reports whether the step's forward work is finished (done or skipped).
func (s StepStatus) Completed() bool { return s == StepDone || s == StepSkipped }

// StepRecord is the durable record of one step of a job's pipeline.
type StepRecord struct {
	Name       string     `json:"name"`
	Status     StepStatus `json:"status"`
	Attempts   int        `json:"attempts"`
	StartedAt  *time.Time `json:"startedAt,omitempty"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	Message    string     `json:"message,omitempty"`
	Error      string     `json:"error,omitempty"`

	// Retries counts the step's transient failures in a row since it last made progress (a
	// wait or a finish). The retry budget and the backoff count these, not Attempts, so a step
	// that polls a slow resource many times keeps its whole budget.
	Retries int `json:"retries,omitempty"`
	// Waits counts the step's waits in a row (polls of a resource not ready yet); a step's
	// backoff lengthens its polls with it. A finish, a skip or a pause for a decision resets it, and so does a
	// retry through the API; a transient failure between waits does not.
	Waits int `json:"waits,omitempty"`
}

// FailureClass buckets a failure so that a caller knows who must act.
type FailureClass string

const (
	// ClassTransient is cloud-side throttling or eventual consistency: retrying may succeed.
	ClassTransient FailureClass = "transient"
	// ClassUserAction needs the customer to fix something (permission, quota, input).
	ClassUserAction FailureClass = "user_action"
	// ClassSystem is our code or an unsupported API.
	ClassSystem FailureClass = "system"
)

// Failure describes why a job failed.
type Failure struct {
	Class      FailureClass `json:"class"`
	Code       string       `json:"code,omitempty"`
	Message    string       `json:"message"`
	FixHint    string       `json:"fixHint,omitempty"`
	ConsoleURL string       `json:"consoleUrl,omitempty"`
	Step       string       `json:"step,omitempty"`
	Retryable  bool         `json:"retryable"`
}

// Job is one row of the provisioning ledger.
type Job struct {
	ID              string            `json:"id"`
	OrgID           string            `json:"orgID"`
	SpaceID         string            `json:"spaceID"`
	Kind            Kind              `json:"jobKind"`
	Family          Family            `json:"kind"`
	Provider        string            `json:"provider"`
	Mode            Mode              `json:"mode"`
	Name            string            `json:"name,omitempty"`
	Tags            map[string]string `json:"tags,omitempty"`
	SubjectType     string            `json:"subjectType,omitempty"`
	SubjectID       string            `json:"subjectID,omitempty"`
	Config          json.RawMessage   `json:"config"`
	Infra           json.RawMessage   `json:"infra"`
	Steps           []StepRecord      `json:"steps"`
	Status          Status            `json:"status"`
	Phase           Phase             `json:"phase"`
	CancelRequested bool              `json:"cancelRequested,omitempty"`
	Failure         *Failure          `json:"failure,omitempty"`
	LeaseOwner      string            `json:"-"`
	LeaseToken      int64             `json:"-"`
	LeaseExpiresAt  *time.Time        `json:"-"`
	LeaseTTL        time.Duration     `json:"-"`
	NextRunAt       time.Time         `json:"nextRunAt"`
	Version         int64             `json:"version"`
	CreatedAt       time.Time         `json:"createdAt"`
	UpdatedAt       time.Time         `json:"updatedAt"`

	// DBNow is the database's clock at the moment the store granted or extended this copy's
	// lease (claims and checkpoints that keep the lease set it; zero otherwise). LeaseExpiresAt
	// is written in the caller's clock; DBNow is what tells a worker how long its lease really
	// has by the clock every claimer compares against.
	DBNow time.Time `json:"-"`
	// TakenOver is set on a copy returned by a claim when the job's lease was taken over after
	// it expired, rather than handed over: an earlier holder may have acted on the step it was
	// running and written nothing since.
	TakenOver bool `json:"-"`
}

// StepIndex returns the index of the named step, or -1.
func (j *Job) StepIndex(name string) int {
	for i := range j.Steps {
		if j.Steps[i].Name == name {
			return i
		}
	}
	return -1
}

// AnyStepCompleted reports whether some step did forward work that teardown must undo.
func (j *Job) AnyStepCompleted() bool {
	for _, s := range j.Steps {
		if s.Status == StepDone || s.Status == StepUndoing || s.Status == StepRunning || s.Status == StepWaiting {
			return true
		}
	}
	return false
}
