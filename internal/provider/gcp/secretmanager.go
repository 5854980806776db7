package gcp

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/crc32"
	"regexp"
	"strings"

	secretmanager "google.golang.org/api/secretmanager/v1"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/provider"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
)

// smRefPrefix marks a Secret Manager reference: "gcpsm:" and the secret's name
// (projects/<project id>/secrets/<id>) without a version, so a reference reads the newest
// version and a rotation keeps it.
const smRefPrefix = "gcpsm:"

// roleSecret is the label role of a job's secrets.
const roleSecret = "secret"

// SecretStore keeps secrets in the project's Secret Manager (the account's
// config.secretManager), one secret per name, labelled as the job's. It has the method set
// of secrets.SecretStore. Each Put adds a version; Get reads the newest; Delete deletes the
// secret with all its versions, which Secret Manager keeps nothing of.
type SecretStore struct {
	c *Client
	s *secretmanager.Service
	j *job.Job
}

var _ secrets.SecretStore = (*SecretStore)(nil)

// Secrets returns the project's Secret Manager as a store whose secrets carry j's labels; nil
// when the account does not keep secrets there (they stay in the server's own store).
func (c *Client) Secrets(ctx context.Context, j *job.Job) (*SecretStore, error) {
	if !c.SecretManager {
		return nil, nil
	}
	s, err := secretmanager.NewService(ctx, c.Options(ServiceSecretManager)...)
	if err != nil {
		return nil, fault.System(err)
	}
	return &SecretStore{c: c, s: s, j: j}, nil
}

