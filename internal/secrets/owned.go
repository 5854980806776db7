package secrets

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/groundworkhq/groundwork/internal/store"
)

// Kinds of object that own secrets.
const (
	OwnerJob     = store.OwnerJob     // a job's admin password, its databases' owner passwords, component values
	OwnerAccount = store.OwnerAccount // a cloud account's credentials
	OwnerCluster = store.OwnerCluster // a registered cluster's credential, keyed by its space
)

// Owner is who a secret belongs to: an organisation and one object in it. The store records
// owners, so the type is declared there.
type Owner = store.SecretOwner

// JobOwner is the owner of a job's secrets.
func JobOwner(orgID, jobID string) Owner { return Owner{OrgID: orgID, Kind: OwnerJob, ID: jobID} }

// ErrOwnedElsewhere refuses a Put of a name whose secret belongs to another owner.
var ErrOwnedElsewhere = store.ErrSecretOwnedElsewhere

// Ledger records which owner each reference belongs to. It holds no values: the job store
// implements it, so that ownership is checked against the same database as the objects.
type Ledger interface {
	// RecordSecretOwner binds ref to o. Binding a reference again to the same owner succeeds;
	// binding it to another one returns ErrOwnedElsewhere.
	RecordSecretOwner(ctx context.Context, ref string, o Owner, now time.Time) error
	// SecretOwner returns the owner of ref, or an error wrapping ErrNotFound.
	SecretOwner(ctx context.Context, ref string) (Owner, error)
	// ForgetSecretOwner removes the binding of ref; a missing one is not an error.
	ForgetSecretOwner(ctx context.Context, ref string) error
	// SecretsOwnedBy lists the references bound to o.
	SecretsOwnedBy(ctx context.Context, o Owner) ([]string, error)
}

// Vault is the only way into the secret store: every Put, Get and Delete names the owner it
// acts for, and a reference answers only to the organisation and object it was stored for.
// A reference handed in from outside (a request body, a job's config) is therefore worth
// nothing unless it already belongs to the caller's object.
type Vault struct {
	backend SecretStore
	ledger  Ledger
	now     func() time.Time
}

// NewVault returns a vault over backend (where values live) and ledger (who owns what).
func NewVault(backend SecretStore, ledger Ledger) *Vault {
	return &Vault{backend: backend, ledger: ledger, now: time.Now}
}

// For returns the secret store as owner sees it.
func (v *Vault) For(owner Owner) SecretStore { return owned{v: v, o: owner} }

// Owner returns the owner of ref (ErrNotFound when it has none).
func (v *Vault) Owner(ctx context.Context, ref string) (Owner, error) {
	return v.ledger.SecretOwner(ctx, ref)
}

// Forget deletes every secret owner holds: for an object that goes away before any step that
// would have deleted its secrets ran (a job cancelled while queued).
func (v *Vault) Forget(ctx context.Context, owner Owner) error {
	refs, err := v.ledger.SecretsOwnedBy(ctx, owner)
	if err != nil {
		return err
	}
	var errs []error
	for _, ref := range refs {
		errs = append(errs, v.For(owner).Delete(ctx, ref))
	}
	return errors.Join(errs...)
}

// EndedJobs names the jobs that have ended (cancelled or torn down) yet still own secrets:
// those whose end no step cleaned up after, such as a job cancelled while its first step ran.
type EndedJobs interface {
	OwnersOfEndedJobs(ctx context.Context, limit int) ([]Owner, error)
}

// SweepEnded forgets the secrets of up to limit ended jobs and says how many jobs it swept.
// A job whose secrets could not all be deleted is named again by the next sweep.
func (v *Vault) SweepEnded(ctx context.Context, src EndedJobs, limit int) (int, error) {
	owners, err := src.OwnersOfEndedJobs(ctx, limit)
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, o := range owners {
		if err := v.Forget(ctx, o); err != nil {
			errs = append(errs, fmt.Errorf("forget secrets of %s: %w", o, err))
		}
	}
	return len(owners), errors.Join(errs...)
}

// Janitor sweeps ended jobs' secrets at start, every interval, and whenever wake fires, until
// ctx ends. The sweep at start covers a process that stopped between a job's end and its sweep.
func (v *Vault) Janitor(ctx context.Context, src EndedJobs, wake <-chan struct{}, every time.Duration, log *slog.Logger) {
	const batch = 100
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		for {
			n, err := v.SweepEnded(ctx, src, batch)
			if err != nil && ctx.Err() == nil {
				log.Warn("ended jobs' secrets not all deleted; will try again", "error", err)
			}
			if err != nil || n < batch {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
	}
}

type owned struct {
	v *Vault
	o Owner
}

// check returns nil when ref belongs to the owner, an error wrapping ErrNotFound otherwise:
// another organisation's or object's secret is indistinguishable from one that does not exist.
func (s owned) check(ctx context.Context, ref string) error {
	if !s.o.Complete() {
		return fmt.Errorf("secret %s: no owner named: %w", ref, ErrNotFound)
	}
	got, err := s.v.ledger.SecretOwner(ctx, ref)
	if err != nil {
		return fmt.Errorf("secret %s: %w", ref, err)
	}
	if got != s.o {
		return fmt.Errorf("secret %s is not %s's: %w", ref, s.o, ErrNotFound)
	}
	return nil
}

// Put stores value under a name (recording the owner) or replaces the value of a reference
// the owner already holds.
func (s owned) Put(ctx context.Context, key, value string) (string, error) {
	if IsRef(key) {
		if err := s.check(ctx, key); err != nil {
			return "", err
		}
		return s.v.backend.Put(ctx, key, value)
	}
	if !s.o.Complete() {
		return "", fmt.Errorf("secret %s: no owner named: %w", key, ErrNotFound)
	}
	// Every name is derived by the server from the owner's ID (never taken from a request), so
	// a binding to someone else can only mean a programming error; it is refused loudly.
	ref, err := s.v.backend.Put(ctx, key, value)
	if err != nil {
		return "", err
	}
	if err := s.v.ledger.RecordSecretOwner(ctx, ref, s.o, s.v.now()); err != nil {
		return "", fmt.Errorf("record owner of %s: %w", ref, err)
	}
	return ref, nil
}

// Get reads a value the owner holds.
func (s owned) Get(ctx context.Context, ref string) (string, error) {
	if err := s.check(ctx, ref); err != nil {
		return "", err
	}
	return s.v.backend.Get(ctx, ref)
}

// Delete removes a secret the owner holds. A reference the owner does not hold is, from its
// side, already gone: nothing is deleted and nil is returned, so an undo step re-runs safely
// and never removes what belongs to someone else.
func (s owned) Delete(ctx context.Context, ref string) error {
	if err := s.check(ctx, ref); errors.Is(err, ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	if err := s.v.backend.Delete(ctx, ref); err != nil {
		return err
	}
	return s.v.ledger.ForgetSecretOwner(ctx, ref)
}
