package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/groundworkhq/groundwork/internal/api"
	"github.com/groundworkhq/groundwork/internal/catalog/components"
	"github.com/groundworkhq/groundwork/internal/cluster"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/netguard"
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
	mint *tokenMint
	// bootstrap installs a new cluster's default components through this family's installer.
	bootstrap func(token func(ctx context.Context, j *job.Job, cl kubernetes.Cluster) (string, error)) kubernetes.ComponentInstaller
	api       *api.ComponentConfig
	spaces    store.ClusterSpaces // nil: no reachability checks
	secrets   *secrets.Vault
	outbound  *netguard.Policy
	interval  time.Duration
	log       *slog.Logger
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
	mint := &tokenMint{}
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
		Catalog: cat, Spaces: spaceClusters{st: st, sec: sec, mint: mint}, Secrets: sec, ChartDir: co.ChartDir, Outbound: o.Outbound,
		Connect:   connect,
		ReadyPoll: co.ReadyPoll, ReadyTimeout: co.ReadyTimeout, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	parts := &componentParts{pipeline: p, api: &api.ComponentConfig{Catalog: cat, Clusters: kube.Registrar{}}, secrets: sec, outbound: o.Outbound, log: log,
		interval: co.CheckInterval, mint: mint,
		bootstrap: func(token func(ctx context.Context, j *job.Job, cl kubernetes.Cluster) (string, error)) kubernetes.ComponentInstaller {
			return component.ClusterBootstrap{Components: p, Connect: connect, Token: token}
		}}
	if co.LeaseTTL > 0 {
		parts.pipeline = leaseOverride{Pipeline: p, ttl: co.LeaseTTL}
	}
	if parts.interval == 0 {
		parts.interval = 30 * time.Second
	}
	parts.spaces = st
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

// spaceClusters finds a space's registered cluster for the component pipeline. A job names its
// space by ID; the job already belongs to the space's org, so the lookup is install-wide.
type spaceClusters struct {
	st   store.Store
	sec  *secrets.Vault
	mint *tokenMint
}

// tokenMint mints a token for a cluster space whose credential is not stored (a cluster
// Groundwork created); fn is set once the cloud providers are wired, nil where none is.
type tokenMint struct {
	fn func(ctx context.Context, sp *store.Space, sc kube.SpaceCluster) (string, error)
}

// credentials returns how to reach sp's cluster: the stored credential, or a freshly minted
// token for a created cluster.
func (m *tokenMint) credentials(ctx context.Context, sec *secrets.Vault, sp *store.Space, sc kube.SpaceCluster) (kube.Credentials, error) {
	if sc.Auth != kube.AuthCloudToken {
		return sc.Credentials(ctx, sec.For(api.ClusterSecrets(sp.OrgID, sp.ID)))
	}
	if m == nil || m.fn == nil {
		return kube.Credentials{}, fault.UserAction(fmt.Errorf("space %s: no provider here can mint tokens for its cluster", sp.ID),
			"NoTokenMinter", "run Groundwork with the cloud provider that created this cluster", "")
	}
	tok, err := m.fn(ctx, sp, sc)
	if err != nil {
		return kube.Credentials{}, err
	}
	return kube.Credentials{Endpoint: sc.Endpoint, CAData: sc.CAData, Token: tok}, nil
}

func (s spaceClusters) Cluster(ctx context.Context, spaceID string) (kube.SpaceCluster, error) {
	sp, err := s.st.GetSpace(ctx, "", spaceID)
	if errors.Is(err, store.ErrNotFound) {
		return kube.SpaceCluster{}, fault.UserAction(fmt.Errorf("space %s not found", spaceID), "SpaceNotFound",
			"the space was deleted; register the cluster again and install into the new space", "")
	}
	if err != nil {
		// The store being briefly away is no reason to give the job up.
		return kube.SpaceCluster{}, fault.Transient(fmt.Errorf("read space %s: %w", spaceID, err))
	}
	sc, ok, err := api.SpaceClusterOf(sp)
	if err != nil {
		return kube.SpaceCluster{}, fault.System(fmt.Errorf("space %s config: %w", spaceID, err))
	}
	if !ok {
		return kube.SpaceCluster{}, fault.UserAction(fmt.Errorf("space %s has no registered cluster", spaceID), "SpaceHasNoCluster",
			"register a cluster with POST /api/spaces/register-cluster and install into that space", "")
	}
	if sc.Auth == kube.AuthCloudToken {
		// The installer reads credentials by reference: a minted, short-lived token is kept
		// under the space's name and replaced on every use.
		creds, err := s.mint.credentials(ctx, s.sec, sp, sc)
		if err != nil {
			return kube.SpaceCluster{}, err
		}
		ref, err := s.sec.For(api.ClusterSecrets(sp.OrgID, sp.ID)).Put(ctx, api.ClusterSecretName(sp.ID)+"-minted", creds.Token)
		if err != nil {
			return kube.SpaceCluster{}, fault.Transient(fmt.Errorf("keep minted token: %w", err))
		}
		sc.CredentialRef, sc.Auth = ref, ""
	}
	return sc, nil
}

// watch keeps the status of every cluster space current: ready while its API server answers
// with the stored credential, unreachable otherwise. It checks at start and then every
// interval until ctx ends. Every replica may run it: the writes are idempotent and only a
// change is written.
func (c *componentParts) watch(ctx context.Context) {
	if c.spaces == nil || c.interval < 0 {
		return
	}
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		c.checkAll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *componentParts) checkAll(ctx context.Context) {
	list, err := c.spaces.ClusterSpaces(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("list cluster spaces", "error", err)
		}
		return
	}
	for _, sp := range list {
		if ctx.Err() != nil {
			return
		}
		status, reason := api.SpaceReady, error(nil)
		if err := c.ping(ctx, sp); err != nil {
			status, reason = api.SpaceUnreachable, err
		}
		if ctx.Err() != nil {
			return
		}
		changed, err := c.spaces.SetSpaceStatus(ctx, sp.ID, status)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			c.log.Warn("record space status", "space", sp.ID, "error", err)
		case changed:
			c.log.Info("space status changed", "space", sp.ID, "status", status, "reason", reason)
		}
	}
}

// ping asks the space's API server for its version with the stored credential.
func (c *componentParts) ping(ctx context.Context, sp *store.Space) error {
	sc, ok, err := api.SpaceClusterOf(sp)
	if err != nil || !ok {
		return fmt.Errorf("space config holds no cluster: %v", err)
	}
	creds, err := c.mint.credentials(ctx, c.secrets, sp, sc)
	if err != nil {
		return err
	}
	if sc.Auth != kube.AuthCloudToken {
		creds.Dial = c.outbound.DialContext
	}
	cl, err := kube.Connect(creds)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = cl.Ping(pctx)
	return err
}
