package aws

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

	"github.com/groundworkhq/groundwork/internal/fault"
)

// SecretStore keeps secrets in AWS Secrets Manager; a reference is the secret's ARN. It has the
// method set of the SecretStore that internal/secrets declares.
type SecretStore struct {
	p    *Provider
	tags Tags
}

// Secrets returns a store whose new secrets carry tags (role "secret").
func (p *Provider) Secrets(tags Tags) *SecretStore {
	return &SecretStore{p: p, tags: tags.WithRole("secret")}
}

// Put stores value under name (creating or overwriting it) and returns the secret's ARN.
func (s *SecretStore) Put(ctx context.Context, name, value string) (string, error) {
	m := s.tags.Map()
	tags := make([]smtypes.Tag, 0, len(m))
	for _, k := range sortedKeys(m) {
		tags = append(tags, smtypes.Tag{Key: ptr(k), Value: ptr(m[k])})
	}
	out, err := s.p.sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: &name, SecretString: &value, Tags: tags})
	if err == nil {
		return deref(out.ARN), nil
	}
	if !isCode(err, "ResourceExistsException") {
		return "", s.p.classify(err, false)
	}
	put, err := s.p.sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: &name, SecretString: &value})
	if err != nil {
		return "", s.p.classify(err, true)
	}
	return deref(put.ARN), nil
}

// Get returns the current value of the secret at ref.
func (s *SecretStore) Get(ctx context.Context, ref string) (string, error) {
	out, err := s.p.sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &ref})
	if err != nil {
		if isCode(err, "ResourceNotFoundException") {
			return "", fault.System(fmt.Errorf("secret %s: %w", ref, err))
		}
		return "", s.p.classify(err, false)
	}
	return deref(out.SecretString), nil
}

// Delete removes the secret at once (no recovery window: the job that made it is being torn
// down). A missing secret is success.
func (s *SecretStore) Delete(ctx context.Context, ref string) error {
	_, err := s.p.sm.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{SecretId: &ref, ForceDeleteWithoutRecovery: ptr(true)})
	if err != nil && !isCode(err, "ResourceNotFoundException") {
		return s.p.classify(err, false)
	}
	return nil
}
