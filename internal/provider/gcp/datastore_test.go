package gcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	sqladmin "google.golang.org/api/sqladmin/v1"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
	"github.com/groundworkhq/groundwork/internal/provider/drivertest"
	"github.com/groundworkhq/groundwork/internal/provider/gcp/gcpfake"
)

// datastoreOn is the datastore driver on c, for jobs with config cfg (nil: none).
func datastoreOn(c *Client) dspipe.Driver { return datastoreWith(c, nil) }

func datastoreWith(c *Client, cfg json.RawMessage) dspipe.Driver {
	return DatastoreDriver{Resolve: func(_ context.Context, jobID string) (Placement, error) {
		return Placement{C: c, J: &job.Job{ID: jobID, OrgID: "org_test", SpaceID: "spc_test", Provider: Name,
			Family: job.FamilyDatastore, Config: cfg}}, nil
	}}.Driver()
}

// observeDatastore is observe, with a Cloud SQL instance's job read from its
// settings.userLabels (where Cloud SQL keeps an instance's labels) and its users going with it.
func observeDatastore(cloud *gcpfake.Cloud) drivertest.Observer {
	return func(ctx context.Context) ([]drivertest.Resource, error) {
		all, err := observe(cloud)(ctx)
		for i, r := range all {
			if r.JobID != "" || !strings.HasPrefix(r.ID, "projects/") || !strings.Contains(r.ID, "/instances/") {
				continue
			}
			parts := strings.SplitN(r.ID, "/", 5)
			if in, ok := cloud.Lookup(gcpfake.HostSQLAdmin, strings.Join(parts[:4], "/")); ok {
				settings, _ := in.Body["settings"].(map[string]any)
				labels, _ := settings["userLabels"].(map[string]any)
				all[i].JobID, _ = labels[LabelJob].(string)
			}
		}
		return all, err
	}
}

// until calls f until it reports done (drivertest.Until).
func until(t *testing.T, ctx context.Context, what string, f func() (bool, error)) {
	t.Helper()
	drivertest.Until(ctx, t, what, f)
}

// ensureDatastore runs the network and the server until the server is ready.
func ensureDatastore(t *testing.T, ctx context.Context, d dspipe.Driver, p dspipe.CreateParams) (dspipe.ServerInfo, dspipe.ServerStatus) {
	t.Helper()
	var info dspipe.ServerInfo
	var st dspipe.ServerStatus
	until(t, ctx, "ensure", func() (bool, error) {
		if _, err := d.Network.Ensure(ctx, dspipe.NetworkParams{JobID: p.JobID, Engine: p.Engine}); err != nil {
			return false, err
		}
		var err error
		if info, err = d.Servers.Create(ctx, p); err != nil {
			return false, err
		}
		st, err = d.Servers.Status(ctx, dspipe.StatusParams{JobID: p.JobID, Engine: p.Engine, AdminPassword: p.AdminPassword})
		return st.Ready, err
	})
	return info, st
}

func deleteDatastore(t *testing.T, ctx context.Context, d dspipe.Driver, jobID string, e ds.Engine) {
	t.Helper()
	until(t, ctx, "delete", func() (bool, error) {
		if gone, err := d.Servers.Delete(ctx, dspipe.DeleteParams{JobID: jobID, Engine: e}); err != nil || !gone {
			return false, err
		}
		return d.Network.Delete(ctx, dspipe.NetworkParams{JobID: jobID, Engine: e})
	})
}

// connectedRange checks that network (a network's id) has a private services access
// connection and that it reserves rng, the range an instance on it was given.
func connectedRange(t *testing.T, cloud *gcpfake.Cloud, network string, rng any) {
	t.Helper()
	ranges, ok := cloud.PSARanges(network)
	if !ok {
		t.Fatalf("network %s has no private services access connection", network)
	}
	if !slices.Contains(ranges, fmt.Sprint(rng)) {
		t.Errorf("the instance's range %v is not one the connection reserves (%v)", rng, ranges)
	}
}

