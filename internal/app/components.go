package app

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/groundworkhq/groundwork/internal/api"
	"github.com/groundworkhq/groundwork/internal/catalog/components"
	"github.com/groundworkhq/groundwork/internal/cluster"
	"github.com/groundworkhq/groundwork/internal/clusterspace"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/component"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/provider/kube"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
)

// ComponentOptions configure the component family (Helm releases installed into registered
// clusters) and the reachability checks of cluster spaces. The zero value is production.
type ComponentOptions struct {
	// ChartDir, if set, is searched for a component's chart before its repository (offline
	// installs; `serve --chart-dir`).
	ChartDir string
	// CatalogFile replaces the catalog embedded from configs/components.yaml.
	CatalogFile string
	// ChartCAFile, if set, is the PEM bundle that chart repositories and OCI registries are
	// verified against, instead of the system roots (`serve --chart-ca-file`).
	ChartCAFile string
	// ReadyPoll and ReadyTimeout pace the wait-ready step (defaults 10s and 10m).
	ReadyPoll    time.Duration
	ReadyTimeout time.Duration
	// HookTimeout bounds a chart's hooks (default 5m).
	HookTimeout time.Duration
	// LeaseTTL overrides the pipeline's lease (8 minutes); crash tests shorten it so that a
	// restarted server claims a dead one's job promptly.
	LeaseTTL time.Duration
	// CheckInterval is how often every registered cluster is pinged to keep its space's status
	// (ready or unreachable) current; default 30s, negative turns the checks off.
	CheckInterval time.Duration
}

// componentParts is the component family wired to one server.
type componentParts struct {
	pipeline pipeline.Pipeline
	// mint, once a cloud provider is wired, mints tokens for clusters Groundwork created.
	mint *clusterspace.Minter
	// bootstrap installs a new cluster's default components through this family's installer.
	bootstrap func(token func(ctx context.Context, j *job.Job, cl kubernetes.Cluster) (string, error)) kubernetes.ComponentInstaller
	api       *api.ComponentConfig
	// watcher keeps every cluster space's status current; it shares mint.
	watcher clusterspace.Watcher
}

// wireComponents loads the component catalog and builds the component pipeline over the
// spaces in st and the credentials in sec.
func wireComponents(o Options, st store.Full, sec *secrets.Vault) (*componentParts, error) {
	co := o.Components
	cat, err := loadComponentCatalog(co.CatalogFile)
	if err != nil {
		return nil, err
	}
	log := o.Logger.With("component", "components")
	var chartCA *kube.ChartCA
	if co.ChartCAFile != "" {
		if chartCA, err = kube.LoadChartCA(co.ChartCAFile); err != nil {
			return nil, fmt.Errorf("--chart-ca-file: %w", err)
		}
	}
	mint := &clusterspace.Minter{}
	kopts := kube.InstallerOptions{
		CacheDir: filepath.Join(o.DataDir, "helm-cache"), HookTimeout: co.HookTimeout, Logger: log, ChartCA: chartCA,
		Outbound: o.Outbound,
	}
	connect := func(ctx context.Context, creds cluster.Credentials) (component.Installer, string, error) {
		in, v, err := kube.Open(ctx, creds, kopts)
		if err != nil {
			return nil, "", err // a nil *kube.Installer must not become a non-nil Installer
		}
		return in, v, nil
	}
	p, err := component.New(component.Options{
		Catalog: cat, Spaces: clusterspace.Resolver{Spaces: st, Secrets: sec, Mint: mint}, Secrets: sec, ChartDir: co.ChartDir, Outbound: o.Outbound,
		Connect:   connect,
		ReadyPoll: co.ReadyPoll, ReadyTimeout: co.ReadyTimeout, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	parts := &componentParts{pipeline: p, api: &api.ComponentConfig{Catalog: cat, Clusters: kube.Registrar{}}, mint: mint,
		watcher: clusterspace.Watcher{Spaces: st, Secrets: sec, Mint: mint, Outbound: o.Outbound, Interval: co.CheckInterval, Log: log},
		bootstrap: func(token func(ctx context.Context, j *job.Job, cl kubernetes.Cluster) (string, error)) kubernetes.ComponentInstaller {
			return component.ClusterBootstrap{Components: p, Connect: connect, Token: token}
		}}
	if co.LeaseTTL > 0 {
		parts.pipeline = leaseOverride{Pipeline: p, ttl: co.LeaseTTL}
	}
	return parts, nil
}

func loadComponentCatalog(file string) (*components.Catalog, error) {
	if file != "" {
		return components.Load(file)
	}
	cat, err := components.Default()
	if err != nil {
		return nil, fmt.Errorf("component catalog: %w", err)
	}
	return cat, nil
}

type leaseOverride struct {
	pipeline.Pipeline
	ttl time.Duration
}

func (l leaseOverride) LeaseTTL() time.Duration { return l.ttl }
