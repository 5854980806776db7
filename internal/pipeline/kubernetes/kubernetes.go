// Package kubernetes is the managed-cluster family's pipeline: validate →
// network → IAM → cluster (control plane and node groups) → bootstrap components → register
// space → finalize. Register-space records the endpoint and CA only; tokens are minted from the
// account's credentials when needed, so no static kubeconfig is stored.
package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/steps"
)

// Step names.
const (
	StepValidate   = "validate"
	StepNetwork    = "create_network"
	StepIAM        = "create_iam"
	StepCluster    = "create_cluster"
	StepComponents = "bootstrap_components"
	StepRegister   = "register_space"
	StepFinalize   = "finalize"
)

// Infra keys.
const (
	InfraNetwork    = "network"
	InfraIAM        = "iam"
	InfraCluster    = "cluster"
	InfraComponents = "components"
	InfraSpace      = "space"
)

// NodeGroup is one managed node group of the request.
type NodeGroup struct {
	Name         string `json:"name"`
	InstanceType string `json:"instanceType"`
	Min          int32  `json:"min"`
	Max          int32  `json:"max"`
}

// Config is the reference's cluster request.
type Config struct {
	Name       string      `json:"name"`
	Version    string      `json:"version,omitempty"`
	NodeGroups []NodeGroup `json:"nodeGroups"`
	VPCID      string      `json:"vpcID,omitempty"`
	SubnetIDs  []string    `json:"subnetIDs,omitempty"`
	Components []string    `json:"components,omitempty"`
	// PrivateCluster makes the control plane's endpoint reachable only from inside the
	// cluster's network: the bootstrap components and the cluster space need Groundwork to
	// run where it can reach it (the same VPC/VNet or a peered one).
	PrivateCluster bool `json:"privateCluster,omitempty"`
}

// Network is what the network step records.
type Network struct {
	VPCID     string   `json:"vpcID"`
	SubnetIDs []string `json:"subnetIDs"`
	Ready     bool     `json:"ready"`
	// Data is the driver's own record (Azure keeps its operations in flight here, to
	// resume them on the next call); the pipeline stores it and hands it back.
	Data map[string]any `json:"data,omitempty"`
}

// Roles are the IAM roles the cluster needs.
type Roles struct {
	ClusterRole string `json:"clusterRole"`
	NodeRole    string `json:"nodeRole"`
}

// Cluster is what the cluster step records: where the API server is and its CA.
type Cluster struct {
	Name     string `json:"name"`
	ID       string `json:"id"`
	Endpoint string `json:"endpoint"`
	CAData   string `json:"caData"`
	Ready    bool   `json:"ready"`
	// Data is the driver's own record, as Network's.
	Data map[string]any `json:"data,omitempty"`
}

// Driver is the cloud work; every method is idempotent and keyed by the job.
type Driver interface {
	EnsureNetwork(ctx context.Context, j *job.Job, c Config) (Network, error)
	DeleteNetwork(ctx context.Context, j *job.Job) (done bool, err error)
	EnsureRoles(ctx context.Context, j *job.Job) (Roles, error)
	DeleteRoles(ctx context.Context, j *job.Job) error
	// EnsureCluster creates or observes the control plane and, once it is up, converges the
	// node groups to c (a config update re-runs it: missing groups are made, sizes patched,
	// and, on drivers named in WithUpdates, the job's groups c no longer lists deleted);
	// Ready is true when all are active and the removed ones gone.
	EnsureCluster(ctx context.Context, j *job.Job, c Config, n Network, r Roles) (Cluster, error)
	DeleteCluster(ctx context.Context, j *job.Job, name string) (done bool, err error)
}

// ComponentInstaller installs the default platform components into a fresh cluster (a later
// issue fills it; nil or an empty list is valid).
type ComponentInstaller interface {
	Install(ctx context.Context, j *job.Job, cl Cluster, components []string) error
}

// SpaceRegistrar records a created cluster as a space, through the same space records a
// registered cluster gets, so that components can be installed into it. Both calls are
// idempotent (the space ID is derived from the job).
type SpaceRegistrar interface {
	RegisterSpace(ctx context.Context, j *job.Job, cl Cluster) (spaceID string, err error)
	UnregisterSpace(ctx context.Context, j *job.Job, spaceID string) error
}

// Resolver finds the driver for a job.
type Resolver func(ctx context.Context, j *job.Job) (Driver, error)

// Pipeline is the kubernetes family's pipeline.
type Pipeline struct {
	load       steps.Loader[Config, Driver]
	components ComponentInstaller
	spaces     SpaceRegistrar
	poll       time.Duration
	// updatable are the providers whose driver carries out node group changes (WithUpdates).
	updatable []string
}

// WithSpaces makes the register-space step record the cluster as a space (nil: the step
// records endpoint and CA in infra only).
func (p *Pipeline) WithSpaces(s SpaceRegistrar) *Pipeline {
	p.spaces = s
	return p
}

var _ pipeline.Pipeline = (*Pipeline)(nil)

// New returns the pipeline; components may be nil.
func New(resolve Resolver, components ComponentInstaller, poll time.Duration) *Pipeline {
	if poll <= 0 {
		poll = 30 * time.Second
	}
	return &Pipeline{load: steps.Loader[Config, Driver]{Decode: DecodeConfig, Resolve: resolve}, components: components, poll: poll}
}

