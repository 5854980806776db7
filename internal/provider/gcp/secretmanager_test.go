package gcp

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/provider/gcp/gcpfake"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/secrets/secretstest"
	"github.com/groundworkhq/groundwork/internal/store"
)

// secretClient opens a client whose account keeps secrets in Secret Manager.
func secretClient(t *testing.T) (*Client, *gcpfake.Cloud) {
	t.Helper()
	cloud := gcpfake.New(t)
	c, err := Open(context.Background(), Account{AuthMethod: AuthNone, ProjectID: gcpfake.Project, Region: "europe-west1",
		Endpoints: cloud.Endpoints(), Poll: time.Millisecond, SecretManager: true})
	if err != nil {
		t.Fatal(err)
	}
	return c, cloud
}

func secretStore(t *testing.T, c *Client, j *job.Job) *SecretStore {
	t.Helper()
	st, err := c.Secrets(context.Background(), j)
	if err != nil || st == nil {
		t.Fatalf("secrets: %v %v", st, err)
	}
	return st
}

// The Secret Manager store keeps the contract every secret store does.
func TestSecretManagerConformance(t *testing.T) {
	t.Parallel()
	secretstest.Run(t, func(t *testing.T) secrets.SecretStore {
		c, _ := secretClient(t)
		return secretStore(t, c, &job.Job{ID: "job_01JSMCONFORM", OrgID: "org_a"})
	})
}

