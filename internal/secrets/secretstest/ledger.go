package secretstest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/groundworkhq/groundwork/internal/secrets"
)

// Ledger is an in-memory secrets.Ledger with the job store's semantics, for tests of packages
// that have no job store at hand. The SQL stores' ledger is tested against the same rules by
// the store conformance suite.
type Ledger struct {
	mu     sync.Mutex
	owners map[string]secrets.Owner
}

var _ secrets.Ledger = (*Ledger)(nil)

// NewLedger returns an empty Ledger.
func NewLedger() *Ledger { return &Ledger{owners: map[string]secrets.Owner{}} }

// Vault returns a vault over backend that records owners in a new Ledger.
func Vault(backend secrets.SecretStore) *secrets.Vault { return secrets.NewVault(backend, NewLedger()) }

func (l *Ledger) RecordSecretOwner(_ context.Context, ref string, o secrets.Owner, _ time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if got, ok := l.owners[ref]; ok && got != o {
		return fmt.Errorf("secret %s: %w", ref, secrets.ErrOwnedElsewhere)
	}
	l.owners[ref] = o
	return nil
}

func (l *Ledger) SecretOwner(_ context.Context, ref string) (secrets.Owner, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	o, ok := l.owners[ref]
	if !ok {
		return o, fmt.Errorf("owner of %s: %w", ref, secrets.ErrNotFound)
	}
	return o, nil
}

func (l *Ledger) ForgetSecretOwner(_ context.Context, ref string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.owners, ref)
	return nil
}

func (l *Ledger) SecretsOwnedBy(_ context.Context, o secrets.Owner) ([]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for ref, got := range l.owners {
		if got == o {
			out = append(out, ref)
		}
	}
	return out, nil
}