// A Cloud SQL instance is made as asked: private IP only in the job's own network and range,
// the machine type, high availability, disk, backups with point-in-time recovery, no
// deletion protection, the job's labels, and the pipeline's password as the admin user's; it
// is not ready until Cloud SQL says RUNNABLE, and goes with its delete.
func TestCloudSQLLifecycle(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		engine            ds.Engine
		version, dbv, got string
		port              int
		admin, logSetting string
	}{
		{ds.EnginePostgres, "15.4", "POSTGRES_15", "15", 5432, "postgres", "pointInTimeRecoveryEnabled"},
		{ds.EngineMySQL, "", "MYSQL_8_0", "8.0", 3306, "root", "binaryLogEnabled"},
	} {
		t.Run(string(tc.engine), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c, cloud := testClient(t)
			d := datastoreOn(c)
			jobID := "job_sql" + string(tc.engine)
			pw := ds.GeneratePassword()
			settings := map[string]any{"instanceClass": "db-custom-4-15360", "multiAZ": true, "allocatedStorageGB": float64(50), "backupRetentionDays": 14}
			p := dspipe.CreateParams{JobID: jobID, Engine: tc.engine, Version: tc.version, AdminPassword: pw, Settings: settings}

			if _, err := d.Network.Ensure(ctx, dspipe.NetworkParams{JobID: jobID, Engine: tc.engine}); err != nil {
				t.Fatal(err)
			}
			cloud.SetTicks(200) // the create outlasts the first call
			short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
			_, err := d.Servers.Create(short, p)
			stop()
			if fault.ClassOf(err) != job.ClassTransient {
				t.Fatalf("create while Cloud SQL works = %v; want transient", err)
			}
			if st, err := d.Servers.Status(ctx, dspipe.StatusParams{JobID: jobID, Engine: tc.engine}); err != nil || st.Ready || !strings.Contains(st.Message, "PENDING_CREATE") {
				t.Fatalf("status while creating = %+v, %v; want not ready, PENDING_CREATE", st, err)
			}
			info, _ := ensureDatastore(t, ctx, d, p)

			inst := name(&job.Job{ID: jobID}, sqlEngines[tc.engine].role)
			if info.ID != "projects/"+gcpfake.Project+"/instances/"+inst || info.Port != tc.port || info.AdminUser != tc.admin ||
				!strings.HasPrefix(info.Host, "10.") || info.Version != tc.got {
				t.Errorf("server info %+v", info)
			}
			if got, ok := cloud.SQLPassword(inst, tc.admin); !ok || got != pw {
				t.Errorf("the %s user's password is not the pipeline's (found %v)", tc.admin, ok)
			}
			res, ok := cloud.Lookup(gcpfake.HostSQLAdmin, "projects/"+gcpfake.Project+"/instances/"+inst)
			if !ok {
				t.Fatal("no instance")
			}
			b := res.Body
			s := b["settings"].(map[string]any)
			ipc := s["ipConfiguration"].(map[string]any)
			bc := s["backupConfiguration"].(map[string]any)
			wantNet := "projects/" + gcpfake.Project + "/global/networks/" + name(&job.Job{ID: jobID}, roleNetwork)
			for what, pair := range map[string][2]any{
				"databaseVersion":             {b["databaseVersion"], tc.dbv},
				"region":                      {b["region"], "europe-west1"},
				"rootPassword stored":         {b["rootPassword"], nil},
				"tier":                        {s["tier"], "db-custom-4-15360"},
				"edition":                     {s["edition"], "ENTERPRISE"},
				"availabilityType":            {s["availabilityType"], "REGIONAL"},
				"dataDiskSizeGb":              {s["dataDiskSizeGb"], "50"},
				"deletionProtectionEnabled":   {s["deletionProtectionEnabled"], false},
				"ipv4Enabled":                 {ipc["ipv4Enabled"], false},
				"privateNetwork":              {ipc["privateNetwork"], wantNet},
				"allocatedIpRange":            {ipc["allocatedIpRange"], name(&job.Job{ID: jobID}, rolePSARange)},
				"backups":                     {bc["enabled"], true},
				tc.logSetting:                 {bc[tc.logSetting], true},
				"retainedBackups":             {bc["backupRetentionSettings"].(map[string]any)["retainedBackups"], float64(14)},
				"transactionLogRetentionDays": {bc["transactionLogRetentionDays"], float64(7)},
			} {
				if fmt.Sprint(pair[0]) != fmt.Sprint(pair[1]) {
					t.Errorf("%s = %v, want %v", what, pair[0], pair[1])
				}
			}
			connectedRange(t, cloud, wantNet, ipc["allocatedIpRange"])
			if !owns(&job.Job{ID: jobID, OrgID: "org_test"}, stringMap(s["userLabels"])) {
				t.Errorf("userLabels %v", s["userLabels"])
			}

			// Ensuring again changes nothing.
			before := len(cloud.Calls())
			if again, _ := ensureDatastore(t, ctx, d, p); again != info {
				t.Errorf("ensure again = %+v, want %+v", again, info)
			}
			for _, call := range cloud.Calls()[before:] {
				if call.Method != http.MethodGet {
					t.Errorf("ensure again made %s %s", call.Method, call.Path)
				}
			}

			deleteDatastore(t, ctx, d, jobID, tc.engine)
			if _, ok := cloud.PSARanges(wantNet); ok {
				t.Error("the private services access connection outlives the job")
			}
			if left, _ := observeDatastore(cloud)(ctx); len(left) != 0 {
				t.Errorf("left after delete: %v", left)
			}
		})
	}
}

