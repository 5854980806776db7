package network

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// defaultAZCount is the zone count a config without azCount gets (the providers' default).
const defaultAZCount = 2

// fixedFields are the network config's fields a live network keeps, with why.
var fixedFields = []struct {
	field, why string
	get        func(Config) any
}{
	{"cidr", "a VPC keeps its address block; make a new network and move to it", func(c Config) any { return cidrOf(c) }},
	{"vpcID", "an adopted VPC is the network's identity; adopt the other VPC in a new network", func(c Config) any { return c.VPCID }},
	{"subnetIDs", "the adopted subnets are the customer's; adopt them again in a new network", func(c Config) any { return fmt.Sprint(c.SubnetIDs) }},
	{"noNAT", "the private subnets' egress is set when the network is made; what runs there depends on it", func(c Config) any { return c.NoNAT }},
}

// Updates are the config changes a provider's network driver carries out on a live network
// when the network's steps run again.
type Updates struct {
	// Zones: create_network makes the subnets of added zones.
	Zones bool
	// Peering: create_peering adds, replaces or deletes the peering the config changed.
	Peering bool
	// RegionalSubnets: the cloud's subnets span every zone of the region (GCP, Azure), so a
	// live network's azCount places nothing there; a change of it is refused saying so.
	RegionalSubnets bool
}

// WithUpdates records what provider's network driver changes on a live network (set by the
// server's wiring from what each cloud module does). A provider not named takes no network
// updates: its changes are refused by field.
func (p *Pipeline) WithUpdates(provider string, u Updates) *Pipeline {
	p.updates = maps.Clone(p.updates)
	if p.updates == nil {
		p.updates = map[string]Updates{}
	}
	p.updates[provider] = u
	return p
}

var _ interface {
	PlanUpdate(ctx context.Context, j *job.Job, req pipeline.UpdateRequest) (*pipeline.UpdatePlan, error)
} = (*Pipeline)(nil)

// PlanUpdate plans a configuration update of a live network (jobs.Updater). A larger azCount
// adds public and private subnets in the next zones: create_network runs again and makes what
// is missing, leaving what exists alone. peering is added, removed or replaced (another peer
// VPC) by create_peering running again. Everything else is refused by name: a smaller azCount
// would strand what runs in the removed subnets. On a provider whose subnets are regional
// (Updates.RegionalSubnets: GCP, Azure) azCount places nothing, so a change of it is refused
// saying so: taken as a no-op it would record no revision, and the job would keep a config
// other than the one sent. What a provider does not change (WithUpdates) is refused with rule
// provider.
func (p *Pipeline) PlanUpdate(_ context.Context, j *job.Job, req pipeline.UpdateRequest) (*pipeline.UpdatePlan, error) {
	cur, err := DecodeConfig(j.Config)
	if err != nil {
		return nil, validation.New("config", "stored", "the job's stored config cannot be read: "+err.Error())
	}
	next, err := DecodeConfig(req.Config)
	if err != nil {
		return nil, validation.New("config", "type", err.Error())
	}
	if err := next.Validate(); err != nil {
		return nil, validation.New("config", "invalid", err.Error())
	}
	var refused validation.Error
	for _, f := range fixedFields {
		if !reflect.DeepEqual(f.get(cur), f.get(next)) {
			refused = append(refused, validation.FieldError{Field: "config." + f.field, Rule: "immutable", Message: f.why})
		}
	}
	u := p.updates[j.Provider]
	from, to := azCount(cur), azCount(next)
	switch {
	case from == to:
	case cur.VPCID != "":
		refused = append(refused, validation.FieldError{Field: "config.azCount", Rule: "immutable",
			Message: "an adopted VPC's subnets are the customer's; Groundwork adds none to it"})
	case u.RegionalSubnets:
		refused = append(refused, validation.FieldError{Field: "config.azCount", Rule: "provider",
			Message: "provider " + j.Provider + " makes subnets that span every zone of the region: azCount places nothing there, so there is nothing to change"})
	case to < from:
		refused = append(refused, validation.FieldError{Field: "config.azCount", Rule: "shrink",
			Message: fmt.Sprintf("subnets are never removed (from %d to %d zones): what runs in them would be stranded; make a new network", from, to)})
	}
	if from != to && !u.Zones && !u.RegionalSubnets {
		refused = append(refused, validation.FieldError{Field: "config.azCount", Rule: "provider",
			Message: "provider " + j.Provider + " cannot add zones to a live network yet"})
	}
	if !u.Peering && !reflect.DeepEqual(cur.Peering, next.Peering) {
		refused = append(refused, validation.FieldError{Field: "config.peering", Rule: "provider",
			Message: "provider " + j.Provider + " cannot change a live network's peering yet"})
	}
	if len(refused) > 0 {
		return nil, refused
	}
	out := &pipeline.UpdatePlan{Config: req.Config, Steps: slices.Clone(j.Steps), Rerun: []string{}, Resources: []pipeline.ResourceChange{}}
	var rerun []string
	if from != to {
		out.Resources = append(out.Resources, pipeline.ResourceChange{Resource: "subnets/" + j.ID, Action: pipeline.ActionInPlace,
			Changes:    []pipeline.FieldChange{{Field: "azCount", From: from, To: to}},
			Disruption: "none: public and private subnets are added in the next zones; the existing ones stay"})
		rerun = append(rerun, StepNetwork)
	}
	if rc, ok := peeringChange(cur.Peering, next.Peering); ok {
		out.Resources = append(out.Resources, rc)
		rerun = append(rerun, StepPeering)
	}
	if len(rerun) == 0 {
		if len(out.Resources) == 0 {
			out.Resources = append(out.Resources, pipeline.ResourceChange{Resource: "network/" + j.ID, Action: pipeline.ActionNoOp,
				Changes: []pipeline.FieldChange{}, Disruption: "none"})
		}
		return out, nil
	}
	rerun = append(rerun, StepFinalize)
	if err := out.Reopen(j, rerun...); err != nil {
		return nil, err
	}
	return out, nil
}

// defaultCIDR is the block a config without cidr gets (the catalog's and providers' default).
const defaultCIDR = "10.0.0.0/16"

// cidrOf is the block a config asks for, the default filled in.
func cidrOf(c Config) string {
	if c.CIDR == "" && c.VPCID == "" {
		return defaultCIDR
	}
	return c.CIDR
}

// azCount is the zone count a config asks for, the default filled in.
func azCount(c Config) int {
	if c.AZCount == 0 {
		return defaultAZCount
	}
	return c.AZCount
}

// peeringChange is the diff of the peering connection: added, removed, or replaced when it
// goes to another VPC (a peering connection cannot change its peer).
func peeringChange(from, to *Peering) (pipeline.ResourceChange, bool) {
	if reflect.DeepEqual(from, to) {
		return pipeline.ResourceChange{}, false
	}
	rc := pipeline.ResourceChange{Resource: "vpc-peering", Action: pipeline.ActionInPlace, Disruption: "none"}
	var a, b any
	if from != nil {
		a = *from
	}
	if to != nil {
		b = *to
	}
	rc.Changes = []pipeline.FieldChange{{Field: "peering", From: a, To: b}}
	switch {
	case from == nil:
		rc.Disruption = "none: a new peering connection and its routes"
	case to == nil:
		rc.Disruption = "traffic to the peer VPC stops"
	default:
		rc.Action = pipeline.ActionReplace
		rc.Disruption = "traffic to " + from.PeerVPCID + " stops; a new connection to " + to.PeerVPCID + " is made"
	}
	return rc, true
}