func (p *Pipeline) Family() job.Family { return job.FamilyKubernetes }

// LeaseTTL: one step is a few API calls (EKS create returns at once; the wait releases the lease).
func (p *Pipeline) LeaseTTL() time.Duration { return 20 * time.Minute }

// DecodeConfig reads a job's config.
func DecodeConfig(raw json.RawMessage) (Config, error) {
	var c Config
	if err := json.Unmarshal(raw, &c); err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

// Validate checks the config; errors name the field.
func (c Config) Validate() error {
	if c.Name == "" || len(c.Name) > 100 {
		return errors.New("name: required, at most 100 characters")
	}
	if len(c.NodeGroups) == 0 {
		return errors.New("nodeGroups: at least one")
	}
	for i, ng := range c.NodeGroups {
		if ng.Name == "" || ng.InstanceType == "" || ng.Min < 0 || ng.Max < 1 || ng.Min > ng.Max {
			return fmt.Errorf("nodeGroups[%d]: name, instanceType and 0 <= min <= max, max >= 1", i)
		}
	}
	if len(c.SubnetIDs) > 0 && c.VPCID == "" {
		return errors.New("subnetIDs: only with vpcID")
	}
	return nil
}

func (p *Pipeline) Validate(ctx context.Context, j *job.Job) error {
	return steps.CheckConfig(DecodeConfig)(ctx, j)
}

func (p *Pipeline) Steps(*job.Job) []pipeline.Step {
	return []pipeline.Step{
		steps.Validate(StepValidate, p.Validate),
		steps.Network(StepNetwork, InfraNetwork, p.load, p.poll, func(n Network) bool { return n.Ready }),
		steps.IAM(StepIAM, InfraIAM, p.load, Driver.EnsureRoles, Driver.DeleteRoles),
		{Name: StepCluster, Do: p.load.Do(p.cluster), Undo: p.load.Do(p.undoCluster)},
		{Name: StepComponents, Do: p.bootstrap},
		{Name: StepRegister, Do: p.register, Undo: p.unregister},
		steps.Finalize(StepFinalize),
	}
}

func (p *Pipeline) cluster(ctx context.Context, r *pipeline.Run, c Config, d Driver) (pipeline.Result, error) {
	n, err := pipeline.InfraOf[Network](r, InfraNetwork)
	if err != nil {
		return pipeline.Result{}, err
	}
	roles, err := pipeline.InfraOf[Roles](r, InfraIAM)
	if err != nil {
		return pipeline.Result{}, err
	}
	cl, err := d.EnsureCluster(ctx, r.Job, c, n, roles)
	if err != nil {
		return pipeline.Result{}, err
	}
	return steps.Ensured(InfraCluster, cl, cl.Ready, p.poll, "waiting for the control plane and node groups"), nil
}

func (p *Pipeline) undoCluster(ctx context.Context, r *pipeline.Run, c Config, d Driver) (pipeline.Result, error) {
	done, err := d.DeleteCluster(ctx, r.Job, c.Name)
	if err != nil {
		return pipeline.Result{}, err
	}
	return steps.Gone(InfraCluster, done, p.poll, "waiting for the node groups and control plane to be deleted"), nil
}

func (p *Pipeline) bootstrap(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	c, err := DecodeConfig(r.Job.Config)
	if err != nil {
		return pipeline.Result{}, fault.UserAction(err, "InvalidConfig", err.Error(), "")
	}
	if len(c.Components) == 0 || p.components == nil {
		return pipeline.Skip("no default components to install"), nil
	}
	cl, err := pipeline.InfraOf[Cluster](r, InfraCluster)
	if err != nil {
		return pipeline.Result{}, err
	}
	if err := p.components.Install(ctx, r.Job, cl, c.Components); err != nil {
		return pipeline.Result{}, err
	}
	return pipeline.Done(map[string]any{InfraComponents: c.Components}), nil
}

func (p *Pipeline) register(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	cl, err := pipeline.InfraOf[Cluster](r, InfraCluster)
	if err != nil {
		return pipeline.Result{}, err
	}
	// Endpoint and CA only: credentials are minted per use from the cloud account.
	space := map[string]string{
		"clusterName": cl.Name, "endpoint": cl.Endpoint, "caData": cl.CAData, "auth": "cloud-token",
	}
	if p.spaces != nil {
		id, err := p.spaces.RegisterSpace(ctx, r.Job, cl)
		if err != nil {
			return pipeline.Result{}, err
		}
		space["id"] = id
	}
	return pipeline.Done(map[string]any{InfraSpace: space}), nil
}

func (p *Pipeline) unregister(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	var space map[string]string
	if ok, err := r.Infra(InfraSpace, &space); err != nil {
		return pipeline.Result{}, err
	} else if ok && space["id"] != "" && p.spaces != nil {
		if err := p.spaces.UnregisterSpace(ctx, r.Job, space["id"]); err != nil {
			return pipeline.Result{}, err
		}
	}
	return pipeline.Done(map[string]any{InfraSpace: nil}), nil
}
