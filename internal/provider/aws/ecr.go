package aws

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/ecr"
	ecrtypes "github.com/aws/aws-sdk-go-v2/service/ecr/types"
)

// RepositorySpec asks for one ECR repository.
type RepositorySpec struct {
	Tags          Tags
	Name          string
	ScanOnPush    bool
	ImmutableTags bool
}

// Repository is a created ECR repository.
type Repository struct {
	Name string `json:"name"`
	ARN  string `json:"arn"`
	URI  string `json:"uri"`
}

func (t Tags) ecr() []ecrtypes.Tag {
	m := t.Map()
	out := make([]ecrtypes.Tag, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, ecrtypes.Tag{Key: ptr(k), Value: ptr(m[k])})
	}
	return out
}

// EnsureRepository creates the repository, or accepts an existing one carrying this job's tags.
func (p *Provider) EnsureRepository(ctx context.Context, s RepositorySpec) (Repository, error) {
	mut := ecrtypes.ImageTagMutabilityMutable
	if s.ImmutableTags {
		mut = ecrtypes.ImageTagMutabilityImmutable
	}
	out, err := p.ecr.CreateRepository(ctx, &ecr.CreateRepositoryInput{
		RepositoryName: &s.Name, Tags: s.Tags.ecr(), ImageTagMutability: mut,
		ImageScanningConfiguration: &ecrtypes.ImageScanningConfiguration{ScanOnPush: s.ScanOnPush},
	})
	if err == nil {
		return repo(out.Repository), nil
	}
	if !isCode(err, "RepositoryAlreadyExistsException") {
		return Repository{}, p.classify(err, false)
	}
	got, err := p.ecr.DescribeRepositories(ctx, &ecr.DescribeRepositoriesInput{RepositoryNames: []string{s.Name}})
	if err != nil {
		return Repository{}, p.classify(err, true)
	}
	r := repo(&got.Repositories[0])
	tags, err := p.ecr.ListTagsForResource(ctx, &ecr.ListTagsForResourceInput{ResourceArn: &r.ARN})
	if err != nil {
		return r, p.classify(err, true)
	}
	m := map[string]string{}
	for _, t := range tags.Tags {
		m[deref(t.Key)] = deref(t.Value)
	}
	if !s.Tags.Owns(m) {
		return r, alreadyExists("ECR repository", s.Name)
	}
	return r, nil
}

// DeleteRepository removes the repository and its images; a missing one is success.
func (p *Provider) DeleteRepository(ctx context.Context, name string) error {
	_, err := p.ecr.DeleteRepository(ctx, &ecr.DeleteRepositoryInput{RepositoryName: &name, Force: true})
	if err != nil && !isCode(err, "RepositoryNotFoundException") {
		return p.classify(err, false)
	}
	return nil
}

func repo(r *ecrtypes.Repository) Repository {
	return Repository{Name: deref(r.RepositoryName), ARN: deref(r.RepositoryArn), URI: deref(r.RepositoryUri)}
}