func stringMap(v any) map[string]string {
	out := map[string]string{}
	m, _ := v.(map[string]any)
	for k, x := range m {
		out[k] = fmt.Sprint(x)
	}
	return out
}

// lostAnswer passes requests on and loses the answer of the first one of method whose path
// holds path: Google did the work, the caller saw a broken connection (a crash before the
// checkpoint, as far as the step knows).
type lostAnswer struct {
	base         http.RoundTripper
	method, path string
	lost         *bool
}

func (l lostAnswer) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.base.RoundTrip(r)
	if err == nil && !*l.lost && r.Method == l.method && strings.HasSuffix(r.URL.Path, l.path) {
		*l.lost = true
		resp.Body.Close()
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}
	}
	return resp, err
}

// A create whose answer is lost (the server crashed before recording it) is not made again
// by the next run, on a restarted server: Cloud SQL and Memorystore take no requestId, so
// the read before the insert is what keeps the instance single.
func TestCrashBetweenCreateAndCheckpointMakesOneInstance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		engine     ds.Engine
		host, path string
	}{
		{ds.EnginePostgres, gcpfake.HostSQLAdmin, "/instances"},
		{ds.EngineMySQL, gcpfake.HostSQLAdmin, "/instances"},
		{ds.EngineRedis, gcpfake.HostRedis, "/instances"},
	} {
		t.Run(string(tc.engine), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c, cloud := testClient(t)
			jobID := "job_crash" + string(tc.engine)
			p := dspipe.CreateParams{JobID: jobID, Engine: tc.engine, AdminPassword: ds.GeneratePassword()}
			if _, err := datastoreOn(c).Network.Ensure(ctx, dspipe.NetworkParams{JobID: jobID, Engine: tc.engine}); err != nil {
				t.Fatal(err)
			}
			lost := false
			crashing := &Client{Account: c.Account, tokens: c.tokens,
				http: &http.Client{Transport: lostAnswer{base: c.http.Transport, method: http.MethodPost, path: tc.path, lost: &lost}}}
			_, err := datastoreOn(crashing).Servers.Create(ctx, p)
			if !lost || fault.ClassOf(err) != job.ClassTransient {
				t.Fatalf("create with its answer lost = %v (lost %v); want transient", err, lost)
			}
			restarted := datastoreOn(clientOn(t, cloud))
			info, _ := ensureDatastore(t, ctx, restarted, p)
			if n := cloud.Mutations(tc.host, tc.path); n != 1 {
				t.Errorf("%d creates reached Google; want 1", n)
			}
			var instances []string
			for _, r := range cloud.Resources() {
				if r.Service == tc.host && (r.Kind == "sql#instance" || r.Kind == "redis.instance") {
					instances = append(instances, r.Name)
				}
			}
			if len(instances) != 1 || !strings.HasSuffix(info.ID, instances[0]) {
				t.Errorf("instances %v, server %s", instances, info.ID)
			}
			deleteDatastore(t, ctx, restarted, jobID, tc.engine)
		})
	}
}

