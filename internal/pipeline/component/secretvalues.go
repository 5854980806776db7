package component

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/groundworkhq/groundwork/internal/catalog/components"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/secrets"
)

// Values the catalog marks secret ("x-secret": true, e.g. grafana.adminPassword) never stay in
// the job: at admission each one moves to the secret store, owned by the job, and the config
// keeps its reference under secretValues (dotted path → reference). The install step puts the
// values back into the release; tearing the job down deletes them.

// keepSecretValues moves j's secret values into the secret store and rewrites j.Config. It
// refuses a request that names secretValues itself: a reference is never taken from a request.
func (p *Pipeline) keepSecretValues(ctx context.Context, j *job.Job) error {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(j.Config, &probe); err == nil && probe["secretValues"] != nil {
		return fault.UserAction(errors.New("config.secretValues: is set by Groundwork, never by a request; give the values themselves"),
			"InvalidConfig", "", "")
	}
	var cfg Config
	if err := (&pipeline.Run{Job: j}).Config(&cfg); err != nil {
		return fault.UserAction(fmt.Errorf("config: %w", err), "InvalidConfig", "", "")
	}
	comp, ok := p.o.Catalog.Get(cfg.ComponentID)
	if !ok {
		return nil // resolve has refused it already
	}
	paths := comp.SecretPaths()
	if len(paths) == 0 || len(cfg.Values) == 0 {
		return nil
	}
	nested, err := components.ExpandDotted(cfg.Values)
	if err != nil {
		return fault.UserAction(err, "InvalidValues", "", "")
	}
	store := p.o.Secrets.For(secrets.JobOwner(j.OrgID, j.ID))
	for _, path := range paths {
		v, ok := takePath(nested, path)
		if !ok {
			continue
		}
		s, ok := v.(string)
		if !ok {
			return fault.UserAction(fmt.Errorf("values.%s: must be a string", strings.Join(path, ".")), "InvalidValues", "", "")
		}
		key := strings.Join(path, ".")
		ref, err := store.Put(ctx, j.ID+"/values/"+key, s)
		if err != nil {
			return fault.Transient(fmt.Errorf("store secret value %s: %w", key, err))
		}
		if cfg.SecretValues == nil {
			cfg.SecretValues = map[string]string{}
		}
		cfg.SecretValues[key] = ref
	}
	cfg.Values = nested
	raw, err := json.Marshal(cfg)
	if err != nil {
		return fault.System(fmt.Errorf("encode config: %w", err))
	}
	j.Config = raw
	return nil
}

// withSecretValues reads the job's secret values back into the release's values.
func (p *Pipeline) withSecretValues(ctx context.Context, j *job.Job, cfg Config, vals map[string]any) error {
	store := p.o.Secrets.For(secrets.JobOwner(j.OrgID, j.ID))
	for _, key := range sortedKeys(cfg.SecretValues) {
		v, err := store.Get(ctx, cfg.SecretValues[key])
		if errors.Is(err, secrets.ErrNotFound) {
			return fault.UserAction(fmt.Errorf("secret value %s: %w", key, err), "SecretMissing", "install the component again, giving the value", "")
		}
		if err != nil {
			return fault.Transient(fmt.Errorf("read secret value %s: %w", key, err))
		}
		putPath(vals, strings.Split(key, "."), v)
	}
	return nil
}

// forgetSecretValues deletes the job's secret values (the undo of validate: the last step of a
// teardown, and of a cancel whatever ran).
func (p *Pipeline) forgetSecretValues(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	var cfg Config
	if err := r.Config(&cfg); err != nil {
		return pipeline.Result{}, fault.System(err)
	}
	store := p.o.Secrets.For(secrets.JobOwner(r.Job.OrgID, r.Job.ID))
	for _, key := range sortedKeys(cfg.SecretValues) {
		if err := store.Delete(ctx, cfg.SecretValues[key]); err != nil {
			return pipeline.Result{}, fault.Transient(fmt.Errorf("delete secret value %s: %w", key, err))
		}
	}
	return pipeline.Done(nil), nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// takePath removes and returns the value at path in nested maps.
func takePath(m map[string]any, path []string) (any, bool) {
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			return nil, false
		}
		m = next
	}
	v, ok := m[path[len(path)-1]]
	if ok {
		delete(m, path[len(path)-1])
	}
	return v, ok
}

// putPath sets the value at path, making the maps on the way.
func putPath(m map[string]any, path []string, v any) {
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}
