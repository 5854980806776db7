// Package app assembles a Groundwork server: store, pipelines, engine and API, from options
// that the CLI fills from flags and environment. Tests start it the same way.
package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"

	"github.com/groundworkhq/groundwork/internal/api"
	authpkg "github.com/groundworkhq/groundwork/internal/auth"
	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/console"
	"github.com/groundworkhq/groundwork/internal/engine"
	"github.com/groundworkhq/groundwork/internal/job"
	gwmetrics "github.com/groundworkhq/groundwork/internal/metrics"
	"github.com/groundworkhq/groundwork/internal/netguard"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
	"github.com/groundworkhq/groundwork/internal/provider/kube"
	"github.com/groundworkhq/groundwork/internal/remediation"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/store/postgres"
	"github.com/groundworkhq/groundwork/internal/store/sqlite"
	"github.com/groundworkhq/groundwork/internal/telemetry"
)

// DefaultOrg is the organisation the bootstrap admin belongs to.
const DefaultOrg = "org_default"

// Options configure a server.
type Options struct {
	Addr           string // default :5087
	Database       string // "" → SQLite in DataDir; postgres://… → PostgreSQL
	DataDir        string // default ./groundwork-data
	BootstrapToken string // "" → generated at first start, printed once; else at least 32 characters
	// MaxTokenTTL, if positive, caps the lifetime of API tokens: a token asked for without an
	// expiry gets this one, a longer one is refused, and a stored token older than this stops
	// working.
	MaxTokenTTL   time.Duration
	Workers       int
	PollInterval  time.Duration
	ShutdownGrace time.Duration
	// JobRetention, if positive, is how long a job that is over (cancelled, or torn down)
	// stays in the ledger before it is pruned; completed, failed and live jobs are never
	// pruned, and audit entries stay. Zero keeps every job. JobPruneEvery is how often (zero:
	// a tenth of JobRetention, between a minute and an hour).
	JobRetention  time.Duration
	JobPruneEvery time.Duration
	// SecretSweepEvery is how often the secrets of ended jobs that no step deleted are swept
	// (default 5 minutes); a job's end also starts a sweep at once.
	SecretSweepEvery time.Duration
	Owner            string
	Logger           *slog.Logger
	// Out receives the one-time bootstrap token notice (stderr by default).
	Out io.Writer
	// Pipelines replaces the built-in pipelines (tests register their own families).
	Pipelines []pipeline.Pipeline
	// Publish, if set, also receives every committed job change (tests log commits).
	Publish func(*job.Job)
	// Listening, if set, is told the bound address once the server accepts connections.
	Listening func(addr string)
	// Protocol configures the provisioner protocol (remote provisioners and /provisioner/).
	Protocol ProtocolOptions
	// Datastores configures the datastore family (local servers, databases, connections).
	Datastores DatastoreOptions
	// Components configures the component family and cluster spaces.
	Components ComponentOptions
	// AWS configures the AWS families (vm_pool, network, registry, dns_zone, kubernetes).
	AWS AWSOptions
	// Azure configures the Azure module.
	Azure AzureOptions
	// GCP configures the GCP module.
	GCP GCPOptions
	// Remediation configures remediation workflows and their notifications.
	Remediation RemediationOptions
	// PriceBook, if set, is a price book file (groundwork pricing refresh) plans are priced
	// with instead of the built-in one.
	PriceBook string
	// Outbound is the address policy for every address a user gives (provisioner URLs, chart
	// repositories, cluster endpoints, adopted hosts); nil refuses only the always-refused
	// ranges (link-local and cloud metadata addresses).
	Outbound *netguard.Policy
	// InspectTick is how often this replica looks for scheduled drift inspections that are
	// due (DefaultInspectTick when zero); each space's inspectIntervalMinutes says how often
	// its jobs are due.
	InspectTick time.Duration
}

// OpenStore opens the store named by database (applying migrations).
func OpenStore(ctx context.Context, database, dataDir string, logger *slog.Logger) (store.Full, error) {
	if strings.HasPrefix(database, "postgres://") || strings.HasPrefix(database, "postgresql://") {
		return postgres.Open(ctx, database, logger)
	}
	path := database
	if path == "" {
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return nil, fmt.Errorf("create data dir: %w", err)
		}
		path = filepath.Join(dataDir, "groundwork.db")
	}
	path = strings.TrimPrefix(path, "sqlite://")
	return sqlite.Open(ctx, path)
}

type publishers []func(*job.Job)

func (p publishers) Publish(j *job.Job) {
	for _, f := range p {
		f(j)
	}
}