// A Memorystore instance is made as asked (tier, memory, version, AUTH, TLS, private
// services access on the job's network and range, labels), is not ready until READY, and
// then reports its AUTH string as the admin password in place of the pipeline's.
func TestRedisLifecycle(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, cloud := testClient(t)
	d := datastoreOn(c)
	const jobID = "job_dsredis"
	given := ds.GeneratePassword()
	p := dspipe.CreateParams{JobID: jobID, Engine: ds.EngineRedis, Name: "sessions", Version: "7.0", AdminPassword: given,
		Settings: map[string]any{"multiAZ": true, "allocatedStorageGB": float64(5)}}
	if _, err := d.Network.Ensure(ctx, dspipe.NetworkParams{JobID: jobID, Engine: ds.EngineRedis}); err != nil {
		t.Fatal(err)
	}
	cloud.SetTicks(200)
	short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err := d.Servers.Create(short, p)
	stop()
	if fault.ClassOf(err) != job.ClassTransient {
		t.Fatalf("create while Memorystore works = %v; want transient", err)
	}
	if st, err := d.Servers.Status(ctx, dspipe.StatusParams{JobID: jobID, Engine: ds.EngineRedis}); err != nil || st.Ready || st.AdminPassword != "" {
		t.Fatalf("status while creating = %+v, %v; want not ready, no AUTH string", st, err)
	}
	info, st := ensureDatastore(t, ctx, d, p)
	j := &job.Job{ID: jobID, OrgID: "org_test"}
	full := "projects/" + gcpfake.Project + "/locations/europe-west1/instances/" + name(j, roleRedis)
	if info.ID != full || info.Port != 6378 || info.AdminUser != "default" || info.Version != "7.0" || !strings.HasPrefix(info.Host, "10.") {
		t.Errorf("server info %+v", info)
	}
	auth, ok := cloud.RedisAuthString(full)
	if !ok || st.AdminPassword != auth || st.AdminPassword == given {
		t.Fatalf("the admin password from status is not the instance's AUTH string")
	}
	res, _ := cloud.Lookup(gcpfake.HostRedis, full)
	b := res.Body
	for what, pair := range map[string][2]any{
		"tier": {b["tier"], "STANDARD_HA"}, "memorySizeGb": {b["memorySizeGb"], 5}, "redisVersion": {b["redisVersion"], "REDIS_7_0"},
		"authEnabled": {b["authEnabled"], true}, "transitEncryptionMode": {b["transitEncryptionMode"], "SERVER_AUTHENTICATION"},
		"connectMode":       {b["connectMode"], "PRIVATE_SERVICE_ACCESS"},
		"authorizedNetwork": {b["authorizedNetwork"], "projects/" + gcpfake.Project + "/global/networks/" + name(j, roleNetwork)},
		"reservedIpRange":   {b["reservedIpRange"], name(j, rolePSARange)}, "displayName": {b["displayName"], "sessions"},
	} {
		if fmt.Sprint(pair[0]) != fmt.Sprint(pair[1]) {
			t.Errorf("%s = %v, want %v", what, pair[0], pair[1])
		}
	}
	connectedRange(t, cloud, fmt.Sprint(b["authorizedNetwork"]), b["reservedIpRange"])
	if !owns(j, res.Labels()) {
		t.Errorf("labels %v", res.Labels())
	}
	if st2, err := d.Servers.Status(ctx, dspipe.StatusParams{JobID: jobID, Engine: ds.EngineRedis}); err != nil || st2.AdminPassword != auth {
		t.Errorf("status again = %+v, %v; want the same AUTH string", st2.Ready, err)
	}
	deleteDatastore(t, ctx, d, jobID, ds.EngineRedis)
	if _, ok := cloud.RedisAuthString(full); ok {
		t.Error("the instance outlives its delete")
	}
	if left, _ := observeDatastore(cloud)(ctx); len(left) != 0 {
		t.Errorf("left after delete: %v", left)
	}
}

