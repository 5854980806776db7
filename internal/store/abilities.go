package store

import (
	"context"
	"time"
)

// The interfaces below are abilities both SQL stores have beside Store. Each names what one
// consumer needs; Full gathers them, so that the application is wired with a value the compiler
// has checked rather than one asked for its abilities at run time.

// DueQueue tells how long the queue waits: the next-run time of the job that has been due the
// longest, and false when none is due.
type DueQueue interface {
	OldestDue(ctx context.Context, now time.Time) (time.Time, bool, error)
}

// ClusterSpaces lists the spaces of registered clusters, of every org, and records whether
// each answers. SetSpaceStatus reports whether the status changed.
type ClusterSpaces interface {
	ClusterSpaces(ctx context.Context) ([]*Space, error)
	SetSpaceStatus(ctx context.Context, id, status string) (bool, error)
}

// RequestKeys maps a provisioner protocol apply's idempotency key to the job serving it.
type RequestKeys interface {
	ClaimRequestKey(ctx context.Context, orgID, key, jobID string, now time.Time) (string, error)
	RequestKeyJob(ctx context.Context, orgID, key string) (string, error)
	ReplaceRequestKey(ctx context.Context, orgID, key, oldID, newID string) (string, error)
}

// DatastoreJobs answers what the datastore family asks of jobs beside their records: the job
// a secret reference belongs to (for reveal), and the jobs whose databases a restart must
// settle (a create or delete cut short).
type DatastoreJobs interface {
	SecretJob(ctx context.Context, ref string) (jobID string, err error)
	UnsettledDatabaseJobs(ctx context.Context) ([]string, error)
}

// Full is the whole store as the SQL implementations (sqlite and postgres, over sqlstore)
// provide it: the ledger and every ability. The application holds one and hands each part
// the narrow interface it declares.
type Full interface {
	Store
	Pruner
	Finisher
	DueQueue
	ClusterSpaces
	RequestKeys
	ProvisionerStore
	DatastoreRecords
	DatastoreJobs
	DatastoreSecretRefs
	SecretLedger
	EndedJobs
	RemediationTimeline
	Inspections
	JobRevisions
}

// Tx is the whole store bound to one transaction: what Audited hands its function. Every
// ability of Full is there, so that a change and its audit entry commit together whatever
// the change writes.
type Tx interface {
	Full
}
