package app

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"go.opentelemetry.io/otel/trace"

	"github.com/groundworkhq/groundwork/internal/discovery"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/dnszone"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
	"github.com/groundworkhq/groundwork/internal/pipeline/registry"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
	"github.com/groundworkhq/groundwork/internal/plan"
	"github.com/groundworkhq/groundwork/internal/pricing"
	"github.com/groundworkhq/groundwork/internal/provider"
	"github.com/groundworkhq/groundwork/internal/provider/aws"
	"github.com/groundworkhq/groundwork/internal/provider/azure"
	"github.com/groundworkhq/groundwork/internal/provider/gcp"
	"github.com/groundworkhq/groundwork/internal/provider/local"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
)

// AWSOptions configure the AWS module and the families it serves (vm_pool, network,
// registry, dns_zone, kubernetes).
type AWSOptions struct {
	// Probe, if set, replaces the SSM bootstrap probe. moto runs no command on its emulated
	// instances, so tests against it pass aws.FakeBootstrapProbe.
	Probe func(p *aws.Provider) aws.BootstrapProbe
	// Poll is how long a waiting step asks the engine to wait (default: each pipeline's own).
	Poll time.Duration
	// LeaseTTL overrides the pipelines' leases (5 minutes); crash tests shorten it so that a
	// restarted server claims a dead one's job promptly.
	LeaseTTL time.Duration
	// AfterDo, if set, is called after each forward step's Do returns and before the engine
	// checkpoints its result. Crash tests kill the process there: the cloud calls were made,
	// the record of them was not.
	AfterDo func(ctx context.Context, j *job.Job, step string)
}

// AzureOptions configure the Azure module.
type AzureOptions struct {
	// Transport, if set, carries every Azure request (tests point it at an azurefake
	// subscription, which needs the SDK's API name on each request).
	Transport policy.Transporter
	// Poll is how often a call that waits on Azure inside one step (a registry's creation)
	// reads the operation again (default 2s).
	Poll time.Duration
}

// GCPOptions configure the GCP module.
type GCPOptions struct {
	// Poll is how often a call that waits on Google inside one step (a repository's
	// creation) reads the operation again (default 2s).
	Poll time.Duration
}

// wireProviders registers the cloud modules of this build and makes the server's secret
// store over them: a module keeps the secrets it claims (an AWS datastore job's passwords go
// to its account's Secrets Manager), all else stays in own. Adding a cloud is one line here.
func wireProviders(o Options, st store.Store, own secrets.SecretStore, ledger secrets.Ledger, tp trace.TracerProvider) (*provider.Registry, *secrets.Vault, error) {
	mods, err := provider.NewRegistry()
	if err != nil {
		return nil, nil, err
	}
	sec := secrets.NewVault(provider.Secrets{Local: own, Modules: mods}, ledger)
	lm, err := local.NewModule(local.Options{DataDir: o.DataDir, Logger: o.Logger.With("component", "local-provider")}, o.Datastores.WrapDriver)
	if err != nil {
		return nil, nil, err
	}
	for _, m := range []provider.Module{
		lm,
		aws.NewModule(aws.ModuleOptions{Records: st, Vault: sec, Tracer: tp, Outbound: o.Outbound, Probe: o.AWS.Probe}),
		azure.NewModule(azure.ModuleOptions{Records: st, Vault: sec, Outbound: o.Outbound, Transport: o.Azure.Transport, Poll: o.Azure.Poll}),
		gcp.NewModule(gcp.ModuleOptions{Records: st, Vault: sec, Outbound: o.Outbound, Poll: o.GCP.Poll}),
	} {
		if err := mods.Register(m); err != nil {
			return nil, nil, err
		}
	}
	return mods, sec, nil
}

