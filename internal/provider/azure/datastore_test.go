package azure

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/mysql/armmysqlflexibleservers"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/postgresql/armpostgresqlflexibleservers/v4"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/provider/azure/azurefake"
	"github.com/groundworkhq/groundwork/internal/provider/drivertest"
)

// testPassword meets Azure's rule for administrator passwords.
const testPassword = "Gw7-test-Password-0123"

func datastoreOn(c *Client) dspipe.Driver {
	return DatastoreDriver{Resolve: func(_ context.Context, jobID string) (Placement, error) {
		return Placement{C: c, J: &job.Job{ID: jobID, OrgID: "org_test", SpaceID: "spc_test", Provider: Name, Family: job.FamilyDatastore}}, nil
	}}.Driver()
}

// until calls f until it reports done (drivertest.Until).
func until(t *testing.T, ctx context.Context, what string, f func() (bool, error)) {
	t.Helper()
	drivertest.Until(ctx, t, what, f)
}

// The datastore lifecycle the conformance suite checks (drivertest.Datastore), with a
// password Azure accepts: see TestDatastoreRefusesAPasswordAzureRefuses for why the suite
// itself cannot run here.
func TestDatastoreLifecycle(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		engine ds.Engine
		typ    string
		port   int
	}{
		{ds.EnginePostgres, "Microsoft.DBforPostgreSQL/flexibleServers", 5432},
		{ds.EngineMySQL, "Microsoft.DBforMySQL/flexibleServers", 3306},
	} {
		t.Run(string(tc.engine), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c, cloud := testClient(t)
			d := datastoreOn(c)
			observe := observe(cloud)
			jobID := "job_ds" + string(tc.engine)
			settings := map[string]any{"multiAZ": true, "instanceClass": "Standard_D2ds_v5", "allocatedStorageGB": float64(50)}
			var info dspipe.ServerInfo
			ensure := func() {
				until(t, ctx, "ensure", func() (bool, error) {
					if _, err := d.Network.Ensure(ctx, dspipe.NetworkParams{JobID: jobID, Engine: tc.engine}); err != nil {
						return false, err
					}
					var err error
					if info, err = d.Servers.Create(ctx, dspipe.CreateParams{JobID: jobID, Engine: tc.engine, Name: "orders",
						AdminPassword: testPassword, Settings: settings}); err != nil {
						return false, err
					}
					st, err := d.Servers.Status(ctx, dspipe.StatusParams{JobID: jobID, Engine: tc.engine, AdminPassword: testPassword})
					return st.Ready, err
				})
			}
			// A server just made is not ready until Azure says so.
			until(t, ctx, "network", func() (bool, error) {
				_, err := d.Network.Ensure(ctx, dspipe.NetworkParams{JobID: jobID, Engine: tc.engine})
				return err == nil, err
			})
			if _, err := d.Servers.Create(ctx, dspipe.CreateParams{JobID: jobID, Engine: tc.engine, AdminPassword: testPassword, Settings: settings}); err != nil {
				t.Fatal(err)
			}
			if st, err := d.Servers.Status(ctx, dspipe.StatusParams{JobID: jobID, Engine: tc.engine}); err != nil || st.Ready {
				t.Fatalf("status right after create = %+v, %v; want not ready", st, err)
			}
			ensure()
			first, err := observe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var server drivertest.Resource
			for _, r := range first {
				if r.JobID != jobID {
					t.Errorf("%s carries job %q, want %q", r, r.JobID, jobID)
				}
				if r.Kind == tc.typ {
					server = r
				}
			}
			if server.ID == "" || info.ID != server.ID {
				t.Fatalf("server id %q, the subscription holds %v", info.ID, first)
			}
			if !strings.HasSuffix(info.Host, ".database.azure.com") || info.Port != tc.port || info.AdminUser != adminUser {
				t.Errorf("server info %+v", info)
			}
			ensure()
			if again, _ := observe(ctx); len(again) != len(first) {
				t.Errorf("ensure again changed the subscription:\n first %v\n again %v", first, again)
			}
			checkServer(t, ctx, c, tc.engine, jobID)

			del := func(id string) {
				until(t, ctx, "delete", func() (bool, error) {
					if gone, err := d.Servers.Delete(ctx, dspipe.DeleteParams{JobID: id, Engine: tc.engine}); err != nil || !gone {
						return false, err
					}
					return d.Network.Delete(ctx, dspipe.NetworkParams{JobID: id, Engine: tc.engine})
				})
			}
			del(jobID)
			if left, _ := observe(ctx); len(left) != 0 {
				t.Errorf("left after delete: %v", left)
			}
			if gone, err := d.Servers.Delete(ctx, dspipe.DeleteParams{JobID: jobID, Engine: tc.engine}); err != nil || !gone {
				t.Errorf("delete of a gone server = %v, %v", gone, err)
			}
			del("job_dsnever")
		})
	}
}

