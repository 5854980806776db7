package kube

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/downloader"
	"helm.sh/helm/v4/pkg/getter"
	helmkube "helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/registry"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	repo "helm.sh/helm/v4/pkg/repo/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundworkhq/groundwork/internal/cluster"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/netguard"
)

// Labels Groundwork puts on releases, their objects and the namespaces it creates.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "groundwork"
	LabelJobID     = cluster.LabelJobID
	// labelSpec holds a digest of chart and values: a release whose digest matches is already
	// what was asked for, so a re-run leaves it (and its revision) alone.
	labelSpec = "groundwork.io/spec"
)

// Open connects to the cluster creds name, checks that it answers, and returns an installer
// into it with the cluster's version.
func Open(ctx context.Context, creds Credentials, opts InstallerOptions) (*Installer, string, error) {
	c, err := Connect(creds)
	if err != nil {
		return nil, "", err
	}
	v, err := c.Ping(ctx)
	if err != nil {
		return nil, "", err
	}
	return NewInstaller(c, opts), v, nil
}

// InstallerOptions configure an Installer.
type InstallerOptions struct {
	// CacheDir holds downloaded charts and repository indexes; empty means a temporary folder.
	CacheDir string
	// HookTimeout bounds chart hooks (jobs run on install/upgrade); default 5 minutes.
	HookTimeout time.Duration
	// ChartCA verifies chart repositories and OCI registries instead of the system roots, as
	// helm's --ca-file does (see LoadChartCA). Nil means the system roots.
	ChartCA *ChartCA
	Logger  *slog.Logger
	// Outbound is the address policy chart repositories and registries must pass: every
	// connection a chart fetch makes (repository index and package, registry API, redirects)
	// is dialled through it. A chart source's host is also resolved and checked before the
	// fetch, for an early refusal that names the host.
	Outbound *netguard.Policy
}

// Installer installs Helm releases into one cluster.
type Installer struct {
	cluster *Cluster
	opts    InstallerOptions
	// repoTransport carries every HTTP(S) chart repository request; registryHTTP every OCI
	// registry request. Both dial through opts.Outbound and trust opts.ChartCA when it is set.
	repoTransport *http.Transport
	registryHTTP  *http.Client
}

// NewInstaller returns an installer for c.
func NewInstaller(c *Cluster, opts InstallerOptions) *Installer {
	if opts.HookTimeout == 0 {
		opts.HookTimeout = 5 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.CacheDir == "" {
		opts.CacheDir = filepath.Join(os.TempDir(), "groundwork-helm-cache")
	}
	repoTransport := chartTransport(opts.Outbound, opts.ChartCA)
	// Helm's registry client retries throttled and timed-out requests; each retry dials
	// through the same checked transport.
	rt := registry.NewTransport(false)
	rt.Base = chartTransport(opts.Outbound, opts.ChartCA)
	return &Installer{cluster: c, opts: opts, repoTransport: repoTransport,
		registryHTTP: &http.Client{Transport: rt, CheckRedirect: netguard.CheckRedirect}}
}

// chartTransport returns a transport that dials through the outbound policy and, when ca is
// set, verifies servers with its bundle instead of the system roots. Helm applies a CA file
// only to the transports it builds itself, so the bundle is set here: the policy and the CA
// both hold on every chart fetch.
func chartTransport(p *netguard.Policy, ca *ChartCA) *http.Transport {
	t := p.Transport()
	// As Helm's own getters: a chart package served with a gzip Content-Encoding is kept as
	// the .tgz it is.
	t.DisableCompression = true
	if ca != nil {
		t.TLSClientConfig = &tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS12}
	}
	return t
}

func (in *Installer) actionConfig(namespace string) (*action.Configuration, error) {
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(in.opts.Logger.Handler()))
	if err := cfg.Init(&restGetter{cluster: in.cluster, namespace: namespace}, namespace, "secret"); err != nil {
		return nil, fault.System(fmt.Errorf("helm configuration: %w", err))
	}
	return cfg, nil
}

