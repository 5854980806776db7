package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/groundworkhq/groundwork/internal/api"
	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/netguard"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/provider"
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
	// AfterDo, if set, is called after each forward step's Do and before the engine records
	// it (crash tests kill the process there).
	AfterDo func(ctx context.Context, j *job.Job, step string)
}

// datastoreRecords is what the datastore family needs of the store: the records the service
// writes and the jobs a restart must reconcile.
type datastoreRecords interface {
	api.DatastoreRecords
	UnsettledDatabaseJobs(ctx context.Context) ([]string, error)
}

// datastoreParts is the datastore family wired to one server: the pipeline, the API's config,
// and what reconciles databases after a restart.
type datastoreParts struct {
	pipeline pipeline.Pipeline
	api      *api.DatastoreConfig
	records  datastoreRecords
	secrets  *secrets.Vault
	outbound *netguard.Policy
	st       store.Store
	log      *slog.Logger
}

// wireDatastores builds the datastore pipeline over the modules' datastore drivers and the
// secret store.
func wireDatastores(o Options, st store.Full, sec *secrets.Vault, mods *provider.Registry) (*datastoreParts, error) {
	drivers := map[string]dspipe.Driver{}
	for _, m := range provider.Offering[provider.DatastoreDrivers](mods) {
		drivers[m.Name()] = m.(provider.DatastoreDrivers).DatastoreDriver()
	}
	d := &datastoreParts{records: st, secrets: sec, outbound: o.Outbound, st: st, log: o.Logger.With("component", "datastores"),
		api: &api.DatastoreConfig{Wrap: o.Datastores.WrapRecords}}
	pipe := dspipe.New(dspipe.Options{Drivers: drivers, Secrets: sec, Poll: o.Datastores.Poll, Outbound: o.Outbound,
		Forget:  func(ctx context.Context, j *job.Job) error { return d.service().Forget(ctx, j) },
		Records: st})
	d.api.Rotate = pipe
	d.pipeline = pipeline.Tuned{Pipeline: &dspipe.Admitting{
		Pipeline: pipe,
		Secrets:  sec,
		TTL:      o.Datastores.LeaseTTL,
	}, AfterDo: o.Datastores.AfterDo}
	return d, nil
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
	return datastore.NewService(anyOrgJobs{d.st}, d.records, d.secrets, nil, d.log).WithOutbound(d.outbound)
}

// reconcile finishes, in the background, the databases a crash left "creating" or
// "deleting".
func (d *datastoreParts) reconcile(ctx context.Context) {
	if d.records != nil {
		d.service().ReconcileAll(ctx, d.records)
	}
}