// A secret of the job's name that another job made is never overwritten nor deleted; the
// job's own secret goes with all its versions.
func TestSecretManagerOwnership(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, cloud := secretClient(t)
	mine := secretStore(t, c, &job.Job{ID: "job_01JMINE", OrgID: "org_a"})
	theirs := secretStore(t, c, &job.Job{ID: "job_01JTHEIRS", OrgID: "org_a"})
	ref, err := theirs.Put(ctx, "job_01JMINE/admin", "theirs")
	if err != nil {
		t.Fatal(err)
	}
	if ref != "gcpsm:projects/"+gcpfake.Project+"/secrets/job_01JMINE--admin" {
		t.Fatalf("reference %q", ref)
	}
	_, err = mine.Put(ctx, "job_01JMINE/admin", "mine")
	if !errors.Is(err, errNotOurs) || fault.ClassOf(err) != job.ClassUserAction {
		t.Fatalf("overwriting another job's secret: %v; want a user_action refusal", err)
	}
	if _, err := mine.Put(ctx, ref, "mine"); !errors.Is(err, errNotOurs) {
		t.Fatalf("overwriting another job's secret by reference: %v; want refused", err)
	}
	if err := mine.Delete(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if v, ok := cloud.SecretValue("job_01JMINE--admin"); !ok || v != "theirs" {
		t.Fatalf("the other job's secret now reads %q (there: %v)", v, ok)
	}
	if _, err := theirs.Put(ctx, ref, "rotated"); err != nil {
		t.Fatal(err)
	}
	if err := theirs.Delete(ctx, ref); err != nil {
		t.Fatal(err)
	}
	for _, r := range cloud.Resources() {
		if r.Service == gcpfake.HostSecretManager {
			t.Errorf("left after delete: %s", r.Name)
		}
	}
}

// records is the module's view of the store, in memory.
type records struct {
	spaces   map[string]*store.Space
	accounts map[string]*store.CloudAccount
	jobs     map[string]*job.Job
}

func (r records) GetSpace(_ context.Context, orgID, id string) (*store.Space, error) {
	if s, ok := r.spaces[id]; ok && s.OrgID == orgID {
		return s, nil
	}
	return nil, store.ErrNotFound
}

func (r records) GetCloudAccount(_ context.Context, orgID, id string) (*store.CloudAccount, error) {
	if a, ok := r.accounts[id]; ok && a.OrgID == orgID {
		return a, nil
	}
	return nil, store.ErrNotFound
}

func (r records) GetJob(_ context.Context, p *store.GetJobParams) (*job.Job, error) {
	if j, ok := r.jobs[p.ID]; ok {
		return j, nil
	}
	return nil, store.ErrNotFound
}

// A datastore job's secrets on a GCP space whose account says secretManager go to the
// project's Secret Manager; other jobs' secrets, and those of other accounts, stay in the
// server's own store; a reference finds its way back while its job is there.
func TestSecretRouting(t *testing.T) {
	t.Parallel()
	cloud := gcpfake.New(t)
	cfg := func(sm bool) json.RawMessage {
		b, _ := json.Marshal(map[string]any{"projectId": gcpfake.Project, "endpoints": cloud.Endpoints(), "secretManager": sm})
		return b
	}
	r := records{
		spaces: map[string]*store.Space{
			"spc_sm":   {ID: "spc_sm", OrgID: "org_a", Provider: Name, Region: "europe-west1", CloudAccountID: "acc_sm"},
			"spc_nosm": {ID: "spc_nosm", OrgID: "org_a", Provider: Name, Region: "europe-west1", CloudAccountID: "acc_nosm"},
		},
		accounts: map[string]*store.CloudAccount{
			"acc_sm":   {ID: "acc_sm", OrgID: "org_a", Provider: Name, AuthMethod: "none", Config: cfg(true)},
			"acc_nosm": {ID: "acc_nosm", OrgID: "org_a", Provider: Name, AuthMethod: "none", Config: cfg(false)},
		},
		jobs: map[string]*job.Job{
			"job_01JDS":   {ID: "job_01JDS", OrgID: "org_a", SpaceID: "spc_sm", Provider: Name, Family: job.FamilyDatastore},
			"job_01JNET":  {ID: "job_01JNET", OrgID: "org_a", SpaceID: "spc_sm", Provider: Name, Family: job.FamilyNetwork},
			"job_01JNOSM": {ID: "job_01JNOSM", OrgID: "org_a", SpaceID: "spc_nosm", Provider: Name, Family: job.FamilyDatastore},
			"job_01JAWS":  {ID: "job_01JAWS", OrgID: "org_a", SpaceID: "spc_sm", Provider: "aws", Family: job.FamilyDatastore},
		},
	}
	m := NewModule(ModuleOptions{Records: r})
	ctx := context.Background()
	for key, wantSM := range map[string]bool{"job_01JDS/admin": true, "job_01JNET/admin": false, "job_01JNOSM/admin": false,
		"job_01JAWS/admin": false, "job_01JUNSTORED/adopted-admin": false, "cloud-account-acc_x": false, "local:sec_1": false} {
		st, err := m.SecretStoreFor(ctx, key)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if (st != nil) != wantSM {
			t.Errorf("%s routed to Secret Manager: %v, want %v", key, st != nil, wantSM)
		}
	}
	st, _ := m.SecretStoreFor(ctx, "job_01JDS/admin")
	ref, err := st.Put(ctx, "job_01JDS/admin", "pw")
	if err != nil {
		t.Fatal(err)
	}
	back, err := m.SecretStoreFor(ctx, ref)
	if err != nil || back == nil {
		t.Fatalf("the reference %s does not route back to Secret Manager: %v", ref, err)
	}
	if v, err := back.Get(ctx, ref); err != nil || v != "pw" {
		t.Fatalf("read back %q, %v", v, err)
	}
	if _, err := m.SecretStoreFor(ctx, "gcpsm:projects/"+gcpfake.Project+"/secrets/other"); !errors.Is(err, secrets.ErrNotFound) {
		t.Errorf("a reference no job made: %v; want not found", err)
	}
	delete(r.jobs, "job_01JDS")
	if _, err := m.SecretStoreFor(ctx, ref); !errors.Is(err, secrets.ErrNotFound) || !strings.Contains(err.Error(), "gone") {
		t.Fatalf("a reference of a job that is gone: %v; want not found", err)
	}
}

// The datastore pipeline on GCP with the account's Secret Manager: the job holds a gcpsm:
// reference and never the password; the Cloud SQL admin user's password is the secret's
// value (for Memorystore, the secret becomes the instance's AUTH string); the teardown
// deletes the secret with the instance and the network.
func TestDatastorePipelineKeepsPasswordsInSecretManager(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{"postgres", "redis"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c, cloud := secretClient(t)
			j := &job.Job{ID: "job_dspipe" + engine, OrgID: "org_test", SpaceID: "spc_test", Kind: job.KindProvisioning, Family: job.FamilyDatastore,
				Provider: Name, Mode: job.ModeCreate, Config: json.RawMessage(`{"engine":"` + engine + `","name":"orders"}`), Infra: json.RawMessage(`{}`)}
			vault := secretstest.Vault(secretStore(t, c, j))
			pl := dspipe.New(dspipe.Options{Drivers: map[string]dspipe.Driver{Name: datastoreWith(c, j.Config)}, Secrets: vault, Poll: time.Millisecond})
			if err := pl.Validate(ctx, j); err != nil {
				t.Fatal(err)
			}
			steps := pl.Steps(j)
			runSteps(ctx, t, j, steps, false, nil)

			var conn dspipe.ConnectionInfra
			if ok, err := (&pipeline.Run{Job: j}).Infra(dspipe.InfraConnection, &conn); !ok || err != nil {
				t.Fatalf("no connection in infra: %v", err)
			}
			id := "job_dspipe" + engine + "--admin"
			if conn.SecretRef != "gcpsm:projects/"+gcpfake.Project+"/secrets/"+id {
				t.Fatalf("connection %+v", conn)
			}
			pw, ok := cloud.SecretValue(id)
			if !ok || pw == "" {
				t.Fatal("no admin secret in Secret Manager")
			}
			var srv dspipe.ServerInfo
			if ok, err := (&pipeline.Run{Job: j}).Infra(dspipe.InfraServer, &srv); !ok || err != nil {
				t.Fatalf("no server in infra: %v", err)
			}
			switch engine {
			case "postgres":
				got, _ := cloud.SQLPassword(srv.ID[strings.LastIndex(srv.ID, "/")+1:], "postgres")
				if got != pw || conn.User != "postgres" || conn.Port != 5432 {
					t.Errorf("the postgres user's password is not the secret's; connection %+v", conn)
				}
			case "redis":
				auth, _ := cloud.RedisAuthString(srv.ID)
				if auth != pw || conn.User != "default" || conn.Port != 6378 {
					t.Errorf("the secret is not the instance's AUTH string; connection %+v", conn)
				}
			}
			if strings.Contains(string(j.Infra), pw) || strings.Contains(string(j.Config), pw) {
				t.Fatalf("the job holds the password: %s", j.Infra)
			}
			if got, err := vault.For(secrets.JobOwner(j.OrgID, j.ID)).Get(ctx, conn.SecretRef); err != nil || got != pw {
				t.Fatalf("the vault reads the reference as %v", err)
			}

			runSteps(ctx, t, j, steps, true, nil)
			if _, ok := cloud.SecretValue(id); ok {
				t.Error("the admin secret outlives the teardown")
			}
			if left, _ := observeDatastore(cloud)(ctx); len(left) != 0 {
				t.Errorf("left after teardown: %v", left)
			}
		})
	}
}

