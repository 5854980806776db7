package store

import (
	"context"
	"encoding/json"
	"time"
)

// RevisionStatus is where a job's configuration revision stands.
type RevisionStatus string

const (
	// RevisionApplying: the update was accepted and the job is carrying it out.
	RevisionApplying RevisionStatus = "applying"
	// RevisionApplied: the job's infrastructure has this revision's config.
	RevisionApplied RevisionStatus = "applied"
	// RevisionFailed: the update's steps failed; the infrastructure may be part way.
	RevisionFailed RevisionStatus = "failed"
	// RevisionSuperseded: applied once, then a later revision was applied; or awaiting
	// approval when a later update or rollback was accepted in its place.
	RevisionSuperseded RevisionStatus = "superseded"
	// RevisionAwaitingApproval: an update (or rollback) that drops data, recorded and waiting
	// for a second principal's approval; the job has not been queued for it.
	RevisionAwaitingApproval RevisionStatus = "awaiting_approval"
	// RevisionRejected: awaiting approval, then rejected; nothing ran.
	RevisionRejected RevisionStatus = "rejected"
)

// JobRevision is one accepted configuration of a job: number 1 is the config the job was
// created with (recorded when the first update is accepted), each update or rollback adds
// the next. Infra is the job's infra document as it was when the revision was accepted.
type JobRevision struct {
	OrgID  string          `json:"-"`
	JobID  string          `json:"jobID"`
	Number int             `json:"number"`
	Config json.RawMessage `json:"config"`
	Infra  json.RawMessage `json:"infra"`
	Status RevisionStatus  `json:"status"`
	// Reason is create, update or rollback.
	Reason    string    `json:"reason"`
	Actor     string    `json:"actor"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// JobRevisions keeps the configuration revisions of jobs. AddRevision refuses a number the
// job already has with ErrVersionConflict (two updates racing for the same number).
type JobRevisions interface {
	AddRevision(ctx context.Context, r JobRevision) error
	// ListRevisions returns the job's revisions, oldest first; none across orgs.
	ListRevisions(ctx context.Context, orgID, jobID string) ([]JobRevision, error)
	SetRevisionStatus(ctx context.Context, orgID, jobID string, number int, status RevisionStatus, now time.Time) error
}