// A job whose config names a network (a network job's vpcID) gets nothing made for it: the
// instance goes in that network, through the private services access the network job set
// up, and the network stays when the job goes. A network without private services access,
// or none at all, is the user's to fix.
func TestDatastoreInANamedNetwork(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, cloud := testClient(t)
	nj := &job.Job{ID: "job_netfords", OrgID: "org_test", SpaceID: "spc_test", Provider: Name, Family: job.FamilyNetwork}
	var made network.Result
	until(t, ctx, "the network job's network", func() (bool, error) {
		var err error
		made, err = NetworkDriver{C: c}.EnsureNetwork(ctx, nj, network.Config{})
		return made.Ready, err
	})
	netID := made.VPCID
	d := datastoreWith(c, json.RawMessage(`{"engine":"postgres","vpcID":"`+netID+`"}`))
	const jobID = "job_dsnamed"
	computeBefore := cloud.Mutations(gcpfake.HostCompute, "/")
	snBefore := cloud.Mutations(gcpfake.HostServiceNetworking, "/")
	net, err := d.Network.Ensure(ctx, dspipe.NetworkParams{JobID: jobID, Engine: ds.EnginePostgres})
	if err != nil || net["network"] != netID || net["ownNetwork"] != false {
		t.Fatalf("ensure = %v, %v", net, err)
	}
	info, _ := ensureDatastore(t, ctx, d, dspipe.CreateParams{JobID: jobID, Engine: ds.EnginePostgres, AdminPassword: ds.GeneratePassword()})
	res, _ := cloud.Lookup(gcpfake.HostSQLAdmin, info.ID)
	ipc := res.Body["settings"].(map[string]any)["ipConfiguration"].(map[string]any)
	if ipc["privateNetwork"] != netID || ipc["allocatedIpRange"] != nil {
		t.Errorf("ipConfiguration %v; want the named network and no range of the job's", ipc)
	}
	deleteDatastore(t, ctx, d, jobID, ds.EnginePostgres)
	if n := cloud.Mutations(gcpfake.HostCompute, "/") - computeBefore; n != 0 {
		t.Errorf("%d compute mutations for a job that names its network", n)
	}
	if n := cloud.Mutations(gcpfake.HostServiceNetworking, "/") - snBefore; n != 0 {
		t.Errorf("%d Service Networking mutations for a job that names its network", n)
	}
	if _, ok := cloud.Lookup(gcpfake.HostCompute, netID); !ok {
		t.Error("the named network went with the job")
	}
	if _, ok := cloud.PSARanges(netID); !ok {
		t.Error("the named network's private services access went with the job")
	}

	bare := "projects/" + gcpfake.Project + "/global/networks/bare"
	cloud.Put(gcpfake.Resource{Service: gcpfake.HostCompute, Kind: "compute#network", Name: bare,
		Body: map[string]any{"name": "bare", "selfLink": gcpfake.SelfLinkBase + bare}})
	for vpc, code := range map[string]string{bare: "NetworkWithoutPrivateServicesAccess", "projects/" + gcpfake.Project + "/global/networks/nope": "NetworkNotFound"} {
		named := datastoreWith(c, json.RawMessage(`{"vpcID":"`+vpc+`"}`))
		_, err = named.Network.Ensure(ctx, dspipe.NetworkParams{JobID: jobID, Engine: ds.EnginePostgres})
		if fe := fault.As(err); err == nil || fe.Class != job.ClassUserAction || fe.Code != code {
			t.Errorf("vpcID %s = %v; want user_action %s", vpc, err, code)
		}
	}
}

