package drivertest

import (
	"context"
	"encoding/json"
	"testing"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/job"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/pipeline/dnszone"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
	"github.com/groundworkhq/groundwork/internal/pipeline/registry"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
)

// Harness is what a module's test gives the suite for one family: a driver D on a fresh,
// isolated account of its test cloud, a config C that cloud serves, and a call it refuses.
type Harness[D, C any] struct {
	// Provider is the module's name, set on the jobs the suite makes.
	Provider string
	// Open opens the driver and the observer of the same account. It registers its own
	// cleanup with t.
	Open    func(t *testing.T) (D, Observer)
	Config  C
	Refusal Refusal[D]
	Options
}

func (h Harness[D, C]) jobs(f job.Family) func(id string) *job.Job {
	cfg, _ := json.Marshal(h.Config)
	return func(id string) *job.Job {
		return &job.Job{ID: id, OrgID: "org_drivertest", Family: f, Provider: h.Provider, Mode: job.ModeCreate,
			Status: job.StatusRunning, Config: cfg}
	}
}

func (h Harness[D, C]) refuse(d D) func(ctx context.Context, j *job.Job) error {
	if h.Refusal.Call == nil {
		return nil
	}
	return func(ctx context.Context, j *job.Job) error { return h.Refusal.Call(ctx, d, j) }
}

// Network runs the suite on a network driver: the network, then its teardown.
func Network(t *testing.T, h Harness[network.Driver, network.Config]) {
	d, observe := h.Open(t)
	run(t, h.Options, lifecycle{
		ensure: func(ctx context.Context, j *job.Job) (bool, error) {
			r, err := d.EnsureNetwork(ctx, j, h.Config)
			return r.Ready, err
		},
		delete: func(ctx context.Context, j *job.Job) (bool, error) {
			if err := d.DeletePeering(ctx, j); err != nil {
				return false, err
			}
			return d.DeleteNetwork(ctx, j)
		},
		refuse: h.refuse(d), class: h.Refusal.Class,
	}, observe, h.jobs(job.FamilyNetwork))
}

// Registry runs the suite on a registry driver: one repository.
func Registry(t *testing.T, h Harness[registry.Driver, registry.Config]) {
	d, observe := h.Open(t)
	run(t, h.Options, lifecycle{
		ensure: func(ctx context.Context, j *job.Job) (bool, error) {
			_, err := d.EnsureRepository(ctx, j, h.Config)
			return true, err
		},
		delete: func(ctx context.Context, j *job.Job) (bool, error) {
			return true, d.DeleteRepository(ctx, j, h.Config.Name)
		},
		refuse: h.refuse(d), class: h.Refusal.Class,
	}, observe, h.jobs(job.FamilyRegistry))
}

// DNSZone runs the suite on a dns_zone driver: the zone with the config's records.
func DNSZone(t *testing.T, h Harness[dnszone.Driver, dnszone.Config]) {
	d, observe := h.Open(t)
	run(t, h.Options, lifecycle{
		ensure: func(ctx context.Context, j *job.Job) (bool, error) {
			z, err := d.EnsureZone(ctx, j, h.Config)
			if err != nil {
				return false, err
			}
			for _, r := range h.Config.Records {
				if err := d.UpsertRecord(ctx, z.ID, r); err != nil {
					return false, err
				}
			}
			return true, nil
		},
		delete: func(ctx context.Context, j *job.Job) (bool, error) {
			return true, d.DeleteZone(ctx, j, h.Config.Name)
		},
		refuse: h.refuse(d), class: h.Refusal.Class,
	}, observe, h.jobs(job.FamilyDNSZone))
}