// Run serves until ctx ends, then drains: the HTTP server stops accepting, the engine hands
// back what it holds.
func Run(ctx context.Context, o Options) error {
	if o.Addr == "" {
		o.Addr = ":5087"
	}
	if o.DataDir == "" {
		o.DataDir = "./groundwork-data"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Out == nil {
		o.Out = os.Stderr
	}
	if o.Owner == "" {
		host, _ := os.Hostname()
		o.Owner = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	// Records logged with a request's or a step's context carry its trace id.
	o.Logger = slog.New(telemetry.LogHandler(o.Logger.Handler()))
	log := o.Logger
	if o.BootstrapToken != "" && len(o.BootstrapToken) < MinBootstrapTokenLen {
		return fmt.Errorf("the bootstrap token is %d characters; it must have at least %d (or leave it unset to have one generated)",
			len(o.BootstrapToken), MinBootstrapTokenLen)
	}
	if o.MaxTokenTTL < 0 {
		return fmt.Errorf("max token TTL %s: must be positive (or 0 for no cap)", o.MaxTokenTTL)
	}
	tp, shutdownTracing, err := telemetry.Setup(ctx, os.Getenv)
	if err != nil {
		return err
	}
	defer func() {
		flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdownTracing(flushCtx); err != nil {
			log.Warn("flushing traces", "error", err)
		}
	}()
	st, err := OpenStore(ctx, o.Database, o.DataDir, log)
	if err != nil {
		return err
	}
	defer st.Close()
	auth, local, err := setupAccess(ctx, o, st)
	if err != nil {
		return err
	}
	// The cloud modules, and the secret store over them. Cloud account credentials live in
	// the server's own store; every reader names the owner it reads for.
	mods, sec, err := wireProviders(o, st, local, st, tp)
	if err != nil {
		return err
	}
	dsp, err := wireDatastores(o, st, sec, mods)
	if err != nil {
		return err
	}
	cmp, err := wireComponents(o, st, sec)
	if err != nil {
		return err
	}
	pipes := o.Pipelines
	var vmOps vmpool.Operator
	if pipes == nil {
		cmp.mint.Token = func(ctx context.Context, sp *store.Space, sc kube.SpaceCluster) (string, error) {
			return mods.ClusterToken(ctx, sp.Provider, sp.OrgID, sp.ID, sc.ClusterName)
		}
		bootstrap := cmp.bootstrap(func(ctx context.Context, j *job.Job, cl kubernetes.Cluster) (string, error) {
			return mods.ClusterToken(ctx, j.Provider, j.OrgID, j.SpaceID, cl.Name)
		})
		cloud, vm := cloudFamilies(o.AWS, mods, bootstrap, kubernetes.StoreSpaces{Store: st})
		if vm != nil {
			vmOps = vm
		}
		pipes = append(builtinPipelines(dsp, cmp), cloud...)
	}
	// Remediation workflows are a job kind of their own: they run beside whatever families
	// the server (or a test) provisions.
	if !slices.ContainsFunc(pipes, func(p pipeline.Pipeline) bool { return p.Family() == remediation.Family }) {
		ro := o.Remediation
		if ro.Poll == 0 {
			ro.Poll = o.AWS.Poll
		}
		if ro.LeaseTTL == 0 {
			ro.LeaseTTL = o.AWS.LeaseTTL
		}
		rem, err := remediationPipeline(ro, st, mods, log)
		if err != nil {
			return err
		}
		pipes = append(slices.Clone(pipes), rem)
	}
	reg, err := pipeline.NewRegistry(pipes...)
	if err != nil {
		return err
	}
	cat, err := catalog.Builtin()
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	prov, err := wireProtocol(o, st, reg, cat)
	if err != nil {
		return err
	}
	metrics := prometheus.NewRegistry()
	metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		gwmetrics.JobsByStatus(st), gwmetrics.QueueLag(st), gwmetrics.DriftedFields(st))
	planner, err := newPlanner(o.PriceBook, mods)
	if err != nil {
		return err
	}
	disc := newDiscovery(st, mods)
	hub := api.NewHub()
	pub := publishers{hub.Publish}
	// A job that ends with no step left to delete what was stored for it (cancelled while its
	// first step ran, say) has its secrets swept; the end of any job wakes the sweeper.
	sweep := make(chan struct{}, 1)
	pub = append(pub, func(j *job.Job) {
		if j.Status.Terminal() {
			select {
			case sweep <- struct{}{}:
			default:
			}
		}
	})
	if o.SecretSweepEvery <= 0 {
		o.SecretSweepEvery = 5 * time.Minute
	}
	if o.Publish != nil {
		pub = append(pub, o.Publish)
	}
	eng, err := engine.New(engine.Config{Store: st, Pipelines: reg, Owner: o.Owner, Workers: o.Workers,
		PollInterval: o.PollInterval, ShutdownGrace: o.ShutdownGrace, Logger: log,
		Retention: o.JobRetention, PruneEvery: o.JobPruneEvery,
		Metrics: engine.NewMetrics(metrics), Events: pub, Tracer: tp})
	if err != nil {
		return err
	}
	srv := api.New(api.Config{Store: st, Pipelines: reg, Catalog: cat, Auth: auth, Secrets: sec, Outbound: o.Outbound, Hub: hub, Metrics: metrics,
		Provisioners: prov.registry, Planner: planner, Discovery: disc, Datastores: dsp.api, Components: cmp.api, Remediation: remediationAPI(reg), Drift: driftAPI(mods), VMOps: vmOps, Logger: log, MaxTokenTTL: o.MaxTokenTTL, Ready: func() bool {
			select {
			case <-eng.Draining():
				return false
			default:
				return true
			}
		}})
	prov.mount(srv)
	console.Mount(srv, console.Embedded())
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", o.Addr, err)
	}
	// A span per API request, named for the route; the health probes are left out.
	handler := otelhttp.NewHandler(srv, "api", otelhttp.WithTracerProvider(tp),
		otelhttp.WithPropagators(propagation.TraceContext{}), // a caller's traceparent continues its trace
		otelhttp.WithFilter(func(r *http.Request) bool { return r.URL.Path != "/healthz" && r.URL.Path != "/readyz" }),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " " + r.URL.Path }))
	httpSrv := newHTTPServer(handler)
	log.Info("groundwork serving", "addr", ln.Addr().String(), "data_dir", o.DataDir, "owner", o.Owner)
	if o.Listening != nil {
		o.Listening(ln.Addr().String())
	}
	httpErr := make(chan error, 1)
	go func() { httpErr <- httpSrv.Serve(ln) }()
	engDone := make(chan error, 1)
	go func() { engDone <- eng.Run(ctx) }()
	go dsp.reconcile(ctx)
	go sec.Janitor(ctx, st, sweep, o.SecretSweepEvery, log)
	go cmp.watcher.Run(ctx)
	go runInspections(ctx, st, reg, mods, o.InspectTick, log)
	select {
	case <-ctx.Done():
	case err := <-httpErr:
		return fmt.Errorf("http server: %w", err)
	}
	log.Info("shutting down")
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = httpSrv.Shutdown(shutCtx)
	return <-engDone
}