// An instance of the job's name without the job's labels is neither adopted nor deleted.
func TestDatastoreNameTaken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, e := range []ds.Engine{ds.EnginePostgres, ds.EngineRedis} {
		c, cloud := testClient(t)
		d := datastoreOn(c)
		jobID := "job_dstaken" + string(e)
		j := &job.Job{ID: jobID}
		full := "projects/" + gcpfake.Project + "/instances/" + name(j, "pg")
		host := gcpfake.HostSQLAdmin
		body := map[string]any{"name": name(j, "pg"), "state": "RUNNABLE", "settings": map[string]any{"userLabels": map[string]any{"team": "other"}}}
		if e == ds.EngineRedis {
			full, host = "projects/"+gcpfake.Project+"/locations/europe-west1/instances/"+name(j, roleRedis), gcpfake.HostRedis
			body = map[string]any{"name": full, "state": "READY", "labels": map[string]any{"team": "other"}}
		}
		cloud.Put(gcpfake.Resource{Service: host, Kind: "stranger", Name: full, Body: body})
		if _, err := d.Network.Ensure(ctx, dspipe.NetworkParams{JobID: jobID, Engine: e}); err != nil {
			t.Fatal(err)
		}
		_, err := d.Servers.Create(ctx, dspipe.CreateParams{JobID: jobID, Engine: e, AdminPassword: ds.GeneratePassword()})
		if fe := fault.As(err); err == nil || fe.Code != "NameTaken" || fe.Class != job.ClassUserAction {
			t.Errorf("%s: create over a stranger's instance = %v; want user_action NameTaken", e, err)
		}
		if gone, err := d.Servers.Delete(ctx, dspipe.DeleteParams{JobID: jobID, Engine: e}); !gone || err != nil {
			t.Errorf("%s: delete = %v, %v; want gone (nothing of the job's)", e, gone, err)
		}
		if _, ok := cloud.Lookup(host, full); !ok {
			t.Errorf("%s: the stranger's instance was deleted", e)
		}
	}
}

// A permission the account lacks is the user's to grant: user_action, with the IAM page.
func TestDatastorePermissionDenied(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		engine     ds.Engine
		host, perm string
	}{
		{ds.EnginePostgres, gcpfake.HostSQLAdmin, "cloudsql.instances.get"},
		{ds.EngineRedis, gcpfake.HostRedis, "redis.instances.get"},
	} {
		c, cloud := testClient(t)
		d := datastoreOn(c)
		jobID := "job_dsdenied"
		if _, err := d.Network.Ensure(context.Background(), dspipe.NetworkParams{JobID: jobID, Engine: tc.engine}); err != nil {
			t.Fatal(err)
		}
		cloud.Deny(tc.host, "/instances", tc.perm)
		_, err := d.Servers.Create(context.Background(), dspipe.CreateParams{JobID: jobID, Engine: tc.engine, AdminPassword: ds.GeneratePassword()})
		fe := fault.As(err)
		if err == nil || fe.Class != job.ClassUserAction || fe.Code != "PermissionDenied" ||
			!strings.HasPrefix(fe.ConsoleURL, "https://console.cloud.google.com/iam-admin/iam?project=") || !strings.Contains(err.Error(), tc.perm) {
			t.Errorf("%s: denied create = %v (console %q); want user_action PermissionDenied with the IAM page", tc.engine, err, fe.ConsoleURL)
		}
		if n := cloud.Mutations(tc.host, "/instances"); n != 0 {
			t.Errorf("%s: %d mutations were answered", tc.engine, n)
		}
	}
}

