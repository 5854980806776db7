// Package provider declares what a cloud module gives Groundwork, in the terms the pipelines
// need, and the registry the server picks modules from by provider name (a space's and a job's
// provider field).
//
// A module implements Module and any of the abilities below; what it leaves out it does not
// offer (a family it has no driver for is refused at admission for its spaces). Each module
// package checks its abilities at compile time (var _ provider.VMPoolDrivers = (*Module)(nil)).
// Adding a cloud is one package implementing these and one Register call in the server's
// wiring (internal/app). Abilities the next issues need (IAM actions per step, say) are new
// interfaces here; modules that lack them keep compiling.
package provider

import (
	"context"

	"github.com/groundworkhq/groundwork/internal/discovery"
	"github.com/groundworkhq/groundwork/internal/job"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/pipeline/dnszone"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
	"github.com/groundworkhq/groundwork/internal/pipeline/registry"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
	"github.com/groundworkhq/groundwork/internal/plan"
	"github.com/groundworkhq/groundwork/internal/pricing"
	"github.com/groundworkhq/groundwork/internal/remediation"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
)

// Module is a cloud as the server knows it.
type Module interface {
	// Name is the provider name spaces and jobs carry ("aws", "local"); the registry's key.
	Name() string
	// Title names the cloud to people ("AWS"), in messages that say where a family runs.
	Title() string
}

// The drivers of the families. Each resolves the job's cloud account (its space's) and
// returns a driver opened with it; a module caches what it opened (clients, assumed roles)
// per account, region and credential, so a rotated credential opens anew.
type (
	// VMPoolDrivers serves vm_pool.
	VMPoolDrivers interface {
		VMPoolDriver(ctx context.Context, j *job.Job) (vmpool.Driver, error)
	}
	// NetworkDrivers serves network.
	NetworkDrivers interface {
		NetworkDriver(ctx context.Context, j *job.Job) (network.Driver, error)
	}
	// RegistryDrivers serves registry.
	RegistryDrivers interface {
		RegistryDriver(ctx context.Context, j *job.Job) (registry.Driver, error)
	}
	// DNSZoneDrivers serves dns_zone.
	DNSZoneDrivers interface {
		DNSZoneDriver(ctx context.Context, j *job.Job) (dnszone.Driver, error)
	}
	// KubernetesDrivers serves kubernetes, and mints the tokens its created clusters are
	// reached with (nothing long-lived is stored for them).
	KubernetesDrivers interface {
		KubernetesDriver(ctx context.Context, j *job.Job) (kubernetes.Driver, error)
		ClusterToken(ctx context.Context, orgID, spaceID, cluster string) (string, error)
	}
	// DatastoreDrivers serves datastore; the driver resolves each job itself.
	DatastoreDrivers interface {
		DatastoreDriver() dspipe.Driver
	}
)

// SecretRoutes is a module that keeps some secrets in its cloud's own secret store.
// SecretStoreFor returns the store that holds key (a name or a reference), or nil when key is
// not the module's: it stays in the server's own store.
type SecretRoutes interface {
	SecretStoreFor(ctx context.Context, key string) (secrets.SecretStore, error)
}

// ErrorClassifier turns the cloud's own errors into fault kinds (transient, user action,
// system) so the engine knows whether to retry and the user what to fix.
type ErrorClassifier interface {
	Classify(err error) error
}

// Listers lists what already exists in a space's account (discovery).
type Listers interface {
	Lister(ctx context.Context, sp *store.Space) (discovery.Lister, error)
}

// PlanSources says which cloud operations a job's steps make (plans).
type PlanSources interface {
	PlanSource() plan.Source
}

// PriceSources says what a job's resources use, for the price book to cost.
type PriceSources interface {
	UsageSource() pricing.UsageSource
}

// Remediators runs remediation workflows' actions in a job's account.
type Remediators interface {
	Executor(ctx context.Context, j *job.Job) (remediation.Executor, error)
}
