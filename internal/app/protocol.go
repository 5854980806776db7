package app

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/groundworkhq/groundwork/internal/api"
	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/remote"
	"github.com/groundworkhq/groundwork/internal/protocol"
	"github.com/groundworkhq/groundwork/internal/protocol/jobbackend"
	"github.com/groundworkhq/groundwork/internal/store"
)

// ProtocolOptions configure the provisioner protocol both ways: the server Groundwork mounts
// under /provisioner/ and the jobs it runs through remote provisioners.
type ProtocolOptions struct {
	// PollInterval is how long a job waits between two polls of a remote provisioner's
	// operation (default 5s).
	PollInterval time.Duration
	// CallTimeout bounds one call to a remote provisioner (default 30s).
	CallTimeout time.Duration
	// Observers read a built-in family's resources as they are, so that inspect reports drift.
	Observers map[job.Family]jobbackend.Observer
	// Health checks a remote before it is registered (default: GET healthz, 10s).
	Health protocol.HealthChecker
}

// protocolParts is what the protocol adds to a server: the registry of provisioners, shared by
// the API and the engine's remote pipelines.
type protocolParts struct {
	registry *protocol.Registry
	pipes    *pipeline.Registry
	keys     api.RequestKeys
	catalog  *catalog.Catalog
	opts     ProtocolOptions
	logger   *slog.Logger
}

// wireProtocol builds the provisioner registry over the store and makes pipes resolve families
// spelled "category/type" to a remote pipeline, so that the engine and the jobs API find the
// pipeline of a pair held by a registered provisioner.
func wireProtocol(o Options, st store.Full, pipes *pipeline.Registry, cat *catalog.Catalog) (*protocolParts, error) {
	// Groundwork holds every built-in pair from start-up, also those this build has no pipeline
	// for: they are Groundwork's to serve, and a remote claiming one would be shadowed by the
	// built-in family of the same pair.
	reg := protocol.NewRegistry(st, protocol.RegistryOptions{
		// The built-in provisioner is as old as this server (not the zero time).
		BuiltIn:  protocol.Provisioner{Name: "groundwork", Pairs: catalog.BuiltinPairs(), CreatedAt: time.Now().UTC()},
		Catalog:  cat,
		Health:   o.Protocol.Health,
		Outbound: o.Outbound,
	})
	ropts := remote.Options{Holders: reg, Catalog: cat, PollInterval: o.Protocol.PollInterval, CallTimeout: o.Protocol.CallTimeout,
		Outbound: o.Outbound}
	pipes.SetFallback(func(f job.Family) (pipeline.Pipeline, bool) {
		pair, err := catalog.ParsePair(string(f))
		// A built-in pair spelled as a pair ("managed-resource/registry") is not remote: its
		// jobs are submitted under their family ("registry").
		if err != nil || catalog.FamilyForPair(pair) != f {
			return nil, false
		}
		return remote.New(pair, ropts), true
	})
	return &protocolParts{registry: reg, pipes: pipes, keys: st, catalog: cat, opts: o.Protocol, logger: o.Logger}, nil
}

// mount serves the provisioner protocol for Groundwork's own pairs under /provisioner/: an
// apply becomes a job in the space the caller names, an operation is that job's status.
func (pp *protocolParts) mount(srv *api.Server) {
	var pairs []catalog.Pair
	for _, p := range catalog.BuiltinPairs() {
		if _, ok := pp.pipes.Get(catalog.FamilyForPair(p)); ok {
			pairs = append(pairs, p)
		}
	}
	if pairs == nil {
		pairs = []catalog.Pair{} // nil would mean "every built-in pair" to the backend
	}
	backend := jobbackend.New(jobbackend.Options{
		Jobs:      srv.ProtocolJobs(pp.keys, pp.pipes),
		Pipelines: pp.pipes,
		Pairs:     pairs,
		Observers: pp.opts.Observers,
	})
	ps := protocol.NewServer(backend, protocol.ServerOptions{Name: "groundwork", Catalog: pp.catalog, Logger: pp.logger})
	srv.Handle("/provisioner/", http.StripPrefix("/provisioner", srv.ProtocolAuth(ps)))
}
