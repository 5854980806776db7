package azure

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/privatedns/armprivatedns"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/provider"
	"github.com/groundworkhq/groundwork/internal/store"
)

// adminUser is the administrator login of a job's server (Azure refuses admin, root,
// azure_superuser and the like).
const adminUser = "gwadmin"

// Placement is where one job's datastore goes: the client of its space and the job.
type Placement struct {
	C *Client
	J *job.Job
}

// PlacementResolver finds the placement of a job by its id.
type PlacementResolver func(ctx context.Context, jobID string) (Placement, error)

// DatastoreDriver serves the datastore pipeline on Azure: PostgreSQL and MySQL flexible
// servers, each in a subnet of the job's own virtual network delegated to the service, with
// no public access, resolved through a private DNS zone linked to that network; and Redis on
// Azure Cache for Redis (redis.go), whose own access key replaces the pipeline's password.
type DatastoreDriver struct{ Resolve PlacementResolver }

// DatastoreNetwork serves the datastore pipeline's Network on Azure.
type DatastoreNetwork struct{ DatastoreDriver }

var (
	_ dspipe.Servers = DatastoreDriver{}
	_ dspipe.Network = DatastoreNetwork{}
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

// engine is what differs between the flexible server services.
type engine struct {
	service    string // the resource type, which the delegated subnet names
	domain     string // the service's DNS domain; a private zone must end with it
	role       string
	port       int
	minBackups int32
}

var engines = map[ds.Engine]engine{
	ds.EnginePostgres: {service: "Microsoft.DBforPostgreSQL/flexibleServers", domain: "postgres.database.azure.com", role: "pg", port: 5432, minBackups: 7},
	ds.EngineMySQL:    {service: "Microsoft.DBforMySQL/flexibleServers", domain: "mysql.database.azure.com", role: "mysql", port: 3306, minBackups: 1},
}

func engineOf(e ds.Engine) (engine, error) {
	if es, ok := engines[e]; ok {
		return es, nil
	}
	return engine{}, fault.UserAction(fmt.Errorf("engine %q is not served on Azure", e), "EngineUnsupported", "Pick postgres, mysql or redis.", "")
}

// serverName is the job's server: a DNS label under the service's domain, unique across Azure.
func serverName(j *job.Job, es engine) string { return name(j, es.role) }

// privateZone is the private DNS zone the job's server registers its address in.
func privateZone(j *job.Job, es engine) string { return jobKey(j) + ".private." + es.domain }

// sizing is what a request's settings come to on Azure.
type sizing struct {
	version   string
	sku, tier string
	storageGB int32
	ha        bool
	backups   int32
}

// pgVersions are the PostgreSQL major versions Azure Database for PostgreSQL flexible server
// offers; Azure keeps the minor version current.
var pgVersions = []string{"12", "13", "14", "15", "16"}

// mysqlVersions are the MySQL versions a request may name, each with the server version
// Azure Database for MySQL flexible server is asked for.
var mysqlVersions = []struct{ named, server string }{{"8.0", "8.0.21"}, {"5.7", "5.7"}}

// pgStorage are the disk sizes (GiB) a PostgreSQL flexible server takes.
var pgStorage = []int32{32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32767}

func (d DatastoreDriver) size(e ds.Engine, version string, settings map[string]any) (sizing, error) {
	es, err := engineOf(e)
	if err != nil {
		return sizing{}, err
	}
	s := sizing{backups: 7, storageGB: 32}
	switch e {
	case ds.EnginePostgres:
		major, _, _ := strings.Cut(version, ".")
		if major == "" {
			major = pgVersions[len(pgVersions)-1] // the newest
		}
		if !slices.Contains(pgVersions, major) {
			return s, fault.UserAction(fmt.Errorf("postgres %s is not offered by Azure Database for PostgreSQL flexible server", version), "UnsupportedVersion",
				"Pick postgres 12, 13, 14, 15 or 16 (Azure keeps the minor version current).", "")
		}
		s.version = major
	case ds.EngineMySQL:
		if version == "" || version == "8" {
			version = mysqlVersions[0].named
		}
		for _, v := range mysqlVersions {
			if version == v.named || strings.HasPrefix(version, v.named+".") {
				s.version = v.server
			}
		}
		if s.version == "" {
			return s, fault.UserAction(fmt.Errorf("mysql %s is not offered by Azure Database for MySQL flexible server", version), "UnsupportedVersion",
				"Pick mysql 8.0 or 5.7.", "")
		}
		s.storageGB = 20
	}
	if v, ok := settings["multiAZ"].(bool); ok {
		s.ha = v
	}
	s.sku = "Standard_B1ms"
	if s.ha {
		s.sku = "Standard_D2ds_v4"
	}
	if v, ok := settings["instanceClass"].(string); ok && v != "" {
		s.sku = v
	}
	switch {
	case strings.HasPrefix(s.sku, "Standard_B"):
		s.tier = "Burstable"
	case strings.HasPrefix(s.sku, "Standard_D"):
		s.tier = "GeneralPurpose"
	case strings.HasPrefix(s.sku, "Standard_E"):
		s.tier = "MemoryOptimized"
	default:
		return s, fault.UserAction(fmt.Errorf("instanceClass %q is not an Azure compute size", s.sku), "InvalidInstanceClass",
			"Give instanceClass as an Azure flexible server size such as Standard_B1ms, Standard_D2ds_v5 or Standard_E2ds_v5.", "")
	}
	if s.ha && s.tier == "Burstable" {
		return s, fault.UserAction(fmt.Errorf("multiAZ on %s: Azure offers zone-redundant high availability on General Purpose and Memory Optimized sizes only", s.sku), "HANotOnBurstable",
			"Give instanceClass a Standard_D or Standard_E size with multiAZ, or drop multiAZ.", "")
	}
	if v, ok := asInt(settings["allocatedStorageGB"]); ok {
		s.storageGB = int32(v)
		if e == ds.EnginePostgres {
			i := slices.IndexFunc(pgStorage, func(n int32) bool { return n >= s.storageGB })
			if i < 0 {
				return s, fault.UserAction(fmt.Errorf("allocatedStorageGB %d is over Azure's %d", v, pgStorage[len(pgStorage)-1]), "InvalidStorage",
					"Give allocatedStorageGB at most 32767.", "")
			}
			s.storageGB = pgStorage[i] // PostgreSQL takes fixed sizes: the next one up
		} else if s.storageGB < 20 {
			s.storageGB = 20
		}
	}
	if v, ok := asInt(settings["backupRetentionDays"]); ok {
		s.backups = int32(v)
	}
	if s.backups < es.minBackups || s.backups > 35 {
		return s, fault.UserAction(fmt.Errorf("backupRetentionDays %d: Azure keeps backups %d to 35 days", s.backups, es.minBackups), "InvalidBackupRetention",
			fmt.Sprintf("Give backupRetentionDays between %d and 35.", es.minBackups), "")
	}
	return s, nil
}

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

// Check implements dspipe.Servers: every sizing setting applies to a flexible server; a
// cache has no storage or backup settings.
func (d DatastoreDriver) Check(_ context.Context, p dspipe.CheckParams) (dspipe.CheckResult, error) {
	if p.Engine == ds.EngineRedis {
		s, err := redisSizingOf(p.Version, p.Settings)
		if err != nil {
			return dspipe.CheckResult{}, err
		}
		return dspipe.CheckResult{Version: s.version, NotApplicable: s.ignored}, nil
	}
	s, err := d.size(p.Engine, p.Version, p.Settings)
	if err != nil {
		return dspipe.CheckResult{}, err
	}
	return dspipe.CheckResult{Version: s.version}, nil
}

// azurePassword is Azure's rule for a server's administrator password: 8 to 128 characters
// from at least three of upper-case letters, lower-case letters, digits and other characters.
func azurePassword(pw string) bool {
	var upper, lower, digit, other bool
	for _, r := range pw {
		switch {
		case unicode.IsUpper(r):
			upper = true
		case unicode.IsLower(r):
			lower = true
		case unicode.IsDigit(r):
			digit = true
		default:
			other = true
		}
	}
	n := 0
	for _, b := range []bool{upper, lower, digit, other} {
		if b {
			n++
		}
	}
	return len(pw) >= 8 && len(pw) <= 128 && n >= 3
}

// Create implements dspipe.Servers: it starts the job's server if it is not there and returns
// it as soon as Azure gives its address; Status says when it is ready.
func (d DatastoreDriver) Create(ctx context.Context, p dspipe.CreateParams) (dspipe.ServerInfo, error) {
	if p.Engine == ds.EngineRedis {
		return d.createRedis(ctx, p)
	}
	pl, err := d.Resolve(ctx, p.JobID)
	if err != nil {
		return dspipe.ServerInfo{}, err
	}
	s, err := d.size(p.Engine, p.Version, p.Settings)
	if err != nil {
		return dspipe.ServerInfo{}, err
	}
	es := engines[p.Engine]
	if !azurePassword(p.AdminPassword) {
		// The password comes from the pipeline, not the user: a password Azure refuses is
		// ours to fix.
		return dspipe.ServerInfo{}, fault.System(errors.New("the administrator password does not meet Azure's rule (three of upper-case, lower-case, digits, other characters)"))
	}
	c, j := pl.C, pl.J
	if err := c.EnsureGroup(ctx, j.SpaceID); err != nil {
		return dspipe.ServerInfo{}, err
	}
	fs, err := flexOf(c, p.Engine)
	if err != nil {
		return dspipe.ServerInfo{}, err
	}
	srv := serverName(j, es)
	// The network step made these; their ids follow from the job.
	spec := serverSpec{location: c.Location, tags: tags(j, es.role), sizing: s, password: p.AdminPassword,
		subnetID: c.sub("Microsoft.Network", "virtualNetworks", name(j, "vnet")) + "/subnets/" + SubnetDelegated,
		zoneID:   c.sub("Microsoft.Network", "privateDnsZones", privateZone(j, es))}
	var v serverView
	err = c.await(ctx, "server "+srv, func() (bool, error) {
		var err error
		if v, err = readServer(ctx, c, j, fs, srv); err != nil {
			return false, err
		}
		if !v.found {
			err := fs.begin(ctx, c.ResourceGroup, srv, spec)
			if notFound(err) {
				// The group is there (EnsureGroup): what is missing is the network step's
				// subnet or zone, deleted outside Groundwork. Retrying does not make them.
				return false, fault.UserAction(fmt.Errorf("create %s: %w", srv, err), "NetworkNotFound",
					"The job's delegated subnet or private DNS zone is gone (deleted outside Groundwork?); retry the job from its network step to make them again.",
					c.PortalURL(spec.subnetID))
			}
			if err != nil {
				return false, c.Classify(fmt.Errorf("create %s: %w", srv, err))
			}
			return false, nil
		}
		return v.fqdn != "", nil
	})
	if err != nil {
		return dspipe.ServerInfo{}, err
	}
	return dspipe.ServerInfo{ID: v.id, Host: v.fqdn, Port: es.port, AdminUser: adminUser, Version: s.version}, nil
}

// Status implements dspipe.Servers: ready when Azure says the server is Ready (a cache:
// when its provisioningState is Succeeded, with its primary key).
func (d DatastoreDriver) Status(ctx context.Context, p dspipe.StatusParams) (dspipe.ServerStatus, error) {
	if p.Engine == ds.EngineRedis {
		return d.redisStatus(ctx, p)
	}
	pl, err := d.Resolve(ctx, p.JobID)
	if err != nil {
		return dspipe.ServerStatus{}, err
	}
	es, err := engineOf(p.Engine)
	if err != nil {
		return dspipe.ServerStatus{}, err
	}
	fs, err := flexOf(pl.C, p.Engine)
	if err != nil {
		return dspipe.ServerStatus{}, err
	}
	srv := serverName(pl.J, es)
	v, err := readServer(ctx, pl.C, pl.J, fs, srv)
	if err != nil {
		return dspipe.ServerStatus{}, err
	}
	if !v.found {
		// Reached only after Create saw the server: the read is behind, worth a retry.
		return dspipe.ServerStatus{}, fault.Transientf("server %s is not visible yet", srv)
	}
	return dspipe.ServerStatus{Ready: strings.EqualFold(v.state, "Ready"), Message: fmt.Sprintf("%s is %s", srv, orCode(v.state, "being made"))}, nil
}

// Delete implements dspipe.Servers: it starts the server's delete and reports gone once Azure
// no longer has it. A server of the job's name that is not the job's is not deleted.
func (d DatastoreDriver) Delete(ctx context.Context, p dspipe.DeleteParams) (bool, error) {
	if p.Engine == ds.EngineRedis {
		return d.deleteRedis(ctx, p)
	}
	pl, err := d.Resolve(ctx, p.JobID)
	if err != nil {
		return false, err
	}
	es, err := engineOf(p.Engine)
	if err != nil {
		return false, err
	}
	fs, err := flexOf(pl.C, p.Engine)
	if err != nil {
		return false, err
	}
	srv := serverName(pl.J, es)
	v, err := readServer(ctx, pl.C, pl.J, fs, srv)
	if err != nil && fault.As(err).Code != "NameTaken" {
		return false, err
	}
	if err != nil || !v.found {
		return true, nil
	}
	if strings.EqualFold(v.state, "Dropping") {
		return false, nil
	}
	if err := fs.beginDelete(ctx, pl.C.ResourceGroup, srv); err != nil {
		if notFound(err) {
			return true, nil
		}
		return false, pl.C.Classify(fmt.Errorf("delete %s: %w", srv, err))
	}
	return false, nil
}

// Ensure implements dspipe.Network: the job's own virtual network with a subnet delegated to
// the engine's service, and a private DNS zone linked to it. No NAT gateway: a database
// server makes no outbound connections.
//
// For a cache it makes nothing yet: the cache's private endpoint is not made (see redis.go).
func (n DatastoreNetwork) Ensure(ctx context.Context, p dspipe.NetworkParams) (map[string]any, error) {
	if p.Engine == ds.EngineRedis {
		return map[string]any{"provider": Name, "publicNetworkAccess": "Disabled", "privateEndpoint": false}, nil
	}
	pl, err := n.Resolve(ctx, p.JobID)
	if err != nil {
		return nil, err
	}
	es, err := engineOf(p.Engine)
	if err != nil {
		return nil, err
	}
	c, j := pl.C, pl.J
	f, err := armprivatedns.NewClientFactory(c.SubscriptionID, c.cred, c.opts)
	if err != nil {
		return nil, fault.System(err)
	}
	zones, links := f.NewPrivateZonesClient(), f.NewVirtualNetworkLinksClient()
	rg, zone, link := c.ResourceGroup, privateZone(j, es), name(j, "dns-link")
	ops := Ops{}
	var nw Network
	err = c.await(ctx, "the datastore network", func() (bool, error) {
		v, _, ready, err := c.EnsureVNet(ctx, j, dspipe.InfraNetwork, VNetRequest{Delegation: es.service})
		if err != nil || !ready {
			return false, err
		}
		nw = v
		ok, err := converge(ctx, c, ops, "create private zone", func(ctx context.Context) (State, error) {
			v, err := zones.Get(ctx, rg, zone, nil)
			return stateOf(err, v.Tags, v.Properties, j)
		}, nil, func(ctx context.Context, tok string) (*runtime.Poller[armprivatedns.PrivateZonesClientCreateOrUpdateResponse], error) {
			return zones.BeginCreateOrUpdate(ctx, rg, zone, armprivatedns.PrivateZone{Location: to.Ptr("global"), Tags: tags(j, "dns")},
				&armprivatedns.PrivateZonesClientBeginCreateOrUpdateOptions{ResumeToken: tok})
		})
		if !ok || err != nil {
			return false, err
		}
		return converge(ctx, c, ops, "create zone link", func(ctx context.Context) (State, error) {
			v, err := links.Get(ctx, rg, zone, link, nil)
			return stateOf(err, v.Tags, v.Properties, j)
		}, nil, func(ctx context.Context, tok string) (*runtime.Poller[armprivatedns.VirtualNetworkLinksClientCreateOrUpdateResponse], error) {
			return links.BeginCreateOrUpdate(ctx, rg, zone, link, armprivatedns.VirtualNetworkLink{Location: to.Ptr("global"), Tags: tags(j, "dns-link"),
				Properties: &armprivatedns.VirtualNetworkLinkProperties{VirtualNetwork: &armprivatedns.SubResource{ID: to.Ptr(v.VNetID)},
					RegistrationEnabled: to.Ptr(false)}},
				&armprivatedns.VirtualNetworkLinksClientBeginCreateOrUpdateOptions{ResumeToken: tok})
		})
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{"provider": Name, "vnetID": nw.VNetID, "subnetID": nw.Subnets[SubnetDelegated],
		"privateDnsZoneID": c.sub("Microsoft.Network", "privateDnsZones", zone)}, nil
}

// Delete implements dspipe.Network: the zone's link, the zone, then the network, one call at
// a time; gone once all are.
func (n DatastoreNetwork) Delete(ctx context.Context, p dspipe.NetworkParams) (bool, error) {
	pl, err := n.Resolve(ctx, p.JobID)
	if err != nil {
		return false, err
	}
	es, ok := engines[p.Engine]
	if !ok {
		return true, nil // no network is made for an engine not served here
	}
	c, j := pl.C, pl.J
	f, err := armprivatedns.NewClientFactory(c.SubscriptionID, c.cred, c.opts)
	if err != nil {
		return false, fault.System(err)
	}
	zones, links := f.NewPrivateZonesClient(), f.NewVirtualNetworkLinksClient()
	rg, zone, link := c.ResourceGroup, privateZone(j, es), name(j, "dns-link")
	ops := Ops{}
	gone, err := remove(ctx, c, ops, "link", func(ctx context.Context) (State, error) {
		v, err := links.Get(ctx, rg, zone, link, nil)
		return stateOf(err, v.Tags, v.Properties, j)
	}, func(ctx context.Context, tok string) (*runtime.Poller[armprivatedns.VirtualNetworkLinksClientDeleteResponse], error) {
		return links.BeginDelete(ctx, rg, zone, link, &armprivatedns.VirtualNetworkLinksClientBeginDeleteOptions{ResumeToken: tok})
	})
	if err != nil || !gone {
		return false, err
	}
	gone, err = remove(ctx, c, ops, "zone", func(ctx context.Context) (State, error) {
		v, err := zones.Get(ctx, rg, zone, nil)
		return stateOf(err, v.Tags, v.Properties, j)
	}, func(ctx context.Context, tok string) (*runtime.Poller[armprivatedns.PrivateZonesClientDeleteResponse], error) {
		return zones.BeginDelete(ctx, rg, zone, &armprivatedns.PrivateZonesClientBeginDeleteOptions{ResumeToken: tok})
	})
	if err != nil || !gone {
		return false, err
	}
	return c.DeleteVNet(ctx, j)
}

// sub is the id of a resource in the client's resource group.
func (c *Client) sub(namespace, typ, name string) string {
	return "/subscriptions/" + c.SubscriptionID + "/resourceGroups/" + c.ResourceGroup + "/providers/" + namespace + "/" + typ + "/" + name
}

// serverView is what the driver reads of a flexible server, either service's.
type serverView struct {
	found           bool
	id, fqdn, state string
	// The settings a config update changes.
	sku       string
	storageGB int32
	backups   int32
	ha        bool
}

// readServer reads the job's server; one of its name that is not the job's is refused.
func readServer(ctx context.Context, c *Client, j *job.Job, fs flexServers, srv string) (serverView, error) {
	v, t, err := fs.get(ctx, c.ResourceGroup, srv)
	st, err := stateOf(err, t, nil, j)
	if err != nil {
		return serverView{}, c.Classify(err)
	}
	v.found = st.Found
	return v, nil
}