func TestDatastoreRefusals(t *testing.T) {
	t.Parallel()
	check := func(e ds.Engine, version string, settings map[string]any) func(d dspipe.Driver) error {
		return func(d dspipe.Driver) error {
			_, err := d.Servers.Check(context.Background(), dspipe.CheckParams{Engine: e, Version: version, Settings: settings})
			return err
		}
	}
	for name, tc := range map[string]struct {
		call func(d dspipe.Driver) error
		code string
	}{
		"oracle":                {check("oracle", "", nil), "EngineUnsupported"},
		"postgres 9.6":          {check(ds.EnginePostgres, "9.6", nil), "UnsupportedVersion"},
		"mysql 5.6":             {check(ds.EngineMySQL, "5.6", nil), "UnsupportedVersion"},
		"redis 4.0":             {check(ds.EngineRedis, "4.0", nil), "UnsupportedVersion"},
		"an AWS instance class": {check(ds.EnginePostgres, "", map[string]any{"instanceClass": "db.t3.micro"}), "InvalidInstanceClass"},
		"HA on shared core":     {check(ds.EngineMySQL, "", map[string]any{"instanceClass": "db-g1-small", "multiAZ": true}), "HANotOnSharedCore"},
		"a 5 GB disk":           {check(ds.EnginePostgres, "", map[string]any{"allocatedStorageGB": 5}), "InvalidStorage"},
		"backups for 400 days":  {check(ds.EnginePostgres, "", map[string]any{"backupRetentionDays": 400}), "InvalidBackupRetention"},
		"a 500 GB cache":        {check(ds.EngineRedis, "", map[string]any{"allocatedStorageGB": 500}), "InvalidMemorySize"},
		"a vpcID that is no network": {func(d dspipe.Driver) error {
			_, err := d.Network.Ensure(context.Background(), dspipe.NetworkParams{JobID: "job_x", Engine: ds.EnginePostgres})
			return err
		}, "NetworkInvalid"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, cloud := testClient(t)
			d := datastoreWith(c, json.RawMessage(`{"vpcID":"vpc-0123"}`))
			err := tc.call(d)
			if fe := fault.As(err); err == nil || fe.Class != job.ClassUserAction || fe.Code != tc.code {
				t.Fatalf("err = %v, want user_action %s", err, tc.code)
			}
			if calls := cloud.Calls(); len(calls) != 0 {
				t.Errorf("the refusal reached Google: %v", calls)
			}
		})
	}
}

func TestDatastoreCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		engine   ds.Engine
		version  string
		settings map[string]any
		want     string
		na       string
	}{
		{ds.EnginePostgres, "", nil, "16", ""},
		{ds.EnginePostgres, "17.2", nil, "17", ""},
		{ds.EngineMySQL, "", nil, "8.0", ""},
		{ds.EngineMySQL, "8.0.36", nil, "8.0", ""},
		{ds.EngineMySQL, "8.4", nil, "8.4", ""},
		{ds.EngineMySQL, "5.7", nil, "5.7", ""},
		{ds.EngineRedis, "", nil, "7.2", ""},
		{ds.EngineRedis, "6.2", nil, "6", ""},
		{ds.EngineRedis, "7", map[string]any{"instanceClass": "x", "backupRetentionDays": 3}, "7.2", "backupRetentionDays,instanceClass"},
	} {
		res, err := DatastoreDriver{}.Check(context.Background(), dspipe.CheckParams{Engine: tc.engine, Version: tc.version, Settings: tc.settings})
		if err != nil || res.Version != tc.want || strings.Join(res.NotApplicable, ",") != tc.na {
			t.Errorf("Check(%s %q) = %+v, %v; want version %s, not applicable %q", tc.engine, tc.version, res, err, tc.want, tc.na)
		}
	}
	s, err := sqlSizingOf(ds.EnginePostgres, "", nil)
	if err != nil || s.dbVersion != "POSTGRES_16" || s.tier != defaultSQLTier || s.edition != "ENTERPRISE" || s.storageGB != 20 || s.backups != 7 || s.ha {
		t.Errorf("postgres defaults = %+v, %v", s, err)
	}
	if s, _ := sqlSizingOf(ds.EngineMySQL, "8.4", map[string]any{"instanceClass": "db-perf-optimized-N-4"}); s.dbVersion != "MYSQL_8_4" || s.edition != "ENTERPRISE_PLUS" {
		t.Errorf("mysql 8.4 on Enterprise Plus = %+v", s)
	}
	if r, _ := redisSizingOf("", nil); r.api != "REDIS_7_2" || r.tier != "BASIC" || r.memoryGB != 1 {
		t.Errorf("redis defaults = %+v", r)
	}
}

