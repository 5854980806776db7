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
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/groundworkhq/groundwork/internal/api"
	authpkg "github.com/groundworkhq/groundwork/internal/auth"
	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/engine"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/store/postgres"
	"github.com/groundworkhq/groundwork/internal/store/sqlite"
)

// DefaultOrg is the organisation the bootstrap admin belongs to.
const DefaultOrg = "org_default"

// Options configure a server.
type Options struct {
	Addr           string // default :5087
	Database       string // "" → SQLite in DataDir; postgres://… → PostgreSQL
	DataDir        string // default ./groundwork-data
	BootstrapToken string // "" → generated at first start, printed once
	Workers        int
	PollInterval   time.Duration
	ShutdownGrace  time.Duration
	Owner          string
	Logger         *slog.Logger
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
}

// OpenStore opens the store named by database (applying migrations).
func OpenStore(ctx context.Context, database, dataDir string, logger *slog.Logger) (store.Store, error) {
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
	log := o.Logger
	st, err := OpenStore(ctx, o.Database, o.DataDir, log)
	if err != nil {
		return err
	}
	defer st.Close()
	auth, sec, err := setupAccess(ctx, o, st)
	if err != nil {
		return err
	}
	// One set of opened AWS providers for every AWS user here. Cloud account credentials live in
	// the server's own store; an AWS datastore job's credentials go to its account's Secrets
	// Manager, all else stays local.
	awsp := newAWSParts(o.AWS, st, sec)
	sec = awsDatastoreSecrets{local: sec, aws: awsp}
	dsp, err := wireDatastores(o, st, sec, awsp)
	if err != nil {
		return err
	}
	cmp, err := wireComponents(o, st, sec)
	if err != nil {
		return err
	}
	pipes := o.Pipelines
	if pipes == nil {
		awsp.components = cmp.bootstrap(awsp.clusterToken)
		awsp.spaces = createdClusterSpaces{st}
		cmp.mint.fn = awsp.spaceToken
		pipes = append(builtinPipelines(o, dsp, cmp), awsp.pipelines()...)
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
		jobsByStatus{st})
	hub := api.NewHub()
	pub := publishers{hub.Publish}
	if o.Publish != nil {
		pub = append(pub, o.Publish)
	}
	eng, err := engine.New(engine.Config{Store: st, Pipelines: reg, Owner: o.Owner, Workers: o.Workers,
		PollInterval: o.PollInterval, ShutdownGrace: o.ShutdownGrace, Logger: log,
		Metrics: engine.NewMetrics(metrics), Events: pub})
	if err != nil {
		return err
	}
	srv := api.New(api.Config{Store: st, Pipelines: reg, Catalog: cat, Auth: auth, Secrets: sec, Hub: hub, Metrics: metrics,
		Provisioners: prov.registry, Datastores: dsp.api, Components: cmp.api, Logger: log, Ready: func() bool {
			select {
			case <-eng.Draining():
				return false
			default:
				return true
			}
		}})
	prov.mount(srv)
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", o.Addr, err)
	}
	httpSrv := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	log.Info("groundwork serving", "addr", ln.Addr().String(), "data_dir", o.DataDir, "owner", o.Owner)
	if o.Listening != nil {
		o.Listening(ln.Addr().String())
	}
	httpErr := make(chan error, 1)
	go func() { httpErr <- httpSrv.Serve(ln) }()
	engDone := make(chan error, 1)
	go func() { engDone <- eng.Run(ctx) }()
	go dsp.reconcile(ctx)
	go cmp.watch(ctx)
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

// jobsByStatus reports the ledger's job counts at scrape time.
type jobsByStatus struct{ st store.Store }

var jobsDesc = prometheus.NewDesc("groundwork_jobs", "Jobs in the ledger by status.", []string{"status"}, nil)

func (c jobsByStatus) Describe(ch chan<- *prometheus.Desc) { ch <- jobsDesc }

func (c jobsByStatus) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	counts, err := c.st.CountJobs(ctx)
	if err != nil {
		return
	}
	for _, s := range job.Statuses {
		ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
}
