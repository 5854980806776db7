package datastore

import (
	"context"
	"encoding/json"
	"time"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// Admitting is the pipeline as a server runs it: the admin password of an adopt request is
// moved to the secret store before the job is stored, and a secret reference is never taken
// from a request.
type Admitting struct {
	*Pipeline
	// Secrets keeps the job's admin password, owned by the job.
	Secrets ds.Vault
	// TTL, if set, overrides the pipeline's lease.
	TTL time.Duration
}

var _ pipeline.Pipeline = (*Admitting)(nil)

// LeaseTTL implements pipeline.Pipeline.
func (p *Admitting) LeaseTTL() time.Duration {
	if p.TTL > 0 {
		return p.TTL
	}
	return p.Pipeline.LeaseTTL()
}

// Validate implements pipeline.Pipeline. For an adopt request it also takes adminPassword out
// of the config into the secret store (PrepareAdopt): the API stores the job it
// validated, so this is the last point before the job store, and the only one that knows the
// job's ID. The config is checked with a placeholder first, so a refused request stores nothing.
func (p *Admitting) Validate(ctx context.Context, j *job.Job) error {
	var m map[string]any
	if json.Unmarshal(j.Config, &m) == nil && m["adminSecretRef"] != nil {
		// A reference is never taken from a request: it would let the caller name any secret of
		// the server (another organisation's credentials) for the job to read, send to a host of
		// the caller's choosing, and delete on cancel.
		return validation.New("config.adminSecretRef", "forbidden", "is not accepted; give adminPassword and Groundwork stores it")
	}
	if j.Mode == job.ModeAdopt && m["adminPassword"] != nil {
		if pw, _ := m["adminPassword"].(string); pw == "" {
			return validation.New("config.adminPassword", ds.RuleRequired, "is required to adopt a datastore")
		}
		delete(m, "adminPassword")
		m["adminSecretRef"] = "pending:validation"
		probe, _ := json.Marshal(m)
		if err := p.Pipeline.Validate(ctx, &job.Job{ID: j.ID, Mode: j.Mode, Provider: j.Provider, Config: probe}); err != nil {
			return fieldErrors(err)
		}
		cfg, err := PrepareAdopt(ctx, p.Secrets.For(ds.JobSecrets(j)), j.ID, j.Config)
		if err != nil {
			return fieldErrors(err)
		}
		j.Config = cfg
	}
	return fieldErrors(p.Pipeline.Validate(ctx, j))
}

// fieldErrors returns a refusal with fields as the one validation error type.
func fieldErrors(err error) error {
	if err == nil {
		return nil
	}
	if f, ok := validation.Fields(err); ok {
		return validation.Error(f)
	}
	return err
}