// The module's datastore driver finds each call's job, then opens the job's space's
// account; a job that is gone is the user's to recreate.
func TestModuleDatastoreDriverResolvesTheJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cloud := gcpfake.New(t)
	cfg, _ := json.Marshal(map[string]any{"projectId": gcpfake.Project, "endpoints": cloud.Endpoints()})
	r := records{
		spaces:   map[string]*store.Space{"spc_a": {ID: "spc_a", OrgID: "org_a", Provider: Name, Region: "europe-west4", CloudAccountID: "acc_a"}},
		accounts: map[string]*store.CloudAccount{"acc_a": {ID: "acc_a", OrgID: "org_a", Provider: Name, AuthMethod: "none", Config: cfg}},
		jobs:     map[string]*job.Job{"job_01JMOD": {ID: "job_01JMOD", OrgID: "org_a", SpaceID: "spc_a", Provider: Name, Family: job.FamilyDatastore}},
	}
	d := NewModule(ModuleOptions{Records: r, Poll: time.Millisecond}).DatastoreDriver()
	net, err := d.Network.Ensure(ctx, dspipe.NetworkParams{JobID: "job_01JMOD", Engine: "postgres"})
	if err != nil {
		t.Fatal(err)
	}
	want := "projects/" + gcpfake.Project + "/global/networks/" + name(&job.Job{ID: "job_01JMOD"}, roleDSNetwork)
	if net["network"] != want {
		t.Errorf("network %v, want %s", net["network"], want)
	}
	if _, ok := cloud.Lookup(gcpfake.HostCompute, want); !ok {
		t.Error("the network is not in the account's project")
	}
	_, err = d.Network.Ensure(ctx, dspipe.NetworkParams{JobID: "job_01JGONE", Engine: "postgres"})
	if fault.ClassOf(err) != job.ClassUserAction {
		t.Errorf("a job that is gone: %v; want user_action", err)
	}
}