func validateRelease(r Release) error {
	switch {
	case r.Name == "":
		return fault.UserAction(errors.New("release name is empty"), CodeInvalidChart, "", "")
	case r.Namespace == "":
		return fault.UserAction(errors.New("release namespace is empty"), CodeInvalidChart, "", "")
	}
	return nil
}

// InstallOrUpgrade makes the release match r and returns its status. It is idempotent: when
// the deployed release already has this chart and these values it changes nothing. A release
// left pending by an operation of the same job that died (the job's lease guarantees that no
// one else runs it) is marked failed and upgraded, so it ends deployed once. The call does not
// wait for workloads to become ready; Ready reports that.
func (in *Installer) InstallOrUpgrade(ctx context.Context, r Release) (ReleaseStatus, error) {
	if err := validateRelease(r); err != nil {
		return ReleaseStatus{}, err
	}
	if _, err := in.cluster.Ping(ctx); err != nil {
		return ReleaseStatus{}, err
	}
	ch, err := in.loadChart(ctx, r.Chart)
	if err != nil {
		return ReleaseStatus{}, err
	}
	vals := r.Values
	if vals == nil {
		vals = map[string]any{}
	}
	spec, err := specDigest(ch, vals, r.Labels)
	if err != nil {
		return ReleaseStatus{}, fault.System(err)
	}
	labels := map[string]string{LabelManagedBy: ManagedBy}
	for k, v := range r.Labels {
		labels[k] = v
	}
	if err := in.ensureNamespace(ctx, r.Namespace, labels); err != nil {
		return ReleaseStatus{}, err
	}
	cfg, err := in.actionConfig(r.Namespace)
	if err != nil {
		return ReleaseStatus{}, err
	}
	last, err := lastRelease(cfg, r.Name)
	if err != nil {
		return ReleaseStatus{}, classify("read release history", err)
	}
	if last != nil && last.Info.Status != rcommon.StatusUninstalled {
		if last.Labels[LabelManagedBy] != ManagedBy {
			return ReleaseStatus{}, fault.UserAction(
				fmt.Errorf("release %s/%s exists and is not managed by Groundwork", r.Namespace, r.Name),
				CodeReleaseConflict, "uninstall the existing release or install the component into another namespace", "")
		}
		if last.Info.Status.IsPending() {
			if err := in.recoverPending(cfg, last, r.Labels[LabelJobID]); err != nil {
				return ReleaseStatus{}, err
			}
		} else if last.Info.Status == rcommon.StatusDeployed && last.Labels[labelSpec] == spec {
			return statusOf(last, false), nil
		}
	}
	labels[labelSpec] = spec
	// Objects carry the job's labels; their managed-by stays Helm's, which owns them.
	post := &labelRenderer{labels: withoutKey(withoutKey(labels, labelSpec), LabelManagedBy)}

	var rel *release.Release
	if last == nil || last.Info.Status == rcommon.StatusUninstalled {
		inst := action.NewInstall(cfg)
		inst.ReleaseName = r.Name
		inst.Namespace = r.Namespace
		inst.Labels = labels
		inst.PostRenderer = post
		inst.WaitStrategy = helmkube.HookOnlyStrategy
		inst.Timeout = in.opts.HookTimeout
		inst.ServerSideApply = true
		// A release uninstalled with history kept is replaced rather than refused.
		inst.Replace = last != nil
		res, err := inst.RunWithContext(ctx, ch, vals)
		if err != nil {
			return ReleaseStatus{}, classifyHelm("install "+r.Name, err)
		}
		rel, err = asRelease(res)
		if err != nil {
			return ReleaseStatus{}, err
		}
	} else {
		up := action.NewUpgrade(cfg)
		up.Namespace = r.Namespace
		up.Labels = labels
		up.PostRenderer = post
		up.WaitStrategy = helmkube.HookOnlyStrategy
		up.Timeout = in.opts.HookTimeout
		// The values given are complete; nothing of the previous revision's should linger.
		up.ResetValues = true
		up.MaxHistory = 10
		res, err := up.RunWithContext(ctx, r.Name, ch, vals)
		if err != nil {
			return ReleaseStatus{}, classifyHelm("upgrade "+r.Name, err)
		}
		rel, err = asRelease(res)
		if err != nil {
			return ReleaseStatus{}, err
		}
	}
	in.opts.Logger.InfoContext(ctx, "helm release applied", "release", r.Name, "namespace", r.Namespace, "revision", rel.Version, "status", rel.Info.Status)
	return statusOf(rel, true), nil
}

