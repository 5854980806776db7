package store

import (
	"context"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
)

// Inspections keeps the latest drift inspection of each job and when it is next due.
type Inspections interface {
	// RecordInspection writes in as the job's latest inspection, replacing the one before.
	RecordInspection(ctx context.Context, in *job.Inspection) error
	// GetInspection reads the latest inspection of a job of the org; ErrNotFound when the
	// job was never inspected.
	GetInspection(ctx context.Context, orgID, jobID string) (*job.Inspection, error)
	// ClaimInspection moves the job's next-inspect time to next if it is due at now (a job
	// never claimed is due), and reports whether this caller moved it. It is one conditional
	// write, so of several replicas asking at once for the same interval exactly one wins.
	ClaimInspection(ctx context.Context, orgID, jobID string, now, next time.Time) (bool, error)
	// DriftCounts sums the drifted fields of the latest inspections per org and space.
	DriftCounts(ctx context.Context) ([]DriftCount, error)
}

// DriftCount is the number of drifted fields the latest inspections of a space's jobs found.
type DriftCount struct {
	OrgID, SpaceID string
	Fields         int
}