// cloudFamilies are the families whose drivers only cloud modules give, each run on the
// modules that offer it. vm is the vm_pool pipeline (nil when no module offers it), whose VM
// operations the API plans.
func cloudFamilies(o AWSOptions, mods *provider.Registry, components kubernetes.ComponentInstaller,
	spaces kubernetes.SpaceRegistrar) (fams []pipeline.Pipeline, vm *vmpool.Pipeline) {
	poll := o.Poll
	add := func(p pipeline.Pipeline, by []provider.Module) bool {
		if len(by) == 0 {
			return false
		}
		fams = append(fams, provider.Family{Pipeline: pipeline.Tuned{Pipeline: p, TTL: o.LeaseTTL, AfterDo: o.AfterDo}, Providers: by, All: mods})
		return true
	}
	pool := vmpool.New(provider.Loader(mods, job.FamilyVMPool, provider.VMPoolDrivers.VMPoolDriver), poll)
	if add(pool, provider.Offering[provider.VMPoolDrivers](mods)) {
		vm = pool
	}
	// A live network on AWS takes more zones and peering changes; on GCP and Azure, whose
	// subnets span the region's zones, peering changes (azCount places nothing there).
	add(network.New(provider.Loader(mods, job.FamilyNetwork, provider.NetworkDrivers.NetworkDriver), poll).
		WithUpdates("aws", network.Updates{Zones: true, Peering: true}).
		WithUpdates("gcp", network.Updates{Peering: true, RegionalSubnets: true}).
		WithUpdates("azure", network.Updates{Peering: true, RegionalSubnets: true}),
		provider.Offering[provider.NetworkDrivers](mods))
	add(registry.New(provider.Loader(mods, job.FamilyRegistry, provider.RegistryDrivers.RegistryDriver)),
		provider.Offering[provider.RegistryDrivers](mods))
	add(dnszone.New(provider.Loader(mods, job.FamilyDNSZone, provider.DNSZoneDrivers.DNSZoneDriver)),
		provider.Offering[provider.DNSZoneDrivers](mods))
	// The EKS, GKE and AKS drivers converge a live cluster to its config (groups added, resized and
	// removed, the control plane upgraded).
	add(kubernetes.New(provider.Loader(mods, job.FamilyKubernetes, provider.KubernetesDrivers.KubernetesDriver),
		components, poll).WithSpaces(spaces).WithUpdates("aws", "gcp", "azure"), provider.Offering[provider.KubernetesDrivers](mods))
	return fams, vm
}

// newDiscovery lists a space's account through its provider's module.
func newDiscovery(st store.Store, mods *provider.Registry) *discovery.Service {
	return discovery.New(func(ctx context.Context, orgID, spaceID string) (discovery.Lister, error) {
		sp, err := st.GetSpace(ctx, orgID, spaceID)
		if err != nil {
			return nil, err
		}
		return mods.Lister(ctx, sp)
	}, discovery.Options{})
}

// newPlanner plans jobs with each module's own source, priced from the built-in price book
// (or bookFile); a provider without a source (a cluster space) gets its steps and no cloud
// operations.
func newPlanner(bookFile string, mods *provider.Registry) (*plan.Planner, error) {
	book, err := pricing.Embedded()
	if bookFile != "" {
		raw, rerr := os.ReadFile(bookFile)
		if rerr != nil {
			return nil, fmt.Errorf("price book: %w", rerr)
		}
		book, err = pricing.Parse(raw)
	}
	if err != nil {
		return nil, fmt.Errorf("price book: %w", err)
	}
	sources, usage := map[string]plan.Source{}, map[string]pricing.UsageSource{}
	for _, m := range provider.Offering[provider.PlanSources](mods) {
		sources[m.Name()] = m.(provider.PlanSources).PlanSource()
	}
	for _, m := range provider.Offering[provider.PriceSources](mods) {
		usage[m.Name()] = m.(provider.PriceSources).UsageSource()
	}
	return &plan.Planner{Sources: sources, Cost: pricing.Coster{Book: book, Sources: usage}}, nil
}
