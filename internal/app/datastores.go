package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/groundworkhq/groundwork/internal/api"
	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/provider/local"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
)

// DatastoreOptions configure the datastore family. The zero value is what production runs.
type DatastoreOptions struct {
	// WrapDriver, if set, wraps the local provider's driver. Tests stop a step at a chosen
	// point with it, as a crash would.
	WrapDriver func(dspipe.Driver) dspipe.Driver
	// WrapRecords, if set, wraps the database and connection records the API writes through
	// (see api.DatastoreConfig.Wrap).
	WrapRecords func(datastore.Records) datastore.Records
	// Poll is the wait between readiness checks of a new server (default 2s).
	Poll time.Duration
	// LeaseTTL overrides the pipeline's lease (5 minutes); crash tests shorten it so that a
	// restarted server claims a dead one's job promptly.
	LeaseTTL time.Duration
}

// datastoreRecords is what the store offers the datastore family: the records the service
// writes and the jobs a restart must reconcile. sqlstore implements it.
type datastoreRecords interface {
	api.DatastoreRecords
	UnsettledDatabaseJobs(ctx context.Context) ([]string, error)
}

// datastoreParts is the datastore family wired to one server: the pipeline (nil when the store
// keeps no datastore records), the API's config, and what reconciles databases after a restart.
type datastoreParts struct {
	pipeline pipeline.Pipeline
	api      *api.DatastoreConfig
	records  datastoreRecords
	secrets  secrets.SecretStore
	st       store.Store
	log      *slog.Logger
}

// wireDatastores builds the datastore pipeline over the local provider (servers under
// DataDir/datastores) and the secret store.
func wireDatastores(o Options, st store.Store, sec secrets.SecretStore, awsp *awsParts) (*datastoreParts, error) {
	recs, ok := st.(datastoreRecords)
	if !ok {
		o.Logger.Warn("the store keeps no datastore records; the datastore family is off", "store", fmt.Sprintf("%T", st))
		return &datastoreParts{}, nil
	}
	if err := reachableDataDir(o.DataDir); err != nil {
		return nil, err
	}
	prov, err := local.New(local.Options{DataDir: o.DataDir, Logger: o.Logger.With("component", "local-provider")})
	if err != nil {
		return nil, err
	}
	drv := prov.Driver()
	if o.Datastores.WrapDriver != nil {
		drv = o.Datastores.WrapDriver(drv)
	}
	d := &datastoreParts{records: recs, secrets: sec, st: st, log: o.Logger.With("component", "datastores"),
		api: &api.DatastoreConfig{Wrap: o.Datastores.WrapRecords}}
	d.pipeline = &datastorePipeline{
		Pipeline: dspipe.New(dspipe.Options{Drivers: map[string]dspipe.Driver{"local": drv, "aws": awsp.datastoreDriver()}, Secrets: sec, Poll: o.Datastores.Poll}),
		parts:    d,
		leaseTTL: o.Datastores.LeaseTTL,
	}
	return d, nil
}

// reachableDataDir lets the postgres account traverse the data dir when Groundwork runs as
// root: PostgreSQL refuses to run as root, so the local provider runs it as "postgres", which
// must reach its data under DataDir/datastores. Traverse only (0711): the directory cannot be
// listed, and the secret store and key file are 0600 themselves.
func reachableDataDir(dir string) error {
	if os.Geteuid() != 0 || dir == "" {
		return nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if fi.Mode().Perm()&0o011 == 0o011 {
		return nil
	}
	if err := os.Chmod(dir, fi.Mode().Perm()|0o011); err != nil {
		return fmt.Errorf("let the postgres account traverse the data dir: %w", err)
	}
	return nil
}

// anyOrgJobs reads jobs whatever their org: the engine's and the reconciler's view.
type anyOrgJobs struct{ st store.Store }

func (a anyOrgJobs) GetJob(ctx context.Context, id string) (*job.Job, error) {
	j, err := a.st.GetJob(ctx, &store.GetJobParams{ID: id})
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("job %s: %w", id, datastore.ErrNotFound)
	}
	return j, err
}

func (d *datastoreParts) service() *datastore.Service {
	return datastore.NewService(anyOrgJobs{d.st}, d.records, d.secrets, nil, d.log)
}

