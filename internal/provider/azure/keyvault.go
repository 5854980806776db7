package azure

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/provider"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
)

// refPrefix marks a Key Vault reference: "azkv:" and the secret's URL without a version, so
// a reference reads the current value and a rotation keeps it.
const refPrefix = "azkv:"

// SecretStore keeps secrets in the account's Key Vault (config.keyVaultURL). It has the
// method set of secrets.SecretStore.
type SecretStore struct {
	c    *Client
	kv   *azsecrets.Client
	tags map[string]*string

	// The SDK's Key Vault client learns its token's scope and tenant from the vault's first
	// answer (a bearer challenge) and stores them unguarded; requests are serialised until one
	// has been answered, so that no two learn it at once.
	first  sync.Mutex
	primed atomic.Bool
}

// call runs f, alone until the vault has answered once.
func (s *SecretStore) call(f func() error) error {
	if s.primed.Load() {
		return f()
	}
	s.first.Lock()
	defer s.first.Unlock()
	err := f()
	var re *azcore.ResponseError
	if err == nil || errors.As(err, &re) {
		s.primed.Store(true)
	}
	return err
}

var _ secrets.SecretStore = (*SecretStore)(nil)

// Secrets returns the account's Key Vault as a store whose secrets carry j's tags; nil when
// the account names no vault (its secrets stay in the server's own store).
func (c *Client) Secrets(j *job.Job) (*SecretStore, error) {
	if c.KeyVaultURL == "" {
		return nil, nil
	}
	opts := &azsecrets.ClientOptions{ClientOptions: c.opts.ClientOptions}
	kv, err := azsecrets.NewClient(c.KeyVaultURL, c.cred, opts)
	if err != nil {
		return nil, fmt.Errorf("key vault %s: %w", c.KeyVaultURL, err)
	}
	return &SecretStore{c: c, kv: kv, tags: tags(j, "secret")}, nil
}

var notVaultName = regexp.MustCompile(`[^A-Za-z0-9-]`)

// vaultName is a key as a Key Vault secret name (letters, digits and hyphens): "/" becomes
// "--" and anything else not allowed "-", so "job_01J…/admin" is "job-01J…--admin".
func vaultName(key string) string {
	return notVaultName.ReplaceAllString(strings.ReplaceAll(key, "/", "--"), "-")
}

// refName is the secret name in a reference made by this store.
func (s *SecretStore) refName(ref string) (string, bool) {
	u, ok := strings.CutPrefix(ref, refPrefix)
	if !ok {
		return "", false
	}
	base := strings.TrimSuffix(s.c.KeyVaultURL, "/") + "/secrets/"
	name, ok := strings.CutPrefix(u, base)
	return name, ok && name != "" && !strings.Contains(name, "/")
}

// Put implements secrets.SecretStore: a name makes (or, when it is this job's, replaces) the
// secret of that name; a reference gets a new version.
func (s *SecretStore) Put(ctx context.Context, key, value string) (string, error) {
	name, isRef := s.refName(key)
	if !isRef {
		if secrets.IsRef(key) {
			return "", fmt.Errorf("secret %s is not in %s: %w", key, s.c.KeyVaultURL, secrets.ErrNotFound)
		}
		name = vaultName(key)
		var have azsecrets.GetSecretResponse
		err := s.call(func() (err error) { have, err = s.kv.GetSecret(ctx, name, "", nil); return err })
		switch {
		case kvNotFound(err):
		case err != nil:
			return "", s.c.Classify(err)
		case !ownsTags(s.tags, have.Tags):
			// A stranger's secret of that name is never overwritten.
			return "", fmt.Errorf("key vault secret %s exists and is not this job's: %w", name, errNotOurs)
		}
	}
	err := s.call(func() error {
		_, err := s.kv.SetSecret(ctx, name, azsecrets.SetSecretParameters{Value: to.Ptr(value), Tags: s.tags,
			ContentType: to.Ptr("text/plain")}, nil)
		return err
	})
	if err != nil {
		return "", s.c.Classify(err)
	}
	return refPrefix + strings.TrimSuffix(s.c.KeyVaultURL, "/") + "/secrets/" + name, nil
}

