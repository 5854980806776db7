package gcp

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	compute "google.golang.org/api/compute/v1"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/provider"
	"github.com/groundworkhq/groundwork/internal/store"
)

// Placement is where one job's datastore goes: the client of its space and the job.
type Placement struct {
	C *Client
	J *job.Job
}

// PlacementResolver finds the placement of a job by its id.
type PlacementResolver func(ctx context.Context, jobID string) (Placement, error)

// DatastoreDriver serves the datastore pipeline on Google Cloud: PostgreSQL and MySQL on
// Cloud SQL (cloudsql.go) and Redis on Memorystore for Redis (memorystore.go), each reached
// on a private address only, in a VPC network through private services access.
type DatastoreDriver struct{ Resolve PlacementResolver }

// DatastoreNetwork serves the datastore pipeline's Network on Google Cloud.
type DatastoreNetwork struct{ DatastoreDriver }

var (
	_ dspipe.Servers            = DatastoreDriver{}
	_ dspipe.Network            = DatastoreNetwork{}
	_ provider.DatastoreDrivers = (*Module)(nil)
	_ provider.SecretRoutes     = (*Module)(nil)
)

// Driver returns the pipeline's driver value.
func (d DatastoreDriver) Driver() dspipe.Driver {
	return dspipe.Driver{Servers: d, Network: DatastoreNetwork{d}}
}

// DatastoreDriver implements provider.DatastoreDrivers: each call finds its job, then the
// client of the job's space.
func (m *Module) DatastoreDriver() dspipe.Driver {
	return DatastoreDriver{Resolve: func(ctx context.Context, jobID string) (Placement, error) {
		j, err := m.o.Records.GetJob(ctx, &store.GetJobParams{ID: jobID})
		if err != nil {
			return Placement{}, provider.LookupErr("job "+jobID, err)
		}
		c, err := m.Client(ctx, j)
		if err != nil {
			return Placement{}, err
		}
		return Placement{C: c, J: j}, nil
	}}.Driver()
}

// Check implements dspipe.Servers: every sizing setting applies to a Cloud SQL instance; a
// Memorystore instance takes allocatedStorageGB as its memory and has no machine type or
// backups.
func (d DatastoreDriver) Check(_ context.Context, p dspipe.CheckParams) (dspipe.CheckResult, error) {
	switch p.Engine {
	case ds.EngineRedis:
		s, err := redisSizingOf(p.Version, p.Settings)
		if err != nil {
			return dspipe.CheckResult{}, err
		}
		return dspipe.CheckResult{Version: s.version, NotApplicable: s.ignored}, nil
	case ds.EnginePostgres, ds.EngineMySQL:
		s, err := sqlSizingOf(p.Engine, p.Version, p.Settings)
		if err != nil {
			return dspipe.CheckResult{}, err
		}
		return dspipe.CheckResult{Version: s.version}, nil
	}
	return dspipe.CheckResult{}, engineUnsupported(p.Engine)
}

func engineUnsupported(e ds.Engine) error {
	return fault.UserAction(fmt.Errorf("engine %q is not served on GCP", e), "EngineUnsupported", "Pick postgres, mysql or redis.", "")
}

// Create implements dspipe.Servers: it makes the job's instance if it is not there and
// returns it once Google gives its private address (waiting up to createWait; a later call
// watches the same instance); Status says when it is ready.
func (d DatastoreDriver) Create(ctx context.Context, p dspipe.CreateParams) (dspipe.ServerInfo, error) {
	pl, err := d.Resolve(ctx, p.JobID)
	if err != nil {
		return dspipe.ServerInfo{}, err
	}
	switch p.Engine {
	case ds.EngineRedis:
		return pl.createRedis(ctx, p)
	case ds.EnginePostgres, ds.EngineMySQL:
		return pl.createSQL(ctx, p)
	}
	return dspipe.ServerInfo{}, engineUnsupported(p.Engine)
}

// Status implements dspipe.Servers.
func (d DatastoreDriver) Status(ctx context.Context, p dspipe.StatusParams) (dspipe.ServerStatus, error) {
	pl, err := d.Resolve(ctx, p.JobID)
	if err != nil {
		return dspipe.ServerStatus{}, err
	}
	switch p.Engine {
	case ds.EngineRedis:
		return pl.redisStatus(ctx)
	case ds.EnginePostgres, ds.EngineMySQL:
		return pl.sqlStatus(ctx, p.Engine)
	}
	return dspipe.ServerStatus{}, engineUnsupported(p.Engine)
}