// reconcile finishes, in the background, the databases a crash left "creating" or
// "deleting". A job whose server is not back yet is tried again with capped backoff until ctx
// ends.
func (d *datastoreParts) reconcile(ctx context.Context) {
	if d.records == nil {
		return
	}
	wait := time.Second
	for {
		ids, err := d.records.UnsettledDatabaseJobs(ctx)
		if err == nil && len(ids) == 0 {
			return
		}
		if err != nil {
			d.log.WarnContext(ctx, "list unsettled databases", "error", err)
		}
		for _, id := range ids {
			if err := d.service().Reconcile(ctx, id); err != nil {
				d.log.WarnContext(ctx, "reconcile databases", "job", id, "error", err)
			} else {
				d.log.InfoContext(ctx, "databases reconciled", "job", id)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
	}
}

// forget removes what Groundwork keeps about a job's databases: connection records, owner
// passwords, database records. Teardown calls it before the server goes (for an adopted
// server, the server is left as it is: it is the customer's). Re-running it is harmless.
func (d *datastoreParts) forget(ctx context.Context, jobID string) error {
	dbs, err := d.records.ListDatabases(ctx, jobID)
	if err != nil {
		return err
	}
	for _, db := range dbs {
		if err := d.forgetConnections(ctx, jobID, db.ID); err != nil {
			return err
		}
		if err := d.secrets.Delete(ctx, db.Endpoint.SecretRef); err != nil {
			return fmt.Errorf("delete owner password of %s: %w", db.ID, err)
		}
		if err := d.records.DeleteDatabase(ctx, jobID, db.ID); err != nil && !errors.Is(err, datastore.ErrNotFound) {
			return err
		}
	}
	return d.forgetConnections(ctx, jobID, "")
}

func (d *datastoreParts) forgetConnections(ctx context.Context, jobID, dbID string) error {
	conns, err := d.records.ListConnections(ctx, jobID, dbID)
	if err != nil {
		return err
	}
	for _, c := range conns {
		if err := d.records.DeleteConnection(ctx, jobID, c.ID); err != nil && !errors.Is(err, datastore.ErrNotFound) {
			return err
		}
	}
	return nil
}

// datastorePipeline is the datastore pipeline as this server runs it: field errors answered as
// the API's, the admin password of an adopt request moved to the secret store before the job
// is stored, and the job's databases forgotten at teardown.
type datastorePipeline struct {
	*dspipe.Pipeline
	parts    *datastoreParts
	leaseTTL time.Duration
}

// LeaseTTL implements pipeline.Pipeline.
func (p *datastorePipeline) LeaseTTL() time.Duration {
	if p.leaseTTL > 0 {
		return p.leaseTTL
	}
	return p.Pipeline.LeaseTTL()
}

// Validate implements pipeline.Pipeline. For an adopt request it also takes adminPassword out
// of the config into the secret store (dspipe.PrepareAdopt): the API stores the job it
// validated, so this is the last point before the job store, and the only one that knows the
// job's ID. The config is checked with a placeholder first, so a refused request stores nothing.
func (p *datastorePipeline) Validate(ctx context.Context, j *job.Job) error {
	var m map[string]any
	if j.Mode == job.ModeAdopt && json.Unmarshal(j.Config, &m) == nil && m["adminPassword"] != nil {
		if pw, _ := m["adminPassword"].(string); pw == "" {
			return fieldErrors{{Field: "config.adminPassword", Rule: datastore.RuleRequired, Message: "is required to adopt a datastore"}}
		}
		delete(m, "adminPassword")
		m["adminSecretRef"] = "pending:validation"
		probe, _ := json.Marshal(m)
		if err := p.Pipeline.Validate(ctx, &job.Job{ID: j.ID, Mode: j.Mode, Provider: j.Provider, Config: probe}); err != nil {
			return apiFieldErrors(err)
		}
		cfg, err := dspipe.PrepareAdopt(ctx, p.parts.secrets, j.ID, j.Config)
		if err != nil {
			return apiFieldErrors(err)
		}
		j.Config = cfg
	}
	return apiFieldErrors(p.Pipeline.Validate(ctx, j))
}

// Steps implements pipeline.Pipeline: the same steps, with register's undo first forgetting
// the job's databases and connections.
func (p *datastorePipeline) Steps(j *job.Job) []pipeline.Step {
	steps := p.Pipeline.Steps(j)
	for i := range steps {
		if steps[i].Name != dspipe.StepRegister {
			continue
		}
		undo := steps[i].Undo
		steps[i].Undo = func(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
			if err := p.parts.forget(ctx, r.Job.ID); err != nil {
				// The job store or the secret store did not answer; both are worth retrying.
				return pipeline.Result{}, fault.Transient(fmt.Errorf("forget the databases of %s: %w", r.Job.ID, err))
			}
			return undo(ctx, r)
		}
	}
	return steps
}

// fieldErrors carries field errors to the API (api.FieldErrorer), which answers them as a 400
// naming each field.
type fieldErrors []api.FieldError

func (f fieldErrors) Error() string {
	parts := make([]string, len(f))
	for i, e := range f {
		parts[i] = e.Field + ": " + e.Message
	}
	return strings.Join(parts, "; ")
}

func (f fieldErrors) FieldErrors() []api.FieldError { return f }

func apiFieldErrors(err error) error {
	var fe *datastore.FieldError
	if errors.As(err, &fe) {
		return fieldErrors{{Field: fe.Field, Rule: fe.Rule, Message: fe.Message}}
	}
	return err
}