// Get implements secrets.SecretStore: the current version's value.
func (s *SecretStore) Get(ctx context.Context, ref string) (string, error) {
	name, ok := s.refName(ref)
	if !ok {
		return "", fmt.Errorf("secret %q: %w", ref, secrets.ErrNotFound)
	}
	var v azsecrets.GetSecretResponse
	err := s.call(func() (err error) { v, err = s.kv.GetSecret(ctx, name, "", nil); return err })
	if kvNotFound(err) {
		return "", fmt.Errorf("secret %s: %w", ref, errors.Join(secrets.ErrNotFound, err))
	}
	if err != nil {
		return "", s.c.Classify(err)
	}
	if v.Value == nil {
		return "", nil
	}
	return *v.Value, nil
}

// Delete implements secrets.SecretStore: delete, then purge, so that nothing of a torn-down
// job's password stays recoverable. A vault whose purge protection (or the account's
// permissions) forbids the purge keeps the deleted secret for its retention period.
func (s *SecretStore) Delete(ctx context.Context, ref string) error {
	name, ok := s.refName(ref)
	if !ok {
		return nil
	}
	err := s.call(func() error { _, err := s.kv.DeleteSecret(ctx, name, nil); return err })
	if err != nil && !kvNotFound(err) {
		return s.c.Classify(err)
	}
	_, err = s.kv.PurgeDeletedSecret(ctx, name, nil)
	var re *azcore.ResponseError
	if err != nil && !(errors.As(err, &re) && re.StatusCode < 500 && re.StatusCode != http.StatusTooManyRequests) {
		return s.c.Classify(err)
	}
	return nil
}

func kvNotFound(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusNotFound
}

func ownsTags(want, have map[string]*string) bool {
	for _, k := range []string{TagJob, TagOrg, TagManagedBy} {
		if want[k] == nil || have[k] == nil || *want[k] != *have[k] {
			return false
		}
	}
	return true
}

// SecretStoreFor implements provider.SecretRoutes: a datastore job's secrets on an Azure
// space whose account names a Key Vault go to that vault; all else stays in the server's own
// store.
func (m *Module) SecretStoreFor(ctx context.Context, key string) (secrets.SecretStore, error) {
	var jobID string
	if u, ok := strings.CutPrefix(key, refPrefix); ok {
		i := strings.LastIndex(u, "/secrets/")
		if i < 0 {
			return nil, fmt.Errorf("secret %s: %w", key, secrets.ErrNotFound)
		}
		name := u[i+len("/secrets/"):]
		rest, ok := strings.CutPrefix(name, "job-")
		if !ok {
			return nil, fmt.Errorf("secret %s was not made by a job: %w", key, secrets.ErrNotFound)
		}
		jobID = "job_" + strings.SplitN(rest, "--", 2)[0]
	} else {
		if secrets.IsRef(key) {
			return nil, nil
		}
		id, _, ok := strings.Cut(key, "/")
		if !ok || !strings.HasPrefix(id, "job_") {
			return nil, nil
		}
		jobID = id
	}
	j, err := m.o.Records.GetJob(ctx, &store.GetJobParams{ID: jobID})
	isRef := strings.HasPrefix(key, refPrefix)
	switch {
	case errors.Is(err, store.ErrNotFound) && !isRef:
		return nil, nil // not a stored job yet: an adopt request's password stays in the server's store
	case errors.Is(err, store.ErrNotFound):
		return nil, fmt.Errorf("secret %s: job %s is gone: %w", key, jobID, errors.Join(secrets.ErrNotFound, err))
	case err != nil:
		return nil, provider.LookupErr("job "+jobID, err)
	}
	if j.Provider != Name || (!isRef && j.Family != job.FamilyDatastore) {
		return nil, nil
	}
	c, err := m.Client(ctx, j)
	if err != nil {
		return nil, err
	}
	st, err := c.Secrets(j)
	if err != nil || st == nil {
		return nil, err
	}
	return st, nil
}
