package store

import (
	"context"
	"errors"
	"time"
)

// Kinds of object that own secrets.
const (
	OwnerJob     = "job"           // a job's admin password, its databases' owner passwords, component values
	OwnerAccount = "cloud-account" // a cloud account's credentials
	OwnerCluster = "cluster"       // a registered cluster's credential, keyed by its space
)

// SecretOwner is who a secret belongs to (secrets.Owner): an organisation and one object in it.
type SecretOwner struct {
	OrgID string `json:"orgID"`
	Kind  string `json:"kind"`
	ID    string `json:"id"`
}

func (o SecretOwner) String() string { return o.OrgID + "/" + o.Kind + "/" + o.ID }

// Complete reports whether every part of the owner is set.
func (o SecretOwner) Complete() bool { return o.OrgID != "" && o.Kind != "" && o.ID != "" }

var (
	// ErrSecretNotFound is returned when no secret has the reference (secrets.ErrNotFound).
	ErrSecretNotFound = errors.New("secret not found")
	// ErrSecretOwnedElsewhere refuses binding a reference that belongs to another owner
	// (secrets.ErrOwnedElsewhere).
	ErrSecretOwnedElsewhere = errors.New("the secret belongs to another owner")
)

// SecretLedger records which owner each reference belongs to (secrets.Ledger). It holds no
// values: the job store implements it, so that ownership is checked against the same database
// as the objects.
type SecretLedger interface {
	// RecordSecretOwner binds ref to o. Binding a reference again to the same owner succeeds;
	// binding it to another one returns ErrSecretOwnedElsewhere.
	RecordSecretOwner(ctx context.Context, ref string, o SecretOwner, now time.Time) error
	// SecretOwner returns the owner of ref, or an error wrapping ErrSecretNotFound.
	SecretOwner(ctx context.Context, ref string) (SecretOwner, error)
	// ForgetSecretOwner removes the binding of ref; a missing one is not an error.
	ForgetSecretOwner(ctx context.Context, ref string) error
	// SecretsOwnedBy lists the references bound to o.
	SecretsOwnedBy(ctx context.Context, o SecretOwner) ([]string, error)
}

// EndedJobs names the jobs that have ended (cancelled or torn down) yet still own secrets
// (secrets.EndedJobs).
type EndedJobs interface {
	OwnersOfEndedJobs(ctx context.Context, limit int) ([]SecretOwner, error)
}
