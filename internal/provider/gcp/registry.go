package gcp

import (
	"context"
	"fmt"
	"strings"

	ar "google.golang.org/api/artifactregistry/v1"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/registry"
)

// roleRegistry is the label role of a job's Artifact Registry repository.
const roleRegistry = "registry"

// RegistryDriver makes a job's Artifact Registry repository: one Docker-format repository
// per job in the space's region. Artifact Registry makes an image's path on its first push,
// so the job's repository name is recorded as its address in the registry.
type RegistryDriver struct{ C *Client }

var _ registry.Driver = RegistryDriver{}

// RegistryDriver implements provider.RegistryDrivers.
func (m *Module) RegistryDriver(ctx context.Context, j *job.Job) (registry.Driver, error) {
	c, err := m.Client(ctx, j)
	if err != nil {
		return nil, err
	}
	return RegistryDriver{C: c}, nil
}

func (d RegistryDriver) service(ctx context.Context) (*ar.Service, error) {
	s, err := ar.NewService(ctx, d.C.Options(ServiceArtifactRegistry)...)
	if err != nil {
		return nil, fault.System(err)
	}
	return s, nil
}

func (d RegistryDriver) parent() string {
	return "projects/" + d.C.ProjectID + "/locations/" + d.C.Region
}

// repository is the job's repository's resource name.
func (d RegistryDriver) repository(j *job.Job) string {
	return d.parent() + "/repositories/" + name(j, "images")
}

// resource is the job's repository in the terms converge and remove use.
func (d RegistryDriver) resource(s *ar.Service, j *job.Job, cfg registry.Config, got **ar.Repository) Resource {
	full := d.repository(j)
	return Resource{
		Get: func(ctx context.Context) (State, error) {
			r, err := s.Projects.Locations.Repositories.Get(full).Context(ctx).Do()
			if notFound(err) {
				return State{}, nil
			}
			if err != nil {
				return State{}, err
			}
			*got = r
			return State{Found: true, Ours: owns(j, r.Labels), Ready: true}, nil
		},
		Create: func(ctx context.Context) (string, error) {
			repo := &ar.Repository{Format: "DOCKER", Description: description(j, roleRegistry), Labels: labels(j, roleRegistry),
				DockerConfig: &ar.DockerRepositoryConfig{ImmutableTags: cfg.ImmutableTags}}
			if cfg.ScanOnPush {
				// Scanning follows the project's Container Scanning API.
				repo.VulnerabilityScanningConfig = &ar.VulnerabilityScanningConfig{EnablementConfig: "INHERITED"}
			} else {
				repo.VulnerabilityScanningConfig = &ar.VulnerabilityScanningConfig{EnablementConfig: "DISABLED"}
			}
			op, err := s.Projects.Locations.Repositories.Create(d.parent(), repo).RepositoryId(name(j, "images")).Context(ctx).Do()
			if err != nil {
				return "", err
			}
			return doneOr(op.Name, op.Done), nil
		},
		Delete: func(ctx context.Context) (string, error) {
			op, err := s.Projects.Locations.Repositories.Delete(full).Context(ctx).Do()
			if err != nil {
				return "", err
			}
			return doneOr(op.Name, op.Done), nil
		},
		Poll: func(ctx context.Context, name string) (bool, error, error) {
			op, err := s.Projects.Locations.Operations.Get(name).Context(ctx).Do()
			if err != nil {
				return false, nil, err
			}
			if !op.Done {
				return false, nil, nil
			}
			if op.Error != nil {
				return true, statusError(op.Error.Code, op.Error.Message, op.Error.Details), nil
			}
			return true, nil, nil
		},
	}
}

// doneOr is the operation to poll: none when Google finished it before answering.
func doneOr(name string, done bool) string {
	if done {
		return ""
	}
	return name
}

// EnsureRepository implements registry.Driver.
func (d RegistryDriver) EnsureRepository(ctx context.Context, j *job.Job, cfg registry.Config) (registry.Repository, error) {
	s, err := d.service(ctx)
	if err != nil {
		return registry.Repository{}, err
	}
	var got *ar.Repository
	ops := Ops{}
	r := d.resource(s, j, cfg, &got)
	if err := d.C.await(ctx, "repository "+d.repository(j), func() (bool, error) {
		return d.C.converge(ctx, ops, "create repository", r)
	}); err != nil {
		return registry.Repository{}, err
	}
	if got == nil {
		if _, err := r.Get(ctx); err != nil {
			return registry.Repository{}, d.C.Classify(err)
		}
	}
	if got == nil {
		return registry.Repository{}, fault.Transientf("repository %s is not readable yet", d.repository(j))
	}
	if got.Format != "DOCKER" {
		return registry.Repository{}, fault.System(fmt.Errorf("repository %s has format %s", got.Name, got.Format))
	}
	host := d.C.Region + "-docker.pkg.dev"
	id := got.Name[strings.LastIndex(got.Name, "/")+1:]
	return registry.Repository{Name: cfg.Name, ID: got.Name, URI: host + "/" + d.C.ProjectID + "/" + id + "/" + cfg.Name}, nil
}

// DeleteRepository implements registry.Driver: the job's repository goes with every image
// in it. One that is gone, or one of that name that is not the job's, is nothing to delete.
func (d RegistryDriver) DeleteRepository(ctx context.Context, j *job.Job, _ string) error {
	s, err := d.service(ctx)
	if err != nil {
		return err
	}
	var got *ar.Repository
	ops := Ops{}
	r := d.resource(s, j, registry.Config{}, &got)
	return d.C.await(ctx, "deleting repository "+d.repository(j), func() (bool, error) {
		return d.C.remove(ctx, ops, "delete repository", r)
	})
}
