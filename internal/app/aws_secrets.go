package app

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/provider/aws"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
)

// awsDatastoreSecrets keeps the credentials of a datastore job on AWS (its admin password,
// its databases' owner passwords) in the Secrets Manager of the job's cloud account, as the
// reference has it ("written to the cloud provider's secret manager; only the secret reference
// is stored"), and every other secret in the server's own store.
//
// The datastore family names its secrets "<jobID>/..." (the pipeline's admin password, the
// service's owner passwords), so a Put is routed by the job the name starts with. A reference
// routes itself: a Secrets Manager ARN holds the name it was created under, hence the job and
// its account; anything else is the server's own store's.
type awsDatastoreSecrets struct {
	local secrets.SecretStore
	aws   *awsParts
}

var _ secrets.SecretStore = awsDatastoreSecrets{}

// awsSecretsFor returns the Secrets Manager store of an AWS datastore job named by key (a name
// or an ARN), or nil when key belongs to the server's own store.
func (s awsDatastoreSecrets) awsSecretsFor(ctx context.Context, key string) (*aws.SecretStore, error) {
	name, isARN := secretsManagerName(key)
	if !isARN {
		if secrets.IsRef(key) {
			return nil, nil
		}
		name = key
	}
	jobID, _, ok := strings.Cut(name, "/")
	if !ok || !strings.HasPrefix(jobID, "job_") {
		if isARN {
			return nil, fmt.Errorf("secret %s was not made by a datastore job: %w", key, secrets.ErrNotFound)
		}
		return nil, nil
	}
	j, err := s.aws.st.GetJob(ctx, &store.GetJobParams{ID: jobID})
	switch {
	case errors.Is(err, store.ErrNotFound) && !isARN:
		// Not a stored job yet: an adopt request's password, moved out of the config before the
		// job is stored, stays in the server's store.
		return nil, nil
	case errors.Is(err, store.ErrNotFound):
		// Without its job the secret's account cannot be reached.
		return nil, fmt.Errorf("secret %s: job %s is gone: %w", key, jobID, errors.Join(secrets.ErrNotFound, err))
	case err != nil:
		return nil, s.aws.lookupErr("job "+jobID, err)
	}
	if !isARN && (j.Family != job.FamilyDatastore || j.Provider != "aws") {
		return nil, nil
	}
	o, err := s.aws.resolve(ctx, j)
	if err != nil {
		return nil, err
	}
	return o.p.Secrets(aws.JobTags(j)), nil
}

// secretsManagerName returns the secret name inside a Secrets Manager ARN
// (arn:<partition>:secretsmanager:<region>:<account>:secret:<name>-<6 random characters>),
// suffix included: only its "<jobID>/" prefix is read.
func secretsManagerName(ref string) (string, bool) {
	parts := strings.SplitN(ref, ":", 7)
	if len(parts) != 7 || parts[0] != "arn" || parts[2] != "secretsmanager" || parts[5] != "secret" {
		return "", false
	}
	return parts[6], true
}

// Put implements secrets.SecretStore.
func (s awsDatastoreSecrets) Put(ctx context.Context, key, value string) (string, error) {
	sm, err := s.awsSecretsFor(ctx, key)
	if err != nil {
		return "", err
	}
	if sm == nil {
		return s.local.Put(ctx, key, value)
	}
	return sm.Put(ctx, key, value)
}

// Get implements secrets.SecretStore.
func (s awsDatastoreSecrets) Get(ctx context.Context, ref string) (string, error) {
	sm, err := s.awsSecretsFor(ctx, ref)
	if err != nil {
		return "", err
	}
	if sm == nil {
		return s.local.Get(ctx, ref)
	}
	return sm.Get(ctx, ref)
}

// Delete implements secrets.SecretStore.
func (s awsDatastoreSecrets) Delete(ctx context.Context, ref string) error {
	sm, err := s.awsSecretsFor(ctx, ref)
	if err != nil {
		return err
	}
	if sm == nil {
		return s.local.Delete(ctx, ref)
	}
	return sm.Delete(ctx, ref)
}