var (
	notSecretID = regexp.MustCompile(`[^A-Za-z0-9_-]`)
	secretIDRE  = regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`)
)

// secretID is a key as a secret id (letters, digits, '_' and '-', at most 255): "/" becomes
// "--" and anything else not allowed "-", so "job_01J…/admin" is "job_01J…--admin".
func secretID(key string) string {
	id := notSecretID.ReplaceAllString(strings.ReplaceAll(key, "/", "--"), "-")
	if len(id) > 255 {
		id = id[:255]
	}
	return id
}

func (st *SecretStore) secretName(id string) string {
	return "projects/" + st.c.ProjectID + "/secrets/" + id
}

// refID is the secret id in a reference made by this store (of the client's project).
func (st *SecretStore) refID(ref string) (string, bool) {
	rest, ok := strings.CutPrefix(ref, smRefPrefix)
	if !ok {
		return "", false
	}
	id, ok := strings.CutPrefix(rest, "projects/"+st.c.ProjectID+"/secrets/")
	return id, ok && secretIDRE.MatchString(id)
}

// read reads the secret id: nil when there is none.
func (st *SecretStore) read(ctx context.Context, id string) (*secretmanager.Secret, error) {
	v, err := st.s.Projects.Secrets.Get(st.secretName(id)).Context(ctx).Do()
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, st.c.Classify(err)
	}
	return v, nil
}

func (st *SecretStore) notOurs(id string) error {
	return fault.UserAction(fmt.Errorf("secret %s exists and is not job %s's: %w", st.secretName(id), st.j.ID, errNotOurs), "SecretNameTaken",
		"A Secret Manager secret of this job's name exists without the job's groundwork-job label; delete or rename it, then retry.",
		st.c.ConsoleURL("security/secret-manager"))
}

// Put implements secrets.SecretStore: a name makes the secret of that name (or, when it is
// this job's, adds a version to it); a reference adds a version. A secret that is not the
// job's is never written.
func (st *SecretStore) Put(ctx context.Context, key, value string) (string, error) {
	id, isRef := st.refID(key)
	if !isRef && secrets.IsRef(key) {
		return "", fmt.Errorf("secret %s is not in project %s's Secret Manager: %w", key, st.c.ProjectID, secrets.ErrNotFound)
	}
	if !isRef {
		id = secretID(key)
	}
	have, err := st.read(ctx, id)
	if err != nil {
		return "", err
	}
	if have == nil && isRef {
		return "", fmt.Errorf("secret %s: %w", key, secrets.ErrNotFound)
	}
	if have == nil {
		have, err = st.s.Projects.Secrets.Create("projects/"+st.c.ProjectID, &secretmanager.Secret{
			Labels:      labels(st.j, roleSecret),
			Replication: &secretmanager.Replication{Automatic: &secretmanager.Automatic{}},
		}).SecretId(id).Context(ctx).Do()
		if conflict(err) {
			// Made meanwhile (a concurrent Put of the name): whose it is decides.
			have, err = st.read(ctx, id)
			if err == nil && have == nil {
				return "", fault.Transientf("secret %s was made and deleted meanwhile", id)
			}
		}
		if err != nil {
			return "", st.c.Classify(err)
		}
	}
	if !owns(st.j, have.Labels) {
		return "", st.notOurs(id)
	}
	crc := crc32.Checksum([]byte(value), crc32.MakeTable(crc32.Castagnoli))
	_, err = st.s.Projects.Secrets.AddVersion(st.secretName(id), &secretmanager.AddSecretVersionRequest{
		Payload: &secretmanager.SecretPayload{Data: base64.StdEncoding.EncodeToString([]byte(value)), DataCrc32c: int64(crc),
			ForceSendFields: []string{"DataCrc32c"}},
	}).Context(ctx).Do()
	if notFound(err) {
		return "", fmt.Errorf("secret %s was deleted meanwhile: %w", id, secrets.ErrNotFound)
	}
	if err != nil {
		return "", st.c.Classify(err)
	}
	return smRefPrefix + st.secretName(id), nil
}

// Get implements secrets.SecretStore: the newest version's value.
func (st *SecretStore) Get(ctx context.Context, ref string) (string, error) {
	id, ok := st.refID(ref)
	if !ok {
		return "", fmt.Errorf("secret %q: %w", ref, secrets.ErrNotFound)
	}
	v, err := st.s.Projects.Secrets.Versions.Access(st.secretName(id) + "/versions/latest").Context(ctx).Do()
	if notFound(err) {
		return "", fmt.Errorf("secret %s: %w", ref, errors.Join(secrets.ErrNotFound, err))
	}
	if err != nil {
		return "", st.c.Classify(err)
	}
	if v.Payload == nil {
		return "", nil
	}
	raw, err := base64.StdEncoding.DecodeString(v.Payload.Data)
	if err != nil {
		return "", fault.System(fmt.Errorf("secret %s: payload is not base64: %w", ref, err))
	}
	return string(raw), nil
}

// Delete implements secrets.SecretStore: the secret goes with all its versions. One that is
// gone, or not the job's, is nothing of the job's to delete.
func (st *SecretStore) Delete(ctx context.Context, ref string) error {
	id, ok := st.refID(ref)
	if !ok {
		return nil
	}
	have, err := st.read(ctx, id)
	if err != nil || have == nil || !owns(st.j, have.Labels) {
		return err
	}
	if _, err := st.s.Projects.Secrets.Delete(st.secretName(id)).Context(ctx).Do(); err != nil && !notFound(err) {
		return st.c.Classify(err)
	}
	return nil
}

// SecretStoreFor implements provider.SecretRoutes: a datastore job's secrets on a GCP space
// whose account keeps secrets in Secret Manager go there; all else stays in the server's
// own store. The datastore family names its secrets "<jobID>/..."; a gcpsm: reference holds
// that name, hence its job and the job's account.
func (m *Module) SecretStoreFor(ctx context.Context, key string) (secrets.SecretStore, error) {
	var jobID string
	isRef := strings.HasPrefix(key, smRefPrefix)
	if isRef {
		i := strings.LastIndex(key, "/secrets/")
		if i < 0 {
			return nil, fmt.Errorf("secret %s: %w", key, secrets.ErrNotFound)
		}
		id, _, ok := strings.Cut(key[i+len("/secrets/"):], "--")
		if !ok || !strings.HasPrefix(id, "job_") {
			return nil, fmt.Errorf("secret %s was not made by a job: %w", key, secrets.ErrNotFound)
		}
		jobID = id
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
	st, err := c.Secrets(ctx, j)
	if err != nil || st == nil {
		return nil, err
	}
	return st, nil
}
