// Package store declares the durable state Groundwork keeps (the job ledger, spaces, cloud
// accounts) and the errors its implementations return. Implementations live in sqlite/ and
// postgres/ and both pass the conformance suite in storetest/.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
)

var (
	// ErrNotFound: no such row in the caller's org.
	ErrNotFound = errors.New("not found")
	// ErrVersionConflict: the row changed since the caller read it.
	ErrVersionConflict = errors.New("version conflict")
	// ErrLeaseLost: the caller's lease was taken over; it must stop and write nothing.
	ErrLeaseLost = errors.New("lease lost")
	// ErrInUse: the row is referenced by others and cannot be deleted.
	ErrInUse = errors.New("in use")
)

// Store is the ledger. Every method that compares times takes Now from its params so that tests
// control the clock.
type Store interface {
	CreateJob(ctx context.Context, p *CreateJobParams) (*job.Job, error)
	GetJob(ctx context.Context, p *GetJobParams) (*job.Job, error)
	ListJobs(ctx context.Context, p *ListJobsParams) (*JobPage, error)
	// UpdateJob changes the fields set in p if the row is still at p.Version. It never touches
	// the lease, so it is safe while a worker runs the job.
	UpdateJob(ctx context.Context, p *UpdateJobParams) (*job.Job, error)
	// ClaimJobs leases up to p.Limit due jobs: queued ones whose next run is due and running
	// ones whose lease expired. Each claim bumps the job's fencing token.
	ClaimJobs(ctx context.Context, p *ClaimJobsParams) ([]*job.Job, error)
	// Checkpoint writes a worker's progress if it still holds the lease (token match).
	Checkpoint(ctx context.Context, p *CheckpointParams) (*job.Job, error)
	// RenewLease extends the lease of a job the caller holds.
	RenewLease(ctx context.Context, p *RenewLeaseParams) (time.Time, error)
	// CountJobs returns the number of jobs per status (for metrics).
	CountJobs(ctx context.Context) (map[job.Status]int, error)

	CreateSpace(ctx context.Context, s *Space) error
	GetSpace(ctx context.Context, orgID, id string) (*Space, error)
	ListSpaces(ctx context.Context, orgID string) ([]*Space, error)
	DeleteSpace(ctx context.Context, orgID, id string) error

	CreateCloudAccount(ctx context.Context, a *CloudAccount) error
	GetCloudAccount(ctx context.Context, orgID, id string) (*CloudAccount, error)
	ListCloudAccounts(ctx context.Context, orgID string) ([]*CloudAccount, error)

	AccessStore
	AuditStore

	// Wakeups delivers a signal whenever a job may have become due (created, queued, released),
	// on this replica or, where the database can tell, on others. It is a hint: the engine also
	// polls.
	Wakeups(ctx context.Context) <-chan struct{}
	Ping(ctx context.Context) error
	Close() error
}

// Pruner removes jobs that are over from the ledger. A job is over when it was cancelled or
// torn down (deleted): a completed job stands for infrastructure that exists and can still be
// torn down, and a failed one can be retried, so neither is ever pruned, whatever its age.
type Pruner interface {
	PruneJobs(ctx context.Context, p *PruneJobsParams) (int, error)
}

type PruneJobsParams struct {
	// Before: jobs whose last change is older than this go.
	Before time.Time
	// Limit bounds one call, so that a large backlog is removed in short transactions.
	Limit int
}

type CreateJobParams struct {
	Job *job.Job // ID, OrgID, SpaceID, Kind, Family, Provider, Mode, Config, Steps, Status, Phase, LeaseTTL, NextRunAt
	Now time.Time
}

type GetJobParams struct {
	OrgID string // empty: any org (engine use only)
	ID    string
}

type ListJobsParams struct {
	OrgID   string
	Status  job.Status
	Family  job.Family
	SpaceID string
	After   string // cursor: the last id of the previous page
	Limit   int
}

type JobPage struct {
	Jobs []*job.Job
	// Next is the cursor for the following page, empty on the last page.
	Next string
}

type UpdateJobParams struct {
	OrgID   string
	ID      string
	Version int64
	Now     time.Time

	Name            *string
	Tags            map[string]string // nil: unchanged
	Status          *job.Status
	Phase           *job.Phase
	CancelRequested *bool
	Steps           []job.StepRecord // nil: unchanged
	Failure         *job.Failure
	ClearFailure    bool
	Config          json.RawMessage // nil: unchanged
	NextRunAt       *time.Time
}

type ClaimJobsParams struct {
	Owner string
	Now   time.Time
	Limit int
}

type CheckpointParams struct {
	ID         string
	LeaseToken int64
	Now        time.Time

	Steps     []job.StepRecord
	Infra     json.RawMessage
	Status    job.Status
	Phase     job.Phase
	Failure   *job.Failure // nil clears
	NextRunAt time.Time
	// Release gives the lease up (the job is waiting, handed back, or finished).
	Release bool
}

// Finisher writes a job's last step result and its end together: one write of one job that
// moves it two versions on (the result's, then the end's), the end only if no cancel was
// requested meanwhile. Subscribers can be told of both versions, at the cost of one write.
type Finisher interface {
	// CheckpointThenEnd writes first, then end. end is nil, with no error, when a cancel was
	// requested (the job goes on, with first's result); ErrLeaseLost when first was refused.
	CheckpointThenEnd(ctx context.Context, first, end *CheckpointParams) (written, ended *job.Job, err error)
}

type RenewLeaseParams struct {
	ID         string
	LeaseToken int64
	Now        time.Time
}

// Space is a target for provisioning: a cloud account and region, or a registered cluster.
type Space struct {
	ID             string          `json:"id"`
	OrgID          string          `json:"orgID"`
	Name           string          `json:"name"`
	Provider       string          `json:"provider"`
	Region         string          `json:"region"`
	SpaceType      string          `json:"spaceType"`
	CloudAccountID string          `json:"cloudAccountID,omitempty"`
	Status         string          `json:"status"`
	Config         json.RawMessage `json:"config,omitempty"`
	CreatedAt      time.Time       `json:"createdAt"`
}

// CloudAccount names cloud credentials by reference; the secret itself lives in a secret store.
type CloudAccount struct {
	ID              string          `json:"id"`
	OrgID           string          `json:"orgID"`
	Name            string          `json:"name"`
	Provider        string          `json:"provider"`
	Region          string          `json:"region"`
	AuthMethod      string          `json:"authMethod"`
	CredentialsRef  string          `json:"credentialsRef,omitempty"`
	PermissionLevel string          `json:"permissionLevel"`
	Config          json.RawMessage `json:"config,omitempty"`
	CreatedAt       time.Time       `json:"createdAt"`
}
