// Package registry is the registry family's pipeline: validate → create repository → finalize.
package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/steps"
)

// Step names and infra keys.
const (
	StepValidate   = "validate"
	StepRepository = "create_repository"
	StepFinalize   = "finalize"

	InfraRepository = "repository"
)

// Config is a registry request.
type Config struct {
	Name          string `json:"name"`
	ScanOnPush    bool   `json:"scanOnPush,omitempty"`
	ImmutableTags bool   `json:"immutableTags,omitempty"`
}

// Repository is what the step records.
type Repository struct {
	Name string `json:"name"`
	ID   string `json:"id"`
	URI  string `json:"uri"`
}

// Driver is the cloud work.
type Driver interface {
	EnsureRepository(ctx context.Context, j *job.Job, c Config) (Repository, error)
	DeleteRepository(ctx context.Context, j *job.Job, name string) error
}

// Resolver finds the driver for a job.
type Resolver func(ctx context.Context, j *job.Job) (Driver, error)

// Pipeline is the registry family's pipeline.
type Pipeline struct{ load steps.Loader[Config, Driver] }

var _ pipeline.Pipeline = (*Pipeline)(nil)

// New returns the pipeline.
func New(resolve Resolver) *Pipeline {
	return &Pipeline{load: steps.Loader[Config, Driver]{Decode: decode, Resolve: resolve}}
}

func (p *Pipeline) Family() job.Family      { return job.FamilyRegistry }
func (p *Pipeline) LeaseTTL() time.Duration { return 2 * time.Minute }

// repoName is the rule ECR, Artifact Registry and ACR names all satisfy.
var repoName = regexp.MustCompile(`^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$`)

func decode(raw json.RawMessage) (Config, error) {
	var c Config
	if err := json.Unmarshal(raw, &c); err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	if !repoName.MatchString(c.Name) || len(c.Name) > 200 {
		return c, fmt.Errorf("name: %q is not a repository name (lower-case letters, digits, . _ - /)", c.Name)
	}
	return c, nil
}

func (p *Pipeline) Validate(_ context.Context, j *job.Job) error {
	_, err := decode(j.Config)
	return err
}

func (p *Pipeline) Steps(*job.Job) []pipeline.Step {
	return []pipeline.Step{
		steps.Validate(StepValidate, p.Validate),
		steps.Resource[Config, Driver, Repository]{
			Name: StepRepository, Key: InfraRepository, Load: p.load, Ensure: Driver.EnsureRepository, Delete: deleteRepository,
		}.Step(),
		steps.Finalize(StepFinalize),
	}
}

func deleteRepository(d Driver, ctx context.Context, j *job.Job, c Config) error {
	return d.DeleteRepository(ctx, j, c.Name)
}
