// Package component is the pipeline of the component family: it installs (or upgrades) one
// catalog component into a space's cluster with Helm, waits until its workloads are ready and,
// on teardown, uninstalls it. Steps: validate → connect → install → wait-ready → finalize.
package component

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/groundworkhq/groundwork/internal/catalog/components"
	"github.com/groundworkhq/groundwork/internal/cluster"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/netguard"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/secrets"
)

// Step names.
const (
	StepValidate  = "validate"
	StepConnect   = "connect"
	StepInstall   = "install"
	StepWaitReady = "wait-ready"
	StepFinalize  = "finalize"
)

// Config is the user's spec of an install-component job
// (POST /api/provisioning-jobs/install-component without spaceID, which the job carries).
type Config struct {
	ComponentID string         `json:"componentID"`
	Values      map[string]any `json:"values,omitempty"`
	// Namespace overrides the catalog's namespace for the release.
	Namespace string `json:"namespace,omitempty"`
	// SecretValues holds, by dotted path, the references of the values the catalog marks
	// secret; Groundwork sets it at admission and the values are not kept in Values.
	SecretValues map[string]string `json:"secretValues,omitempty"`
}

// Spaces finds the cluster registered as a space.
type Spaces interface {
	Cluster(ctx context.Context, spaceID string) (cluster.SpaceCluster, error)
}

// Secrets is the secret store seen per owner (secrets.Vault satisfies it): a job reads its
// space's cluster credential as that cluster's, in the job's own organisation.
type Secrets interface {
	For(owner secrets.Owner) secrets.SecretStore
}

// Installer is what the pipeline needs of a cluster (cluster.Installer satisfies it).
type Installer interface {
	InstallOrUpgrade(ctx context.Context, r cluster.Release) (cluster.ReleaseStatus, error)
	Uninstall(ctx context.Context, name, namespace, jobID string) (bool, error)
	Ready(ctx context.Context, name, namespace string) (cluster.Readiness, error)
}

// Connector opens an installer on the cluster named by creds and checks that it answers,
// returning the server version.
type Connector func(ctx context.Context, creds cluster.Credentials) (Installer, string, error)