// remediationAPI turns the remediation routes on when the workflow pipeline is registered.
func remediationAPI(reg *pipeline.Registry) *api.RemediationConfig {
	if _, ok := reg.Get(remediation.Family); !ok {
		return nil
	}
	return &api.RemediationConfig{}
}

// MinBootstrapTokenLen is the shortest bootstrap token accepted: the token is the admin of the
// default org, so it must not be guessable.
const MinBootstrapTokenLen = 32

// HTTP limits. A request has ReadTimeout to arrive whole and WriteTimeout to be answered; the
// event stream, which is meant to outlive both, manages its own write deadline per event
// (internal/api), so a client that stops reading is still cut off.
const (
	httpReadHeaderTimeout = 10 * time.Second
	httpReadTimeout       = 30 * time.Second
	httpWriteTimeout      = 2 * time.Minute
	httpIdleTimeout       = 2 * time.Minute
	httpMaxHeaderBytes    = 64 << 10
)

func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: httpReadHeaderTimeout, ReadTimeout: httpReadTimeout,
		WriteTimeout: httpWriteTimeout, IdleTimeout: httpIdleTimeout, MaxHeaderBytes: httpMaxHeaderBytes}
}

// bootstrapAuth returns the hash of the bootstrap admin token: the configured one, or one
// generated at first start, printed once, and kept only as a hash in the data dir.
func bootstrapAuth(o Options) ([sha256.Size]byte, error) {
	var none [sha256.Size]byte
	if o.BootstrapToken != "" {
		return sha256.Sum256([]byte(o.BootstrapToken)), nil
	}
	path := filepath.Join(o.DataDir, "bootstrap-token.sha256")
	if b, err := os.ReadFile(path); err == nil {
		raw, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(raw) != sha256.Size {
			return none, fmt.Errorf("%s is damaged; delete it to generate a new token", path)
		}
		var h [sha256.Size]byte
		copy(h[:], raw)
		return h, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return none, err
	}
	tok, err := authpkg.NewSecret()
	if err != nil {
		return none, err
	}
	h := sha256.Sum256([]byte(tok))
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return none, err
	}
	if err := os.WriteFile(path, []byte(hex.EncodeToString(h[:])+"\n"), 0o600); err != nil {
		return none, err
	}
	fmt.Fprintf(o.Out, "\nGroundwork bootstrap admin token for %s (shown once, keep it safe):\n\n  %s\n\n", BootstrapEmail, tok)
	return h, nil
}