// Delete implements dspipe.Servers: it starts the instance's delete and reports gone once
// Google no longer has it. An instance of the job's name that is not the job's is not
// deleted.
func (d DatastoreDriver) Delete(ctx context.Context, p dspipe.DeleteParams) (bool, error) {
	pl, err := d.Resolve(ctx, p.JobID)
	if err != nil {
		return false, err
	}
	switch p.Engine {
	case ds.EngineRedis:
		return pl.deleteRedis(ctx)
	case ds.EnginePostgres, ds.EngineMySQL:
		return pl.deleteSQL(ctx, p.Engine)
	}
	return true, nil // nothing is made for an engine not served here
}

// Roles of the datastore's network resources.
const (
	roleDSNetwork = "ds-vpc"
	roleDSRange   = "ds-range"
	// dsRangePrefix is the size of the range reserved for private services access: Cloud SQL
	// and Memorystore take their addresses from it (Google asks for /24 at least).
	dsRangePrefix = 20
)

// dsNetwork is the VPC network a job's datastore is placed in.
type dsNetwork struct {
	// id is the network as "projects/<p>/global/networks/<n>".
	id string
	// rangeName is the job's own allocated range for private services access; "" when the
	// job names its network, whose private services access is already set up.
	rangeName string
	own       bool
}

var networkID = regexp.MustCompile(`^projects/([a-z][-a-z0-9.:]*[a-z0-9])/global/networks/([a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)$`)

// networkOf is the network j's datastore goes in: the network its config names (vpcID, a
// network job's vpcID "projects/<p>/global/networks/<n>" or a self link), or else one of
// its own.
func (pl Placement) networkOf() (dsNetwork, error) {
	var cfg struct {
		VPCID string `json:"vpcID"`
	}
	if len(pl.J.Config) > 0 {
		_ = json.Unmarshal(pl.J.Config, &cfg) // the pipeline decoded it already
	}
	if cfg.VPCID == "" {
		return dsNetwork{id: "projects/" + pl.C.ProjectID + "/global/networks/" + name(pl.J, roleDSNetwork),
			rangeName: name(pl.J, roleDSRange), own: true}, nil
	}
	id := strings.TrimPrefix(cfg.VPCID, "https://www.googleapis.com/compute/v1/")
	id = strings.TrimPrefix(id, "https://compute.googleapis.com/compute/v1/")
	if !networkID.MatchString(id) {
		return dsNetwork{}, fault.UserAction(fmt.Errorf("vpcID %q is not a VPC network", cfg.VPCID), "NetworkInvalid",
			"Give vpcID as projects/<project>/global/networks/<network> (a network job's vpcID).", "")
	}
	return dsNetwork{id: id}, nil
}

// Ensure implements dspipe.Network. A job that names its network gets nothing made: the
// network must be there. Otherwise the job gets its own custom-mode VPC network and a range
// reserved in it for private services access (purpose VPC_PEERING), which its instance's
// addresses come from.
//
// The private services access connection (servicenetworking.services.connections) that
// peers the range to Google's service producer network is not made here: the module's
// servicenetworking support makes it. Without it Google refuses a private-IP instance.
func (n DatastoreNetwork) Ensure(ctx context.Context, p dspipe.NetworkParams) (map[string]any, error) {
	pl, err := n.Resolve(ctx, p.JobID)
	if err != nil {
		return nil, err
	}
	c := pl.C
	nw, err := pl.networkOf()
	if err != nil {
		return nil, err
	}
	s, err := c.computeService(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"provider": Name, "network": nw.id, "ownNetwork": nw.own}
	if !nw.own {
		m := networkID.FindStringSubmatch(nw.id)
		if _, err := s.Networks.Get(m[1], m[2]).Context(ctx).Do(); err != nil {
			if notFound(err) {
				return nil, fault.UserAction(fmt.Errorf("network %s: %w", nw.id, err), "NetworkNotFound",
					"The network vpcID names is not there; give the vpcID of an existing network.", c.ConsoleURL("networking/networks/list"))
			}
			return nil, c.Classify(err)
		}
		return out, nil
	}
	ops := Ops{}
	netRes, rangeRes := pl.networkResources(s, nw)
	err = c.await(ctx, "the datastore network", func() (bool, error) {
		ok, err := c.converge(ctx, ops, "create network", netRes)
		if err != nil || !ok {
			return false, err
		}
		return c.converge(ctx, ops, "create range", rangeRes)
	})
	if err != nil {
		return nil, err
	}
	out["allocatedIpRange"] = nw.rangeName
	return out, nil
}