// An instance Cloud SQL reports FAILED (a private IP instance without its private services
// access connection ends so) needs the user; a failed operation classifies as its call would.
func TestCloudSQLFailures(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, cloud := testClient(t)
	d := datastoreOn(c)
	const jobID = "job_sqlfailed"
	info, _ := ensureDatastore(t, ctx, d, dspipe.CreateParams{JobID: jobID, Engine: ds.EngineMySQL, AdminPassword: ds.GeneratePassword()})
	cloud.Update(gcpfake.HostSQLAdmin, info.ID, func(r *gcpfake.Resource) { r.Body["state"] = "FAILED" })
	_, err := d.Servers.Status(ctx, dspipe.StatusParams{JobID: jobID, Engine: ds.EngineMySQL})
	if fe := fault.As(err); err == nil || fe.Class != job.ClassUserAction || fe.Code != "InstanceFailed" || !strings.Contains(fe.ConsoleURL, "sql/instances/") {
		t.Errorf("status of a FAILED instance = %v; want user_action InstanceFailed", err)
	}
	deleteDatastore(t, ctx, d, jobID, ds.EngineMySQL)

	for code, want := range map[string]job.FailureClass{"INTERNAL_ERROR": job.ClassTransient, "QUOTA_EXCEEDED": job.ClassUserAction, "ERROR_RDBMS": job.ClassUserAction} {
		op := &sqladmin.Operation{Status: "DONE", Error: &sqladmin.OperationErrors{Errors: []*sqladmin.OperationError{{Code: code, Message: "it failed"}}}}
		if _, err := sqlOpName(op); fault.ClassOf(c.Classify(err)) != want {
			t.Errorf("a done operation failed with %s classifies as %s, want %s", code, fault.ClassOf(c.Classify(err)), want)
		}
	}
	if fe := fault.As(c.Classify(sqlOpError(&sqladmin.Operation{Error: &sqladmin.OperationErrors{Errors: []*sqladmin.OperationError{{Code: "QUOTA_EXCEEDED"}}}}))); fe.Code != "QuotaExceeded" {
		t.Errorf("quota = %s", fe.Code)
	}
}

// Google may hold a datastore's private services access connection for a while after the
// instance on it is deleted: the teardown takes that refusal as passing, not as the user's to
// fix, and finishes once the connection is released.
func TestDatastoreTeardownWaitsOutAHeldConnection(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, cloud := testClient(t)
	d := datastoreOn(c)
	jobID := "job_held"
	ensureDatastore(t, ctx, d, dspipe.CreateParams{JobID: jobID, Engine: ds.EnginePostgres, AdminPassword: ds.GeneratePassword()})
	until(t, ctx, "delete the instance", func() (bool, error) {
		return d.Servers.Delete(ctx, dspipe.DeleteParams{JobID: jobID, Engine: ds.EnginePostgres})
	})
	cloud.Fail(gcpfake.HostServiceNetworking, http.MethodPost, "/connections/servicenetworking-googleapis-com", 2, http.StatusBadRequest, "failedPrecondition")
	mark := len(cloud.Calls())
	_, err := d.Network.Delete(ctx, dspipe.NetworkParams{JobID: jobID, Engine: ds.EnginePostgres})
	if err == nil || fault.ClassOf(err) != job.ClassTransient {
		for _, c := range cloud.Calls()[mark:] {
			t.Log(c)
		}
		t.Fatalf("a held connection: %v; want transient", err)
	}
	until(t, ctx, "delete the network", func() (bool, error) {
		return d.Network.Delete(ctx, dspipe.NetworkParams{JobID: jobID, Engine: ds.EnginePostgres})
	})
	if left, _ := observe(cloud)(ctx); len(left) != 0 {
		t.Fatalf("left after teardown: %v", left)
	}
}