// Options build a Pipeline.
type Options struct {
	Catalog *components.Catalog
	Spaces  Spaces
	Secrets Secrets
	// Outbound is the address policy a registered cluster's endpoint is dialled through.
	Outbound *netguard.Policy
	// Connect defaults to KubeConnector with a chart cache under os.TempDir.
	Connect Connector
	// ChartDir, when set, is searched for a component's chart before its repository:
	// <dir>/<id>, <dir>/<chart name>, <dir>/<chart name>-<version>.tgz, <dir>/<id>.tgz.
	ChartDir string
	// ReadyPoll is how long wait-ready asks the engine to wait between looks (default 10s);
	// ReadyTimeout is how long it keeps looking before failing as transient (default 10m).
	ReadyPoll    time.Duration
	ReadyTimeout time.Duration
	Logger       *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Pipeline implements pipeline.Pipeline for job.FamilyComponent.
type Pipeline struct{ o Options }

var _ pipeline.Pipeline = (*Pipeline)(nil)

// New returns the component pipeline.
func New(o Options) (*Pipeline, error) {
	if o.Catalog == nil || o.Spaces == nil || o.Secrets == nil {
		return nil, errors.New("component pipeline: Catalog, Spaces and Secrets are required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Connect == nil {
		o.Connect = func(context.Context, cluster.Credentials) (Installer, string, error) {
			return nil, "", fault.System(errors.New("component pipeline: this server has no cluster connector"))
		}
	}
	if o.ReadyPoll == 0 {
		o.ReadyPoll = 10 * time.Second
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 10 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Pipeline{o: o}, nil
}

// Family implements pipeline.Pipeline.
func (p *Pipeline) Family() job.Family { return job.FamilyComponent }

// LeaseTTL covers one step: a Helm install with hooks is bounded by the installer's
// five-minute hook timeout; readiness is polled with Wait, not held.
func (p *Pipeline) LeaseTTL() time.Duration { return 8 * time.Minute }

// Validate checks the job before it is accepted: a space, a known component, and values that
// satisfy the component's schema. Errors name the field.
func (p *Pipeline) Validate(ctx context.Context, j *job.Job) error {
	if _, _, err := p.resolve(j); err != nil {
		return err
	}
	return p.keepSecretValues(ctx, j)
}

// plan is what validate works out from the job, recorded in infra.
type plan struct {
	ComponentID string              `json:"componentID"`
	Release     string              `json:"release"`
	Namespace   string              `json:"namespace"`
	Chart       cluster.ChartSource `json:"chart"`
}

func (p *Pipeline) resolve(j *job.Job) (plan, map[string]any, error) {
	if j.SpaceID == "" {
		return plan{}, nil, fault.UserAction(errors.New("spaceID: required"), "InvalidConfig", "pick the space to install into", "")
	}
	r := pipeline.Run{Job: j}
	var cfg Config
	if err := r.Config(&cfg); err != nil {
		return plan{}, nil, fault.UserAction(fmt.Errorf("config: %w", err), "InvalidConfig", "", "")
	}
	if cfg.ComponentID == "" {
		return plan{}, nil, fault.UserAction(errors.New("componentID: required"), "InvalidConfig", "pick a component from GET /api/catalog/components", "")
	}
	comp, ok := p.o.Catalog.Get(cfg.ComponentID)
	if !ok {
		return plan{}, nil, fault.UserAction(fmt.Errorf("componentID: unknown component %q", cfg.ComponentID), "UnknownComponent", "pick a component from GET /api/catalog/components", "")
	}
	vals, err := comp.Values(cfg.Values)
	if err != nil {
		return plan{}, nil, fault.UserAction(err, cluster.CodeInvalidValues, "fix the named values; the catalog lists each component's schema", "")
	}
	ns := comp.Namespace
	if cfg.Namespace != "" {
		ns = cfg.Namespace
	}
	return plan{ComponentID: comp.ID, Release: comp.ReleaseName, Namespace: ns, Chart: p.chartSource(comp)}, vals, nil
}

// chartSource prefers a local copy of the chart in ChartDir (offline installs and tests) and
// otherwise uses the catalog's repository or OCI reference.
func (p *Pipeline) chartSource(comp *components.Component) cluster.ChartSource {
	if p.o.ChartDir != "" {
		name := comp.Chart.Name
		if name == "" {
			name = filepath.Base(comp.Chart.OCI)
		}
		for _, cand := range []string{comp.ID, name, name + "-" + comp.Chart.Version + ".tgz", comp.ID + ".tgz"} {
			path := filepath.Join(p.o.ChartDir, cand)
			if _, err := os.Stat(path); err == nil {
				return cluster.ChartSource{Path: path, Version: comp.Chart.Version}
			}
		}
	}
	return cluster.ChartSource{RepoURL: comp.Chart.RepoURL, Name: comp.Chart.Name, OCI: comp.Chart.OCI, Version: comp.Chart.Version}
}

// Steps implements pipeline.Pipeline. The list is the same for every job of the family.
func (p *Pipeline) Steps(*job.Job) []pipeline.Step {
	return []pipeline.Step{
		{Name: StepValidate, Do: p.validate, Undo: p.forgetSecretValues},
		{Name: StepConnect, Do: p.connect},
		{Name: StepInstall, Do: p.install, Undo: p.uninstall},
		{Name: StepWaitReady, Do: p.waitReady},
		{Name: StepFinalize, Do: p.finalize},
	}
}

func (p *Pipeline) validate(_ context.Context, r *pipeline.Run) (pipeline.Result, error) {
	pl, _, err := p.resolve(r.Job)
	if err != nil {
		return pipeline.Result{}, err
	}
	return pipeline.Done(map[string]any{"component": pl}), nil
}

// installer connects to the space's cluster; every step that talks to the cluster calls it, so
// a step re-run on another replica needs nothing from an earlier step's memory.
func (p *Pipeline) installer(ctx context.Context, j *job.Job) (Installer, string, error) {
	sc, err := p.o.Spaces.Cluster(ctx, j.SpaceID)
	if err != nil {
		return nil, "", fmt.Errorf("space %s: %w", j.SpaceID, err)
	}
	owner := secrets.Owner{OrgID: j.OrgID, Kind: secrets.OwnerCluster, ID: j.SpaceID}
	creds, err := sc.Credentials(ctx, p.o.Secrets.For(owner))
	if err != nil {
		return nil, "", err
	}
	if sc.Auth == "" {
		// A registered cluster: its endpoint is the user's.
		creds.Dial = p.o.Outbound.DialContext
	}
	return p.o.Connect(ctx, creds)
}

func (p *Pipeline) connect(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	_, version, err := p.installer(ctx, r.Job)
	if err != nil {
		return pipeline.Result{}, err
	}
	return pipeline.Done(map[string]any{"cluster": map[string]any{"serverVersion": version}}), nil
}

func (p *Pipeline) install(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	pl, vals, err := p.resolve(r.Job)
	if err != nil {
		return pipeline.Result{}, err
	}
	var cfg Config
	if err := r.Config(&cfg); err != nil {
		return pipeline.Result{}, fault.System(err)
	}
	if err := p.withSecretValues(ctx, r.Job, cfg, vals); err != nil {
		return pipeline.Result{}, err
	}
	in, _, err := p.installer(ctx, r.Job)
	if err != nil {
		return pipeline.Result{}, err
	}
	labels := map[string]string{cluster.LabelJobID: r.Job.ID}
	st, err := in.InstallOrUpgrade(ctx, cluster.Release{
		Name: pl.Release, Namespace: pl.Namespace, Chart: pl.Chart, Values: vals, Labels: labels,
	})
	if err != nil {
		return pipeline.Result{}, err
	}
	return pipeline.Done(map[string]any{"release": st}), nil
}

func (p *Pipeline) uninstall(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	var pl plan
	ok, err := r.Infra("component", &pl)
	if err != nil {
		return pipeline.Result{}, fault.System(err)
	}
	if !ok {
		return pipeline.Skip("nothing was installed"), nil
	}
	in, _, err := p.installer(ctx, r.Job)
	if err != nil {
		return pipeline.Result{}, err
	}
	removed, err := in.Uninstall(ctx, pl.Release, pl.Namespace, r.Job.ID)
	if err != nil {
		return pipeline.Result{}, err
	}
	if !removed {
		return pipeline.Skip("release not present or owned by a later job"), nil
	}
	return pipeline.Done(map[string]any{"release": nil}), nil
}

func (p *Pipeline) waitReady(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	var pl plan
	if _, err := r.Infra("component", &pl); err != nil {
		return pipeline.Result{}, fault.System(err)
	}
	in, _, err := p.installer(ctx, r.Job)
	if err != nil {
		return pipeline.Result{}, err
	}
	rd, err := in.Ready(ctx, pl.Release, pl.Namespace)
	if err != nil {
		return pipeline.Result{}, err
	}
	if rd.Ready {
		return pipeline.Done(nil), nil
	}
	if len(rd.Failed) > 0 {
		return pipeline.Result{}, fault.UserAction(fmt.Errorf("component %s failed: %v", pl.ComponentID, rd.Failed), "ComponentFailed", "inspect the failed workloads in the cluster and fix the values", "")
	}
	if started := p.stepStarted(r); !started.IsZero() && p.o.Now().Sub(started) > p.o.ReadyTimeout {
		return pipeline.Result{}, fault.Transientf("component %s not ready after %s: %v", pl.ComponentID, p.o.ReadyTimeout, rd.Pending)
	}
	return pipeline.Wait(p.o.ReadyPoll, fmt.Sprintf("waiting for %v", rd.Pending), nil), nil
}

func (p *Pipeline) stepStarted(r *pipeline.Run) time.Time {
	if i := r.Job.StepIndex(r.Step); i >= 0 && r.Job.Steps[i].StartedAt != nil {
		return *r.Job.Steps[i].StartedAt
	}
	return time.Time{}
}

func (p *Pipeline) finalize(_ context.Context, r *pipeline.Run) (pipeline.Result, error) {
	var st cluster.ReleaseStatus
	if _, err := r.Infra("release", &st); err != nil {
		return pipeline.Result{}, fault.System(err)
	}
	return pipeline.Done(map[string]any{"outputs": map[string]any{
		"release": st.Name, "namespace": st.Namespace, "revision": st.Revision, "chartVersion": st.ChartVersion,
	}}), nil
}
