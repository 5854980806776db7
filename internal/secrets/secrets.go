// Package secrets keeps credentials apart from the job store. The job store and every API answer
// carry only references ("local:sec_<ulid>"); the value is read back only by whoever holds a
// SecretStore, which is where auditing and RBAC are applied.
package secrets

import (
	"context"
	"strings"

	"github.com/groundworkhq/groundwork/internal/store"
)

// ErrNotFound is returned by Get when no secret has the reference.
var ErrNotFound = store.ErrSecretNotFound

// SecretStore stores secret values under opaque references.
type SecretStore interface {
	// Put stores value. key is either an existing reference (its value is replaced) or a
	// name: the first Put of a name creates a reference, later Puts of the same name replace
	// the value under that same reference, so a step that stores under a deterministic name
	// can be re-run without leaving orphans behind.
	Put(ctx context.Context, key, value string) (ref string, err error)
	// Get returns the value behind ref, or an error wrapping ErrNotFound.
	Get(ctx context.Context, ref string) (string, error)
	// Delete removes ref; deleting a missing reference succeeds (undo steps re-run).
	Delete(ctx context.Context, ref string) error
}

// IsRef reports whether s has the shape of a reference ("<backend>:<id>") rather than a name.
// Names may not contain ':' so the two never collide.
func IsRef(s string) bool {
	backend, id, ok := strings.Cut(s, ":")
	return ok && backend != "" && id != ""
}
