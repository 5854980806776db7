package gcp

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
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

// dsNetwork is the VPC network a job's datastore is placed in.
type dsNetwork struct {
	// id is the network as "projects/<p>/global/networks/<n>".
	id string
	// rangeName is the range the job's own network reserves for private services access,
	// which its instance's address comes from; "" when the job names its network, whose
	// connection's ranges Google picks from.
	rangeName string
	own       bool
}

var networkID = regexp.MustCompile(`^projects/([a-z][-a-z0-9.:]*[a-z0-9])/global/networks/([a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)$`)

// networkOf is the network j's datastore goes in: the network its config names (vpcID, a
// network job's vpcID "projects/<p>/global/networks/<n>" or a self link), or else one of
// its own, made as the network family makes a network job's.
func (pl Placement) networkOf() (dsNetwork, error) {
	var cfg struct {
		VPCID string `json:"vpcID"`
	}
	if len(pl.J.Config) > 0 {
		_ = json.Unmarshal(pl.J.Config, &cfg) // the pipeline decoded it already
	}
	if cfg.VPCID == "" {
		return dsNetwork{id: NetworkDriver{C: pl.C}.own(pl.J).ID(), rangeName: name(pl.J, rolePSARange), own: true}, nil
	}
	id := strings.TrimPrefix(cfg.VPCID, "https://www.googleapis.com/compute/v1/")
	id = strings.TrimPrefix(id, "https://compute.googleapis.com/compute/v1/")
	if !networkID.MatchString(id) {
		return dsNetwork{}, fault.UserAction(fmt.Errorf("vpcID %q is not a VPC network", cfg.VPCID), "NetworkInvalid",
			"Give vpcID as projects/<project>/global/networks/<network> (a network job's vpcID).", "")
	}
	return dsNetwork{id: id}, nil
}

// dsNetworkConfig is the job's own network as the network family makes it: the default
// block, and no Cloud NAT, as a Cloud SQL or Memorystore instance makes no connections out
// through the network.
var dsNetworkConfig = network.Config{NoNAT: true}

// Ensure implements dspipe.Network. A job that names its network gets nothing made there:
// the network must be there with private services access set up (a network job's network
// has it). Otherwise the job gets its own network, made by the network family's code: a
// custom-mode network, its subnet and firewall rules, a range reserved for private services
// access, and the Service Networking connection that peers that range to Google's service
// producer network, which is where Cloud SQL and Memorystore put the instance's address.
//
// The step's result is recorded only once the step is done, so the operations in flight
// are not kept between calls: each call reads the resources again (the NetworkDriver's
// inserts carry requestIds, which Google answers with the operation already under way, and
// Service Networking answers a create for a network with one under way with that one).
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
	nd := NetworkDriver{C: c}
	if !nw.own {
		if err := nd.checkPrivateServicesAccess(ctx, nw.id); err != nil {
			return nil, err
		}
		return map[string]any{"provider": Name, "network": nw.id, "ownNetwork": false}, nil
	}
	var res network.Result
	err = c.await(ctx, "the datastore network", func() (bool, error) {
		r, err := nd.ensure(ctx, pl.J, dsNetworkConfig, true)
		res = r
		return r.Ready, err
	})
	if err != nil {
		return nil, err
	}
	made := networkOf(res)
	return map[string]any{"provider": Name, "network": nw.id, "ownNetwork": true, "subnetIDs": made.SubnetIDs,
		"firewalls": made.Firewalls, "privateServiceRange": made.PrivateServiceRange, "allocatedIpRange": nw.rangeName}, nil
}

// checkPrivateServicesAccess refuses a network that is not there or has no private services
// access connection: Cloud SQL and Memorystore would refuse an instance on it.
func (d NetworkDriver) checkPrivateServicesAccess(ctx context.Context, id string) error {
	ref, _ := parseNetwork(id)
	s, err := d.C.computeService(ctx)
	if err != nil {
		return err
	}
	if _, err := s.Networks.Get(ref.Project, ref.Name).Context(ctx).Do(); err != nil {
		if notFound(err) {
			return fault.UserAction(fmt.Errorf("network %s: %w", id, err), "NetworkNotFound",
				"The network vpcID names is not there; give the vpcID of an existing network.", d.C.ConsoleURL("networking/networks/list"))
		}
		return d.C.Classify(err)
	}
	svc, err := d.C.serviceNetworking(ctx)
	if err != nil {
		return err
	}
	consumer, err := d.consumerNetwork(ctx, ref)
	if err != nil {
		return err
	}
	// Only read: the connection is not the job's to make.
	st, err := d.connection(svc, nil, consumer).Get(ctx)
	if err != nil {
		return d.C.Classify(err)
	}
	if !st.Found {
		return fault.UserAction(fmt.Errorf("network %s has no private services access connection", id), "NetworkWithoutPrivateServicesAccess",
			"Cloud SQL and Memorystore take their private addresses from a network's private services access. Make a network job (it sets up private services access) and give its vpcID, or leave vpcID out for a network of the datastore's own.",
			d.C.ConsoleURL("networking/peering/list"))
	}
	return nil
}

// Delete implements dspipe.Network: the job's own network as the network family deletes it
// (the private services access connection, awaited, then the range, firewall rules and
// subnet, then the network), once the pipeline has deleted the instance that used it. A
// network the job names is not the job's.
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
	// The instance, the connection's only producer, was deleted by the step before.
	return NetworkDriver{C: pl.C}.deleteNetwork(ctx, pl.J, teardown{psa: true, ownProducers: true})
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
