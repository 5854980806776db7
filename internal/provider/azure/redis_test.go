package azure

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/redis/armredis/v3"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/provider/azure/azurefake"
	"github.com/groundworkhq/groundwork/internal/provider/drivertest"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/secrets/secretstest"
)

// A cache is made as asked (size, zones, TLS only, no public access), is not ready until Azure
// says Succeeded, and then reports the key Azure made as its admin password; the key stays
// the same across ensures, and the cache goes with its delete.
func TestRedisLifecycle(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, cloud := testClient(t)
	d := datastoreOn(c)
	const jobID = "job_dsredis"
	settings := map[string]any{"instanceClass": "Premium_P2", "multiAZ": true}
	given := ds.GeneratePassword()

	info, err := d.Servers.Create(ctx, dspipe.CreateParams{JobID: jobID, Engine: ds.EngineRedis, Name: "sessions", AdminPassword: given, Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	cache := redisName(&job.Job{ID: jobID})
	if info.Host != cache+".redis.cache.windows.net" || info.Port != 6380 || info.AdminUser != "default" || info.Version != "6" {
		t.Errorf("server info %+v", info)
	}
	if st, err := d.Servers.Status(ctx, dspipe.StatusParams{JobID: jobID, Engine: ds.EngineRedis, AdminPassword: given}); err != nil || st.Ready || st.AdminPassword != "" {
		t.Fatalf("status right after create = %+v, %v; want not ready, no key", st, err)
	}
	var st dspipe.ServerStatus
	until(t, ctx, "ready", func() (bool, error) {
		var err error
		st, err = d.Servers.Status(ctx, dspipe.StatusParams{JobID: jobID, Engine: ds.EngineRedis, AdminPassword: given})
		return st.Ready, err
	})
	keys, ok := cloud.RedisKeys(info.ID)
	if !ok {
		t.Fatalf("the subscription has no cache %s", info.ID)
	}
	if st.AdminPassword != keys[0] || st.AdminPassword == given {
		t.Fatalf("admin password from status is not the cache's primary key")
	}
	if raw, err := base64.StdEncoding.DecodeString(st.AdminPassword); err != nil || len(raw) != 32 {
		t.Errorf("the key is not 32 bytes in base64: %d bytes, %v", len(raw), err)
	}

	cl, _ := armredis.NewClient(c.SubscriptionID, c.cred, c.opts)
	v, err := cl.Get(ctx, c.ResourceGroup, cache, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := v.Properties
	if *p.SKU.Name != armredis.SKUNamePremium || *p.SKU.Family != armredis.SKUFamilyP || *p.SKU.Capacity != 2 {
		t.Errorf("sku %s %s %d", *p.SKU.Name, *p.SKU.Family, *p.SKU.Capacity)
	}
	if zones := derefAll(v.Zones); !slices.Equal(zones, []string{"1", "2"}) {
		t.Errorf("zones %v", zones)
	}
	if *p.EnableNonSSLPort || *p.MinimumTLSVersion != armredis.TLSVersionOne2 || *p.PublicNetworkAccess != armredis.PublicNetworkAccessDisabled {
		t.Errorf("access: non-TLS port %v, TLS %s, public %s", *p.EnableNonSSLPort, *p.MinimumTLSVersion, *p.PublicNetworkAccess)
	}
	if !owns(&job.Job{ID: jobID, OrgID: "org_test"}, v.Tags) || *v.ID != info.ID {
		t.Errorf("cache %s tags %v", *v.ID, v.Tags)
	}

	// Ensuring again makes nothing (no PUT, only ListKeys's POST) and reads the same key.
	writes := func() []string {
		return slices.DeleteFunc(cloud.Calls(), func(call string) bool { return strings.HasSuffix(call, "/listKeys") })
	}
	calls := len(writes())
	if again, err := d.Servers.Create(ctx, dspipe.CreateParams{JobID: jobID, Engine: ds.EngineRedis, AdminPassword: given, Settings: settings}); err != nil || again != info {
		t.Fatalf("create again = %+v, %v", again, err)
	}
	if st2, err := d.Servers.Status(ctx, dspipe.StatusParams{JobID: jobID, Engine: ds.EngineRedis}); err != nil || st2.AdminPassword != st.AdminPassword {
		t.Fatalf("status again = ready %v, same key %v, %v", st2.Ready, st2.AdminPassword == st.AdminPassword, err)
	}
	if n := len(writes()); n != calls {
		t.Errorf("ensure again made calls: %v", writes()[calls:])
	}

	until(t, ctx, "delete", func() (bool, error) {
		return d.Servers.Delete(ctx, dspipe.DeleteParams{JobID: jobID, Engine: ds.EngineRedis})
	})
	if _, ok := cloud.RedisKeys(info.ID); ok {
		t.Error("the cache's keys outlive it")
	}
	if left, _ := observe(cloud)(ctx); len(left) != 0 {
		t.Errorf("left after delete: %v", left)
	}
	if gone, err := d.Servers.Delete(ctx, dspipe.DeleteParams{JobID: jobID, Engine: ds.EngineRedis}); err != nil || !gone {
		t.Errorf("delete of a gone cache = %v, %v", gone, err)
	}
}

func derefAll(ss []*string) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		out = append(out, deref(s))
	}
	return out
}

// The datastore pipeline on Azure with the account's Key Vault: the admin secret the
// credentials step stored is, once the cache is ready, the cache's primary key under the same
// reference, and never in infra.
func TestRedisPipelineKeepsTheCacheKey(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cloud := azurefake.New(t)
	c, err := Open(Account{AuthMethod: AuthNone, SubscriptionID: azurefake.Subscription, Location: "westeurope",
		ResourceGroup: "rg-redis-pipeline", Endpoint: cloud.URL, Transport: azurefake.Transport(cloud.URL), KeyVaultURL: testVault, Poll: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	j := &job.Job{ID: "job_dsrpipe", OrgID: "org_test", SpaceID: "spc_test", Kind: job.KindProvisioning, Family: job.FamilyDatastore,
		Provider: Name, Mode: job.ModeCreate, Config: json.RawMessage(`{"engine":"redis","name":"sessions","allocatedStorageGB":20}`), Infra: json.RawMessage(`{}`)}
	kv, err := c.Secrets(j)
	if err != nil {
		t.Fatal(err)
	}
	vault := secretstest.Vault(kv)
	pl := dspipe.New(dspipe.Options{Drivers: map[string]dspipe.Driver{Name: datastoreOn(c)}, Secrets: vault, Poll: time.Millisecond})
	if err := pl.Validate(ctx, j); err != nil {
		t.Fatal(err)
	}
	steps := pl.Steps(j)
	run(ctx, t, j, steps, false)

	var conn dspipe.ConnectionInfra
	if ok, err := (&pipeline.Run{Job: j}).Infra(dspipe.InfraConnection, &conn); !ok || err != nil {
		t.Fatalf("no connection in infra: %v", err)
	}
	var cred struct{ SecretRef string }
	if ok, err := (&pipeline.Run{Job: j}).Infra(dspipe.InfraCredentials, &cred); !ok || err != nil || cred.SecretRef != conn.SecretRef {
		t.Fatalf("credentials %q, connection %q: want one reference", cred.SecretRef, conn.SecretRef)
	}
	if !strings.HasPrefix(conn.SecretRef, refPrefix) || conn.User != "default" || conn.Port != 6380 {
		t.Fatalf("connection %+v", conn)
	}
	var srv dspipe.ServerInfo
	if ok, err := (&pipeline.Run{Job: j}).Infra(dspipe.InfraServer, &srv); !ok || err != nil {
		t.Fatalf("no server in infra: %v", err)
	}
	keys, ok := cloud.RedisKeys(srv.ID)
	if !ok {
		t.Fatalf("no cache %s", srv.ID)
	}
	owner := secrets.JobOwner(j.OrgID, j.ID)
	if pw, err := vault.For(owner).Get(ctx, conn.SecretRef); err != nil || pw != keys[0] {
		t.Fatalf("the stored admin password is not the cache's primary key (err %v)", err)
	}
	if strings.Contains(string(j.Infra), keys[0]) {
		t.Fatalf("infra holds the key: %s", j.Infra)
	}
	var dsInfo struct{ NotApplicable []string }
	if _, err := (&pipeline.Run{Job: j}).Infra(dspipe.InfraDatastore, &dsInfo); err != nil || !slices.Equal(dsInfo.NotApplicable, []string{"allocatedStorageGB"}) {
		t.Errorf("notApplicable = %v, %v", dsInfo.NotApplicable, err)
	}

	run(ctx, t, j, steps, true)
	if _, err := vault.For(owner).Get(ctx, conn.SecretRef); err == nil {
		t.Error("the admin secret outlives the teardown")
	}
	if left, _ := observe(cloud)(ctx); len(left) != 0 {
		t.Errorf("left after teardown: %v", left)
	}
}

// run drives the steps (or their undos, last first) as the engine does.
func run(ctx context.Context, t *testing.T, j *job.Job, steps []pipeline.Step, undo bool) {
	t.Helper()
	drivertest.RunSteps(ctx, t, j, steps, undo, nil)
}

func TestRedisSizing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		settings map[string]any
		version  string
		sku      string // tier/family/capacity
		zones    int
		code     string
	}{
		{settings: nil, sku: "Standard/C/1"},
		{settings: map[string]any{"instanceClass": "Basic_C0"}, version: "6.0", sku: "Basic/C/0"},
		{settings: map[string]any{"instanceClass": "Standard_C6"}, sku: "Standard/C/6"},
		{settings: map[string]any{"multiAZ": true}, sku: "Premium/P/1", zones: 2},
		{settings: map[string]any{"instanceClass": "Premium_P5", "multiAZ": true}, sku: "Premium/P/5", zones: 2},
		{settings: map[string]any{"instanceClass": "Premium_P3"}, sku: "Premium/P/3"},
		{settings: map[string]any{"instanceClass": "Standard_C1", "multiAZ": true}, code: "MultiAZNeedsPremium"},
		{settings: map[string]any{"instanceClass": "cache.t3.micro"}, code: "InvalidInstanceClass"},
		{settings: map[string]any{"instanceClass": "Premium_P0"}, code: "InvalidInstanceClass"},
		{settings: map[string]any{"instanceClass": "Basic_C7"}, code: "InvalidInstanceClass"},
		{settings: map[string]any{"instanceClass": "Standard_D2ds_v5"}, code: "InvalidInstanceClass"},
		{version: "7.2", code: "UnsupportedVersion"},
		{version: "4", code: "UnsupportedVersion"},
	} {
		s, err := redisSizingOf(tc.version, tc.settings)
		if tc.code != "" {
			if fe := fault.As(err); err == nil || fe.Class != job.ClassUserAction || fe.Code != tc.code {
				t.Errorf("%v %q: err = %v, want user_action %s", tc.settings, tc.version, err, tc.code)
			}
			continue
		}
		got := string(*s.sku.Name) + "/" + string(*s.sku.Family) + "/" + string(rune('0'+*s.sku.Capacity))
		if err != nil || got != tc.sku || len(s.zones) != tc.zones || s.version != "6" {
			t.Errorf("%v %q = %s zones %d version %s, %v; want %s zones %d", tc.settings, tc.version, got, len(s.zones), s.version, err, tc.sku, tc.zones)
		}
	}
	res, err := DatastoreDriver{}.Check(context.Background(), dspipe.CheckParams{Engine: ds.EngineRedis,
		Settings: map[string]any{"backupRetentionDays": 7, "allocatedStorageGB": 10, "instanceClass": "Basic_C1"}})
	if err != nil || res.Version != "6" || !slices.Equal(res.NotApplicable, []string{"allocatedStorageGB", "backupRetentionDays"}) {
		t.Errorf("Check = %+v, %v", res, err)
	}
}

// A cache name is a DNS name across Azure: one held in another resource group is the user's to
// clear, and a cache of the job's name without its tags is neither used nor deleted.
func TestRedisNameHeldElsewhere(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, cloud := testClient(t)
	elsewhere := clientOn(t, cloud, "rg-elsewhere")
	const jobID = "job_dsrtaken"
	// Another space's job of the same id tail holds the name.
	other := datastoreOn(elsewhere)
	until(t, ctx, "the cache elsewhere", func() (bool, error) {
		_, err := other.Servers.Create(ctx, dspipe.CreateParams{JobID: jobID, Engine: ds.EngineRedis})
		return err == nil, err
	})
	_, err := datastoreOn(c).Servers.Create(ctx, dspipe.CreateParams{JobID: jobID, Engine: ds.EngineRedis})
	if fe := fault.As(err); err == nil || fe.Class != job.ClassUserAction || fe.Code != "CacheNameTaken" {
		t.Fatalf("create of a name held elsewhere = %v, want user_action CacheNameTaken", err)
	}

	// A cache of the job's name in the job's group that is not the job's.
	stranger := datastoreOn(c)
	stranger.Servers = DatastoreDriver{Resolve: func(_ context.Context, id string) (Placement, error) {
		return Placement{C: c, J: &job.Job{ID: id, OrgID: "org_other", SpaceID: "spc_test"}}, nil
	}}
	until(t, ctx, "the stranger's cache", func() (bool, error) {
		_, err := stranger.Servers.Create(ctx, dspipe.CreateParams{JobID: "job_dsrmine", Engine: ds.EngineRedis})
		return err == nil, err
	})
	d := datastoreOn(c)
	if _, err := d.Servers.Create(ctx, dspipe.CreateParams{JobID: "job_dsrmine", Engine: ds.EngineRedis}); fault.As(err).Code != "NameTaken" {
		t.Fatalf("create over a cache that is not the job's = %v, want NameTaken", err)
	}
	if gone, err := d.Servers.Delete(ctx, dspipe.DeleteParams{JobID: "job_dsrmine", Engine: ds.EngineRedis}); err != nil || !gone {
		t.Fatalf("delete over a cache that is not the job's = %v, %v", gone, err)
	}
	if n := len(cloud.Resources()); n != 4 { // two groups, two caches
		t.Fatalf("the subscription holds %d resources, want 4: %v", n, cloud.Resources())
	}
}
