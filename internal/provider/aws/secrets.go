package aws

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

	"github.com/groundworkhq/groundwork/internal/secrets"
)

var _ secrets.SecretStore = (*SecretStore)(nil)

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

// Put stores value under key and returns the secret's ARN. key is a name (the first Put creates
// the secret, later ones replace its value under the same ARN) or an ARN (its value is replaced).
func (s *SecretStore) Put(ctx context.Context, key, value string) (string, error) {
	if secrets.IsRef(key) {
		in := &secretsmanager.PutSecretValueInput{SecretId: &key}
		in.SecretString, in.SecretBinary = encodeSecret(value)
		put, err := s.p.sm.PutSecretValue(ctx, in)
		if isCode(err, "ResourceNotFoundException") {
			return "", fmt.Errorf("secret %s: %w", key, secrets.ErrNotFound)
		}
		if err != nil {
			return "", s.p.classify(err, false)
		}
		return deref(put.ARN), nil
	}
	name := key
	m := s.tags.Map()
	tags := make([]smtypes.Tag, 0, len(m))
	for _, k := range sortedKeys(m) {
		tags = append(tags, smtypes.Tag{Key: ptr(k), Value: ptr(m[k])})
	}
	in := &secretsmanager.CreateSecretInput{Name: &name, Tags: tags}
	in.SecretString, in.SecretBinary = encodeSecret(value)
	out, err := s.p.sm.CreateSecret(ctx, in)
	if err == nil {
		return deref(out.ARN), nil
	}
	if !isCode(err, "ResourceExistsException") {
		return "", s.p.classify(err, false)
	}
	// The name is the key: a repeat after a lost answer meets the secret it made. Its value is
	// replaced only when it carries this store's tags; a stranger's secret is never written.
	desc, err := s.p.sm.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: &name})
	if err != nil {
		return "", s.p.classify(err, true)
	}
	have := map[string]string{}
	for _, t := range desc.Tags {
		have[deref(t.Key)] = deref(t.Value)
	}
	if !s.tags.Owns(have) {
		return "", alreadyExists("secret", name)
	}
	pin := &secretsmanager.PutSecretValueInput{SecretId: &name}
	pin.SecretString, pin.SecretBinary = encodeSecret(value)
	put, err := s.p.sm.PutSecretValue(ctx, pin)
	if err != nil {
		return "", s.p.classify(err, true)
	}
	return deref(put.ARN), nil
}

// Get returns the current value of the secret at ref.
func (s *SecretStore) Get(ctx context.Context, ref string) (string, error) {
	// Only an ARN is a reference: a bare name would read a secret this store never returned.
	if !strings.HasPrefix(ref, "arn:") {
		return "", fmt.Errorf("secret %q: %w", ref, secrets.ErrNotFound)
	}
	out, err := s.p.sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &ref})
	if err != nil {
		if isCode(err, "ResourceNotFoundException", "ValidationException", "InvalidParameterException") {
			return "", fmt.Errorf("secret %s: %w", ref, errors.Join(secrets.ErrNotFound, err))
		}
		return "", s.p.classify(err, false)
	}
	if out.SecretString == nil && len(out.SecretBinary) == 1 && out.SecretBinary[0] == 0 {
		return "", nil
	}
	return deref(out.SecretString), nil
}

// encodeSecret picks the field for value. Secrets Manager refuses an empty SecretString, so the
// empty value is stored as one zero byte of SecretBinary, a form this store never writes
// otherwise.
func encodeSecret(value string) (*string, []byte) {
	if value == "" {
		return nil, []byte{0}
	}
	return &value, nil
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