// Delete implements dspipe.Network: the range, then the network, each when it is the job's.
func (n DatastoreNetwork) Delete(ctx context.Context, p dspipe.NetworkParams) (bool, error) {
	pl, err := n.Resolve(ctx, p.JobID)
	if err != nil {
		return false, err
	}
	nw, err := pl.networkOf()
	if err != nil || !nw.own {
		// A network the job names is not the job's; a vpcID that is no network named none.
		return true, nil
	}
	c := pl.C
	s, err := c.computeService(ctx)
	if err != nil {
		return false, err
	}
	ops := Ops{}
	netRes, rangeRes := pl.networkResources(s, nw)
	err = c.await(ctx, "deleting the datastore network", func() (bool, error) {
		gone, err := c.remove(ctx, ops, "delete range", rangeRes)
		if err != nil || !gone {
			return false, err
		}
		return c.remove(ctx, ops, "delete network", netRes)
	})
	return err == nil, err
}

// networkResources are the job's own network and range.
func (pl Placement) networkResources(s *compute.Service, nw dsNetwork) (Resource, Resource) {
	c, j := pl.C, pl.J
	netName := name(j, roleDSNetwork)
	poll := c.pollCompute(s)
	network := Resource{
		Get: func(ctx context.Context) (State, error) {
			v, err := s.Networks.Get(c.ProjectID, netName).Context(ctx).Do()
			if notFound(err) {
				return State{}, nil
			}
			if err != nil {
				return State{}, err
			}
			return State{Found: true, Ours: ownsDescription(j, v.Description), Ready: true}, nil
		},
		Create: func(ctx context.Context) (string, error) {
			return startCompute(s.Networks.Insert(c.ProjectID, &compute.Network{Name: netName, Description: description(j, roleDSNetwork),
				AutoCreateSubnetworks: false, ForceSendFields: []string{"AutoCreateSubnetworks"},
				RoutingConfig: &compute.NetworkRoutingConfig{RoutingMode: "REGIONAL"}}).
				RequestId(requestID(j, "create datastore network")).Context(ctx).Do())
		},
		Delete: func(ctx context.Context) (string, error) {
			return startCompute(s.Networks.Delete(c.ProjectID, netName).RequestId(requestID(j, "delete datastore network")).Context(ctx).Do())
		},
		Poll: poll,
	}
	rng := Resource{
		Get: func(ctx context.Context) (State, error) {
			v, err := s.GlobalAddresses.Get(c.ProjectID, nw.rangeName).Context(ctx).Do()
			if notFound(err) {
				return State{}, nil
			}
			if err != nil {
				return State{}, err
			}
			return State{Found: true, Ours: ownsDescription(j, v.Description), Ready: v.Status == "RESERVED" || v.Status == "IN_USE"}, nil
		},
		Create: func(ctx context.Context) (string, error) {
			return startCompute(s.GlobalAddresses.Insert(c.ProjectID, &compute.Address{Name: nw.rangeName, Description: description(j, roleDSRange),
				Labels: labels(j, roleDSRange), Purpose: "VPC_PEERING", AddressType: "INTERNAL", PrefixLength: dsRangePrefix,
				Network: networkURL(nw.id)}).
				RequestId(requestID(j, "create datastore range")).Context(ctx).Do())
		},
		Delete: func(ctx context.Context) (string, error) {
			return startCompute(s.GlobalAddresses.Delete(c.ProjectID, nw.rangeName).RequestId(requestID(j, "delete datastore range")).Context(ctx).Do())
		},
		Poll: poll,
	}
	return network, rng
}

// createWait bounds how long Create waits for a new instance's address, below the datastore
// pipeline's five-minute lease. Cloud SQL and Memorystore give an instance its address when
// they have made it, which takes minutes; a create_server step that returned at awaitFor
// would spend its transient-retry budget on an instance that is merely being made.
const createWait = 4 * time.Minute

func asInt(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int32:
		return int(n), true
	case int64:
		return int(n), true
	case float64:
		return int(n), true
	}
	return 0, false
}