// recoverPending settles a revision that a dead worker left pending-install or pending-upgrade.
// Helm refuses every operation on a pending release, as a lock. The lock is ours only when the
// revision carries this job's ID: then the engine's lease proves its writer is gone, and the
// revision is marked failed so that the upgrade that follows applies the chart again
// (creating what is missing, patching what exists) and ends deployed.
func (in *Installer) recoverPending(cfg *action.Configuration, last *release.Release, jobID string) error {
	owner := last.Labels[LabelJobID]
	if jobID == "" || owner != jobID {
		return transient(fmt.Errorf("release %s/%s has an operation in progress (%s) by job %q", last.Namespace, last.Name, last.Info.Status, owner), "ReleasePending")
	}
	in.opts.Logger.Warn("recovering release left pending by an interrupted run", "release", last.Name, "namespace", last.Namespace, "revision", last.Version, "status", last.Info.Status)
	last.SetStatus(rcommon.StatusFailed, "interrupted before it finished; superseded by a retry of job "+jobID)
	if err := cfg.Releases.Update(last); err != nil {
		return classify("mark interrupted release failed", err)
	}
	return nil
}

// Uninstall removes the release and the objects it created. A release that does not exist is
// already uninstalled. When jobID is set, a release now carrying another job's ID (a later
// install of the same component took it over) is left alone.
func (in *Installer) Uninstall(ctx context.Context, name, namespace, jobID string) (bool, error) {
	if _, err := in.cluster.Ping(ctx); err != nil {
		return false, err
	}
	cfg, err := in.actionConfig(namespace)
	if err != nil {
		return false, err
	}
	last, err := lastRelease(cfg, name)
	if err != nil {
		return false, classify("read release history", err)
	}
	if last == nil {
		// Gone already (a re-run, or removed by hand): the namespace may still be ours to drop.
		return false, in.dropNamespace(ctx, namespace, jobID)
	}
	if jobID != "" && last.Labels[LabelJobID] != jobID {
		in.opts.Logger.InfoContext(ctx, "release belongs to another job; not uninstalling", "release", name, "namespace", namespace, "owner", last.Labels[LabelJobID])
		return false, nil
	}
	un := action.NewUninstall(cfg)
	un.IgnoreNotFound = true
	un.WaitStrategy = helmkube.HookOnlyStrategy
	un.DeletionPropagation = "background"
	un.Timeout = in.opts.HookTimeout
	if _, err := un.Run(name); err != nil {
		if errors.Is(err, driver.ErrReleaseNotFound) {
			return false, nil
		}
		return false, classifyHelm("uninstall "+name, err)
	}
	return true, in.dropNamespace(ctx, namespace, jobID)
}