// checkServer reads the job's server back and checks it is what the request asked for.
func checkServer(t *testing.T, ctx context.Context, c *Client, e ds.Engine, jobID string) {
	t.Helper()
	j := &job.Job{ID: jobID}
	es := engines[e]
	wantSubnet := c.sub("Microsoft.Network", "virtualNetworks", name(j, "vnet")) + "/subnets/" + SubnetDelegated
	wantZone := c.sub("Microsoft.Network", "privateDnsZones", privateZone(j, es))
	switch e {
	case ds.EnginePostgres:
		cl, _ := armpostgresqlflexibleservers.NewServersClient(c.SubscriptionID, c.cred, c.opts)
		v, err := cl.Get(ctx, c.ResourceGroup, serverName(j, es), nil)
		if err != nil {
			t.Fatal(err)
		}
		p := v.Properties
		if *v.SKU.Name != "Standard_D2ds_v5" || *v.SKU.Tier != armpostgresqlflexibleservers.SKUTierGeneralPurpose {
			t.Errorf("sku %s %s", *v.SKU.Name, *v.SKU.Tier)
		}
		if *p.HighAvailability.Mode != armpostgresqlflexibleservers.HighAvailabilityModeZoneRedundant || *p.Backup.BackupRetentionDays != 7 ||
			*p.Storage.StorageSizeGB != 64 || *p.Version != "16" || *p.AdministratorLogin != adminUser {
			t.Errorf("server %+v", p)
		}
		if *p.Network.DelegatedSubnetResourceID != wantSubnet || *p.Network.PrivateDNSZoneArmResourceID != wantZone ||
			*p.Network.PublicNetworkAccess != armpostgresqlflexibleservers.ServerPublicNetworkAccessStateDisabled {
			t.Errorf("network %+v", p.Network)
		}
	case ds.EngineMySQL:
		cl, _ := armmysqlflexibleservers.NewServersClient(c.SubscriptionID, c.cred, c.opts)
		v, err := cl.Get(ctx, c.ResourceGroup, serverName(j, es), nil)
		if err != nil {
			t.Fatal(err)
		}
		p := v.Properties
		if *p.HighAvailability.Mode != armmysqlflexibleservers.HighAvailabilityModeZoneRedundant || *p.Backup.BackupRetentionDays != 7 ||
			*p.Storage.StorageSizeGB != 50 || *p.Version != armmysqlflexibleservers.ServerVersionEight021 {
			t.Errorf("server %+v", p)
		}
		if *p.Network.DelegatedSubnetResourceID != wantSubnet || *p.Network.PrivateDNSZoneResourceID != wantZone ||
			*p.Network.PublicNetworkAccess != armmysqlflexibleservers.EnableStatusEnumDisabled {
			t.Errorf("network %+v", p.Network)
		}
	}
}

// A password of fewer than three kinds of character, which Azure refuses, is refused before
// anything reaches Azure; the one the datastore pipeline generates passes.
func TestDatastoreRefusesAPasswordAzureRefuses(t *testing.T) {
	t.Parallel()
	c, cloud := testClient(t)
	d := datastoreOn(c)
	for range 100 {
		if pw := ds.GeneratePassword(); !azurePassword(pw) {
			t.Fatalf("the generated password %q fails Azure's rule", pw)
		}
	}
	_, err := d.Servers.Create(context.Background(), dspipe.CreateParams{JobID: "job_dspw", Engine: ds.EnginePostgres, AdminPassword: "ABCDEFGHJKLMNPQRS234567ABCDEFGH"})
	if fault.ClassOf(err) != job.ClassSystem || !strings.Contains(fault.As(err).Error(), "Azure's rule") {
		t.Fatalf("err = %v, want a system error naming Azure's password rule", err)
	}
	if calls := cloud.Calls(); len(calls) != 0 {
		t.Errorf("the refused server reached Azure: %v", calls)
	}
}

