package store

import "context"

// DatastoreSecretRefs moves a datastore job's records from one secret reference to another: the
// step of a credential rotation that makes every database and connection holding the rotated
// credential hold its new version.
type DatastoreSecretRefs interface {
	// RepointDatastoreSecret replaces oldRef by newRef in the job's database and connection
	// records and returns how many it changed. Records already on newRef are left alone, so a
	// re-run changes nothing.
	RepointDatastoreSecret(ctx context.Context, jobID, oldRef, newRef string) (int, error)
}
