// Package network is the network family's pipeline: validate → create network (VPC, public and
// private subnets in two or more zones, internet gateway, NAT) → peering (skipped when none is
// asked) → finalize. An existing VPC is adopted and never deleted.
package network

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/steps"
)

// Step names.
const (
	StepValidate = "validate"
	StepNetwork  = "create_network"
	StepPeering  = "create_peering"
	StepFinalize = "finalize"
)

// Infra keys.
const (
	InfraNetwork = "network"
	InfraPeering = "peering"
)

// Config is a network request.
type Config struct {
	CIDR    string `json:"cidr,omitempty"`
	AZCount int    `json:"azCount,omitempty"`
	NoNAT   bool   `json:"noNAT,omitempty"`
	VPCID   string `json:"vpcID,omitempty"` // adopt an existing VPC
	// ExistingVPCID is vpcID's former name, still accepted; DecodeConfig folds it into VPCID.
	ExistingVPCID string   `json:"existingVpcID,omitempty"`
	SubnetIDs     []string `json:"subnetIDs,omitempty"` // with VPCID
	Peering       *Peering `json:"peering,omitempty"`
}

// Peering asks for a VPC peering connection to another VPC.
type Peering struct {
	PeerVPCID   string `json:"peerVPCID"`
	PeerOwnerID string `json:"peerOwnerID,omitempty"`
	PeerRegion  string `json:"peerRegion,omitempty"`
}

// Result is what the network step records (provider-shaped, kept as JSON).
type Result struct {
	VPCID string         `json:"vpcID"`
	Ready bool           `json:"ready"`
	Data  map[string]any `json:"data,omitempty"`
}

// Driver is the cloud work; every method is idempotent and keyed by the job.
type Driver interface {
	EnsureNetwork(ctx context.Context, j *job.Job, c Config) (Result, error)
	DeleteNetwork(ctx context.Context, j *job.Job) (done bool, err error)
	EnsurePeering(ctx context.Context, j *job.Job, vpcID string, p Peering) (string, error)
	DeletePeering(ctx context.Context, j *job.Job) error
}

// Resolver finds the driver for a job.
type Resolver func(ctx context.Context, j *job.Job) (Driver, error)

// Pipeline is the network family's pipeline.
type Pipeline struct {
	load steps.Loader[Config, Driver]
	poll time.Duration
	// updates are what each provider's driver changes on a live network (WithUpdates).
	updates map[string]Updates
}

var _ pipeline.Pipeline = (*Pipeline)(nil)

// New returns the pipeline.
func New(resolve Resolver, poll time.Duration) *Pipeline {
	if poll <= 0 {
		poll = 10 * time.Second
	}
	return &Pipeline{load: steps.Loader[Config, Driver]{Decode: DecodeConfig, Resolve: resolve}, poll: poll}
}

func (p *Pipeline) Family() job.Family      { return job.FamilyNetwork }
func (p *Pipeline) LeaseTTL() time.Duration { return 5 * time.Minute }

// DecodeConfig reads a job's config.
func DecodeConfig(raw json.RawMessage) (Config, error) {
	var c Config
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &c); err != nil {
			return c, fmt.Errorf("config: %w", err)
		}
	}
	if c.VPCID == "" {
		c.VPCID = c.ExistingVPCID
	}
	return c, nil
}

// Validate checks the config; errors name the field.
func (c Config) Validate() error {
	if c.CIDR != "" {
		pfx, err := netip.ParsePrefix(c.CIDR)
		if err != nil || !pfx.Addr().Is4() || pfx.Bits() < 16 || pfx.Bits() > 20 {
			return fmt.Errorf("cidr: %q is not an IPv4 block between /16 and /20", c.CIDR)
		}
	}
	if c.AZCount != 0 && (c.AZCount < 2 || c.AZCount > 6) {
		return errors.New("azCount: between 2 and 6")
	}
	if len(c.SubnetIDs) > 0 && c.VPCID == "" {
		return errors.New("subnetIDs: only with vpcID")
	}
	if c.Peering != nil && c.Peering.PeerVPCID == "" {
		return errors.New("peering.peerVPCID: required")
	}
	return nil
}

func (p *Pipeline) Validate(ctx context.Context, j *job.Job) error {
	return steps.CheckConfig(DecodeConfig)(ctx, j)
}

func (p *Pipeline) Steps(*job.Job) []pipeline.Step {
	return []pipeline.Step{
		steps.Validate(StepValidate, p.Validate),
		steps.Network(StepNetwork, InfraNetwork, p.load, p.poll, func(n Result) bool { return n.Ready }),
		{Name: StepPeering, Do: p.load.Do(p.peering), Undo: p.load.Do(p.undoPeering)},
		steps.Finalize(StepFinalize),
	}
}

func (p *Pipeline) peering(ctx context.Context, r *pipeline.Run, c Config, d Driver) (pipeline.Result, error) {
	if c.Peering == nil {
		var had map[string]any
		ok, err := r.Infra(InfraPeering, &had)
		if err != nil {
			return pipeline.Result{}, err
		}
		if ok {
			// A config update took the peering away: the connection and its routes go.
			if err := d.DeletePeering(ctx, r.Job); err != nil {
				return pipeline.Result{}, err
			}
			return pipeline.Done(map[string]any{InfraPeering: nil}), nil
		}
		return pipeline.Skip("no peering asked for"), nil
	}
	n, err := pipeline.InfraOf[Result](r, InfraNetwork)
	if err != nil {
		return pipeline.Result{}, err
	}
	id, err := d.EnsurePeering(ctx, r.Job, n.VPCID, *c.Peering)
	if err != nil {
		return pipeline.Result{}, err
	}
	return pipeline.Done(map[string]any{InfraPeering: map[string]string{"id": id}}), nil
}

func (p *Pipeline) undoPeering(ctx context.Context, r *pipeline.Run, _ Config, d Driver) (pipeline.Result, error) {
	return pipeline.Done(map[string]any{InfraPeering: nil}), d.DeletePeering(ctx, r.Job)
}