// dropNamespace deletes the namespace when this job's install created it (it carries the job's
// label: ensureNamespace labels only a namespace it creates) and no other Helm release lives
// there. A namespace the user made, or one another release shares, stays.
func (in *Installer) dropNamespace(ctx context.Context, namespace, jobID string) error {
	if jobID == "" {
		return nil
	}
	nsc := in.cluster.client.CoreV1().Namespaces()
	ns, err := nsc.Get(ctx, namespace, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return classify("read namespace "+namespace, err)
	case ns.Labels[LabelJobID] != jobID || ns.DeletionTimestamp != nil:
		return nil
	}
	// Helm keeps each release's records as Secrets labelled owner=helm (the "secret" driver).
	others, err := in.cluster.client.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm", Limit: 1})
	if err != nil {
		return classify("list releases in "+namespace, err)
	}
	if len(others.Items) > 0 {
		return nil
	}
	bg := metav1.DeletePropagationBackground
	if err := nsc.Delete(ctx, namespace, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
		return classify("delete namespace "+namespace, err)
	}
	in.opts.Logger.InfoContext(ctx, "deleted the namespace this job created", "namespace", namespace, "job", jobID)
	return nil
}

// Status returns the latest revision of the release; found is false when there is none.
func (in *Installer) Status(ctx context.Context, name, namespace string) (ReleaseStatus, bool, error) {
	if _, err := in.cluster.Ping(ctx); err != nil {
		return ReleaseStatus{}, false, err
	}
	cfg, err := in.actionConfig(namespace)
	if err != nil {
		return ReleaseStatus{}, false, err
	}
	last, err := lastRelease(cfg, name)
	if err != nil {
		return ReleaseStatus{}, false, classify("read release history", err)
	}
	if last == nil {
		return ReleaseStatus{}, false, nil
	}
	return statusOf(last, false), true, nil
}

// History returns every stored revision, oldest first.
func (in *Installer) History(ctx context.Context, name, namespace string) ([]ReleaseStatus, error) {
	cfg, err := in.actionConfig(namespace)
	if err != nil {
		return nil, err
	}
	rels, err := history(cfg, name)
	if err != nil {
		return nil, classify("read release history", err)
	}
	out := make([]ReleaseStatus, len(rels))
	for i, r := range rels {
		out[i] = statusOf(r, false)
	}
	return out, nil
}

func history(cfg *action.Configuration, name string) ([]*release.Release, error) {
	hs, err := cfg.Releases.History(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]*release.Release, 0, len(hs))
	for _, h := range hs {
		r, err := asRelease(h)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *release.Release) int { return a.Version - b.Version })
	return out, nil
}

func lastRelease(cfg *action.Configuration, name string) (*release.Release, error) {
	hs, err := history(cfg, name)
	if err != nil || len(hs) == 0 {
		return nil, err
	}
	return hs[len(hs)-1], nil
}

func asRelease(r any) (*release.Release, error) {
	switch v := r.(type) {
	case *release.Release:
		return v, nil
	case release.Release:
		return &v, nil
	}
	return nil, fault.System(fmt.Errorf("unexpected release type %T", r))
}

func statusOf(r *release.Release, changed bool) ReleaseStatus {
	s := ReleaseStatus{Name: r.Name, Namespace: r.Namespace, Revision: r.Version, Changed: changed, JobID: r.Labels[LabelJobID]}
	if r.Info != nil {
		s.Status = string(r.Info.Status)
	}
	if r.Chart != nil && r.Chart.Metadata != nil {
		s.Chart = r.Chart.Metadata.Name
		s.ChartVersion = r.Chart.Metadata.Version
	}
	return s
}

func (in *Installer) ensureNamespace(ctx context.Context, name string, labels map[string]string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: withoutKey(labels, labelSpec)}}
	_, err := in.cluster.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return classify("create namespace "+name, err)
	}
	// A namespace still terminating (an uninstall just dropped it) takes no new objects until
	// it is gone; then it can be made again.
	cur, err := in.cluster.client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return transient(fmt.Errorf("namespace %s was deleted while being created", name), "NamespaceTerminating")
	case err != nil:
		return classify("read namespace "+name, err)
	case cur.DeletionTimestamp != nil:
		return transient(fmt.Errorf("namespace %s is still being deleted", name), "NamespaceTerminating")
	}
	return nil
}