func TestDatastoreRefusals(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		call func(ctx context.Context, d dspipe.Driver, cloud *azurefake.Cloud) error
		code string
	}{
		"oracle": {code: "EngineUnsupported", call: func(ctx context.Context, d dspipe.Driver, _ *azurefake.Cloud) error {
			_, err := d.Servers.Check(ctx, dspipe.CheckParams{Engine: "oracle"})
			return err
		}},
		"redis multiAZ on Standard": {code: "MultiAZNeedsPremium", call: func(ctx context.Context, d dspipe.Driver, _ *azurefake.Cloud) error {
			_, err := d.Servers.Check(ctx, dspipe.CheckParams{Engine: ds.EngineRedis, Settings: map[string]any{"instanceClass": "Standard_C2", "multiAZ": true}})
			return err
		}},
		"redis forbidden": {code: "AuthorizationFailed", call: func(ctx context.Context, d dspipe.Driver, cloud *azurefake.Cloud) error {
			cloud.Fail(http.MethodPut, "/microsoft.cache/redis/", http.StatusForbidden, "AuthorizationFailed",
				"The client does not have authorization to perform action 'Microsoft.Cache/redis/write'.", 1)
			_, err := d.Servers.Create(ctx, dspipe.CreateParams{JobID: "job_x", Engine: ds.EngineRedis})
			return err
		}},
		"postgres 9.6": {code: "UnsupportedVersion", call: func(ctx context.Context, d dspipe.Driver, _ *azurefake.Cloud) error {
			_, err := d.Servers.Check(ctx, dspipe.CheckParams{Engine: ds.EnginePostgres, Version: "9.6"})
			return err
		}},
		"mysql 8.4": {code: "UnsupportedVersion", call: func(ctx context.Context, d dspipe.Driver, _ *azurefake.Cloud) error {
			_, err := d.Servers.Check(ctx, dspipe.CheckParams{Engine: ds.EngineMySQL, Version: "8.4"})
			return err
		}},
		"an AWS instance class": {code: "InvalidInstanceClass", call: func(ctx context.Context, d dspipe.Driver, _ *azurefake.Cloud) error {
			_, err := d.Servers.Check(ctx, dspipe.CheckParams{Engine: ds.EnginePostgres, Settings: map[string]any{"instanceClass": "db.t3.micro"}})
			return err
		}},
		"HA on burstable": {code: "HANotOnBurstable", call: func(ctx context.Context, d dspipe.Driver, _ *azurefake.Cloud) error {
			_, err := d.Servers.Check(ctx, dspipe.CheckParams{Engine: ds.EngineMySQL, Settings: map[string]any{"instanceClass": "Standard_B2s", "multiAZ": true}})
			return err
		}},
		"postgres keeps backups a week at least": {code: "InvalidBackupRetention", call: func(ctx context.Context, d dspipe.Driver, _ *azurefake.Cloud) error {
			_, err := d.Servers.Check(ctx, dspipe.CheckParams{Engine: ds.EnginePostgres, Settings: map[string]any{"backupRetentionDays": 3}})
			return err
		}},
		"forbidden": {code: "AuthorizationFailed", call: func(ctx context.Context, d dspipe.Driver, cloud *azurefake.Cloud) error {
			cloud.Fail(http.MethodPut, "/flexibleservers/", http.StatusForbidden, "AuthorizationFailed",
				"The client does not have authorization to perform action 'Microsoft.DBforPostgreSQL/flexibleServers/write'.", 1)
			_, err := d.Servers.Create(ctx, dspipe.CreateParams{JobID: "job_x", Engine: ds.EnginePostgres, AdminPassword: testPassword})
			return err
		}},
		"no network": {code: "NetworkNotFound", call: func(ctx context.Context, d dspipe.Driver, _ *azurefake.Cloud) error {
			_, err := d.Servers.Create(ctx, dspipe.CreateParams{JobID: "job_x", Engine: ds.EngineMySQL, AdminPassword: testPassword})
			return err
		}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, cloud := testClient(t)
			err := tc.call(context.Background(), datastoreOn(c), cloud)
			if fe := fault.As(err); err == nil || fe.Class != job.ClassUserAction || fe.Code != tc.code {
				t.Fatalf("err = %v, want user_action %s", err, tc.code)
			}
		})
	}
}

func TestDatastoreCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		engine  ds.Engine
		version string
		want    string
	}{
		{ds.EnginePostgres, "", "16"},
		{ds.EnginePostgres, "15.4", "15"},
		{ds.EngineMySQL, "", "8.0.21"},
		{ds.EngineMySQL, "8.0.36", "8.0.21"},
		{ds.EngineMySQL, "5.7", "5.7"},
	} {
		res, err := DatastoreDriver{}.Check(context.Background(), dspipe.CheckParams{Engine: tc.engine, Version: tc.version})
		if err != nil || res.Version != tc.want || len(res.NotApplicable) != 0 {
			t.Errorf("Check(%s %q) = %+v, %v; want version %s", tc.engine, tc.version, res, err, tc.want)
		}
	}
	s, err := DatastoreDriver{}.size(ds.EnginePostgres, "", map[string]any{"allocatedStorageGB": 20})
	if err != nil || s.storageGB != 32 || s.sku != "Standard_B1ms" || s.tier != "Burstable" || s.backups != 7 || s.ha {
		t.Errorf("postgres defaults = %+v, %v", s, err)
	}
	if !azurePassword(testPassword) || azurePassword("ABCDEFGH23456723") || azurePassword("Ab1") {
		t.Error("azurePassword does not follow Azure's rule")
	}
	if n := serverName(&job.Job{ID: "job_dsx"}, engines[ds.EnginePostgres]); n != "gw-jobdsx-pg" {
		t.Errorf("server name %s", n)
	}
}