// VMPool runs the suite on a vm_pool driver: network, IAM, launch template, target group
// (when the config asks for a load balancer) and the VMs, then their teardown in reverse.
func VMPool(t *testing.T, h Harness[vmpool.Driver, vmpool.Config]) {
	d, observe := h.Open(t)
	c := h.Config
	run(t, h.Options, lifecycle{
		ensure: func(ctx context.Context, j *job.Job) (bool, error) {
			n, err := d.EnsureNetwork(ctx, j, c)
			if err != nil || !n.Ready {
				return false, err
			}
			profile, err := d.EnsureIAM(ctx, j)
			if err != nil {
				return false, err
			}
			lt, err := d.EnsureLaunchTemplate(ctx, j, c, n, profile)
			if err != nil {
				return false, err
			}
			if c.CreateLoadBalancer {
				if _, err := d.EnsureTargetGroup(ctx, j, c, n); err != nil {
					return false, err
				}
			}
			vms, err := d.EnsureVMs(ctx, j, c, n, lt)
			return err == nil && len(vms) >= int(c.Min), err
		},
		delete: func(ctx context.Context, j *job.Job) (bool, error) {
			if done, err := d.DeleteVMs(ctx, j); err != nil || !done {
				return false, err
			}
			if err := d.DeleteTargetGroup(ctx, j); err != nil {
				return false, err
			}
			if err := d.DeleteLaunchTemplate(ctx, j); err != nil {
				return false, err
			}
			if err := d.DeleteIAM(ctx, j); err != nil {
				return false, err
			}
			return d.DeleteNetwork(ctx, j)
		},
		refuse: h.refuse(d), class: h.Refusal.Class,
	}, observe, h.jobs(job.FamilyVMPool))
}

// Kubernetes runs the suite on a kubernetes driver: network, roles, the cluster and its node
// groups, then their teardown in reverse.
func Kubernetes(t *testing.T, h Harness[kubernetes.Driver, kubernetes.Config]) {
	d, observe := h.Open(t)
	c := h.Config
	run(t, h.Options, lifecycle{
		ensure: func(ctx context.Context, j *job.Job) (bool, error) {
			n, err := d.EnsureNetwork(ctx, j, c)
			if err != nil || !n.Ready {
				return false, err
			}
			r, err := d.EnsureRoles(ctx, j)
			if err != nil {
				return false, err
			}
			cl, err := d.EnsureCluster(ctx, j, c, n, r)
			return cl.Ready, err
		},
		delete: func(ctx context.Context, j *job.Job) (bool, error) {
			if done, err := d.DeleteCluster(ctx, j, c.Name); err != nil || !done {
				return false, err
			}
			if err := d.DeleteRoles(ctx, j); err != nil {
				return false, err
			}
			return d.DeleteNetwork(ctx, j)
		},
		refuse: h.refuse(d), class: h.Refusal.Class,
	}, observe, h.jobs(job.FamilyKubernetes))
}

// DatastoreRequest is the server the datastore suite asks for.
type DatastoreRequest struct {
	Engine   ds.Engine      `json:"engine"`
	Version  string         `json:"version,omitempty"`
	Settings map[string]any `json:"settings,omitempty"`
}

// Datastore runs the suite on a datastore driver: its network work, the server until it
// accepts the admin login, then their removal.
func Datastore(t *testing.T, h Harness[dspipe.Driver, DatastoreRequest]) {
	d, observe := h.Open(t)
	c := h.Config
	password := ds.GeneratePassword()
	run(t, h.Options, lifecycle{
		ensure: func(ctx context.Context, j *job.Job) (bool, error) {
			if _, err := d.Network.Ensure(ctx, dspipe.NetworkParams{JobID: j.ID, Engine: c.Engine}); err != nil {
				return false, err
			}
			if _, err := d.Servers.Create(ctx, dspipe.CreateParams{JobID: j.ID, Engine: c.Engine, Version: c.Version,
				Name: j.ID, AdminPassword: password, Settings: c.Settings}); err != nil {
				return false, err
			}
			st, err := d.Servers.Status(ctx, dspipe.StatusParams{JobID: j.ID, Engine: c.Engine, AdminPassword: password})
			return st.Ready, err
		},
		delete: func(ctx context.Context, j *job.Job) (bool, error) {
			if gone, err := d.Servers.Delete(ctx, dspipe.DeleteParams{JobID: j.ID, Engine: c.Engine}); err != nil || !gone {
				return false, err
			}
			return d.Network.Delete(ctx, dspipe.NetworkParams{JobID: j.ID, Engine: c.Engine})
		},
		refuse: h.refuse(d), class: h.Refusal.Class,
	}, observe, h.jobs(job.FamilyDatastore))
}