// loadChart fetches (if remote) and loads the chart, checking the version when one is asked.
func (in *Installer) loadChart(ctx context.Context, src ChartSource) (*chart.Chart, error) {
	var path string
	switch {
	case src.Path != "":
		path = src.Path
	case src.RepoURL != "" || src.OCI != "":
		p, err := in.locate(ctx, src)
		if err != nil {
			return nil, err
		}
		path = p
	default:
		return nil, fault.UserAction(errors.New("chart: no path, repository or OCI reference"), CodeInvalidChart, "", "")
	}
	ch, err := loader.Load(path)
	if err != nil {
		return nil, fault.UserAction(fmt.Errorf("load chart %s: %w", path, err), CodeInvalidChart, "check the chart source", "")
	}
	if src.Version != "" && ch.Metadata.Version != src.Version {
		return nil, fault.UserAction(fmt.Errorf("chart %s has version %s, want %s", ch.Metadata.Name, ch.Metadata.Version, src.Version), CodeInvalidChart, "", "")
	}
	return ch, nil
}

func (in *Installer) locate(ctx context.Context, src ChartSource) (string, error) {
	if err := in.checkChartHost(ctx, src); err != nil {
		return "", err
	}
	return in.fetchChart(src)
}

// fetchChart downloads the chart into the cache and returns its path. It does what Helm's
// LocateChart does for a repository or an OCI reference, but with getters of its own:
// LocateChart builds its getters from the environment (getter.All), whose HTTP getter dials
// on its own, past the outbound policy. Here the repository getter (index and package) uses
// repoTransport and the registry client registryHTTP, so every connection, redirects
// included, is checked as it is dialled and a DNS answer that changed since checkChartHost
// does not get through. Getter plugins are not used.
func (in *Installer) fetchChart(src ChartSource) (string, error) {
	repoCache := filepath.Join(in.opts.CacheDir, "repository")
	registryConfig := filepath.Join(in.opts.CacheDir, "registry.json")
	rc, err := registry.NewClient(registry.ClientOptWriter(io.Discard), registry.ClientOptCredentialsFile(registryConfig),
		registry.ClientOptHTTPClient(in.registryHTTP))
	if err != nil {
		return "", fault.System(fmt.Errorf("registry client: %w", err))
	}
	getters := getter.Getters(getter.WithTransport(in.repoTransport))
	version := strings.TrimSpace(src.Version)
	dl := downloader.ChartDownloader{
		Out:              io.Discard,
		Getters:          getters,
		RepositoryConfig: filepath.Join(in.opts.CacheDir, "repositories.yaml"),
		RepositoryCache:  repoCache,
		ContentCache:     filepath.Join(in.opts.CacheDir, "content"),
		RegistryClient:   rc,
	}
	name := strings.TrimSpace(src.OCI)
	ref := name
	if src.RepoURL != "" {
		name = strings.TrimSpace(src.Name)
		ref, err = repo.FindChartInRepoURL(src.RepoURL, name, getters, repo.WithChartVersion(version))
	} else {
		dl.Options = append(dl.Options, getter.WithRegistryClient(rc))
	}
	var p string
	if err == nil {
		err = os.MkdirAll(repoCache, 0o755)
	}
	if err == nil {
		p, _, err = dl.DownloadToCache(ref, version)
	}
	if err == nil {
		p, err = filepath.Abs(p)
	}
	if err != nil {
		// A repository that does not answer may come back; a chart it lacks will not, nor will a
		// certificate this server does not trust, nor an address the policy refuses.
		switch {
		case errors.Is(err, netguard.ErrRefused):
			return "", outboundRefused(fmt.Errorf("fetch chart %s: %w", name, err))
		case isCertificate(err):
			return "", fault.UserAction(fmt.Errorf("fetch chart %s: %w", name, err), CodeChartCertificate,
				"the chart repository's certificate does not verify: give the CA that signed it with serve --chart-ca-file (GROUNDWORK_CHART_CA_FILE), or fix the certificate", "")
		case isUnreachable(err):
			return "", transient(fmt.Errorf("fetch chart %s: %w", name, err), "ChartRepositoryUnreachable")
		}
		return "", fault.UserAction(fmt.Errorf("fetch chart %s %s: %w", name, src.Version, err), CodeInvalidChart, "check the chart repository, name and version", "")
	}
	return p, nil
}

func outboundRefused(err error) error {
	return fault.UserAction(err, "OutboundRefused",
		"the chart repository's address is refused by Groundwork's outbound policy (link-local and metadata addresses, or outside --outbound-allow)", "")
}

// checkChartHost resolves the host of a chart repository or registry and refuses it when any
// of its addresses is refused by the outbound policy: an early refusal that names the host.
// It is not what enforces the policy: fetchChart's connections are checked as they are dialled.
func (in *Installer) checkChartHost(ctx context.Context, src ChartSource) error {
	raw := src.RepoURL
	if raw == "" {
		raw = "oci://" + strings.TrimPrefix(src.OCI, "oci://")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return fault.UserAction(fmt.Errorf("chart source %q has no host", raw), CodeInvalidChart, "check the chart repository URL", "")
	}
	host := u.Hostname()
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else if addrs, err = net.DefaultResolver.LookupNetIP(ctx, "ip", host); err != nil {
		return transient(fmt.Errorf("resolve chart repository %s: %w", host, err), "ChartRepositoryUnreachable")
	}
	for _, a := range addrs {
		if err := in.opts.Outbound.Check(a); err != nil {
			return outboundRefused(fmt.Errorf("chart repository %s: %w", host, err))
		}
	}
	return nil
}

// ChartCA is a PEM bundle of certificate authorities that verify chart repositories and OCI
// registries, used instead of the system roots: for charts served from a mirror with a private
// CA. To keep trusting public repositories as well, append the system bundle to the file.
type ChartCA struct {
	// pool is set as the RootCAs of every chart transport (see chartTransport), each of
	// which dials through the outbound policy.
	pool *x509.CertPool
}

// LoadChartCA reads and checks the bundle, so that a bad file stops the server at start
// rather than failing the first install.
func LoadChartCA(caFile string) (*ChartCA, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("chart CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("chart CA file %s: no PEM certificate in it", caFile)
	}
	return &ChartCA{pool: pool}, nil
}

// classifyHelm classifies an error from a Helm action. Values that the chart's own schema
// rejects and manifests the API server refuses as invalid need the user; the rest is as for
// client-go.
func classifyHelm(op string, err error) error {
	if isClassified(err) {
		return err
	}
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || strings.Contains(err.Error(), "values don't meet the specifications of the schema") {
		return fault.UserAction(fmt.Errorf("%s: %w", op, err), CodeInvalidValues, "fix the component values", "")
	}
	return classify(op, err)
}

// specDigest identifies what a release should be: chart identity and content, values and
// labels. Equal digests mean an upgrade would change nothing.
func specDigest(ch *chart.Chart, vals map[string]any, labels map[string]string) (string, error) {
	type file struct {
		Name string
		Data []byte
	}
	var files []file
	for _, t := range ch.Templates {
		files = append(files, file{t.Name, t.Data})
	}
	slices.SortFunc(files, func(a, b file) int { return strings.Compare(a.Name, b.Name) })
	b, err := json.Marshal(struct {
		Name, Version string
		Files         []file
		Defaults      map[string]any
		Values        map[string]any
		Labels        map[string]string
	}{ch.Metadata.Name, ch.Metadata.Version, files, ch.Values, vals, labels})
	if err != nil {
		return "", fmt.Errorf("digest release spec: %w", err)
	}
	sum := sha256.Sum256(b)
	// A label value holds at most 63 characters.
	return hex.EncodeToString(sum[:])[:40], nil
}

func withoutKey(m map[string]string, key string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if k != key {
			out[k] = v
		}
	}
	return out
}
