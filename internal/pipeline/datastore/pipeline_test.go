package datastore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/provider/local"
	"github.com/groundworkhq/groundwork/internal/provider/local/localtest"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/secrets/secretstest"
)

// bundle is one test's world: a data dir with a secret store and a local provider, a pipeline
// over them, and a log buffer to scan for secrets.
type bundle struct {
	dataDir string
	secrets *secrets.Local
	vault   *secrets.Vault
	prov    *local.Provider
	pipe    *dspipe.Pipeline
	logs    *bytes.Buffer
	logger  *slog.Logger
}

func setup(t *testing.T, dataDir string, drivers func(*local.Provider) map[string]dspipe.Driver) *bundle {
	t.Helper()
	b := &bundle{dataDir: dataDir, logs: &bytes.Buffer{}}
	b.logger = slog.New(slog.NewJSONHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var err error
	if b.secrets, err = secrets.OpenLocal(dataDir, ""); err != nil {
		t.Fatal(err)
	}
	if b.prov, err = local.New(local.Options{DataDir: dataDir, Logger: b.logger}); err != nil {
		t.Fatal(err)
	}
	d := map[string]dspipe.Driver{"local": b.prov.Driver()}
	if drivers != nil {
		d = drivers(b.prov)
	}
	b.vault = secretstest.Vault(b.secrets)
	b.pipe = dspipe.New(dspipe.Options{Drivers: d, Secrets: b.vault, Poll: 50 * time.Millisecond})
	return b
}

const testOrg = "org_test"

// jobSecrets is the secret store as the job with id sees it.
func (b *bundle) jobSecrets(id string) secrets.SecretStore {
	return b.vault.For(secrets.Owner{OrgID: testOrg, Kind: secrets.OwnerJob, ID: id})
}

func newJob(id string, mode job.Mode, cfg any) *job.Job {
	raw, _ := json.Marshal(cfg)
	return &job.Job{ID: id, OrgID: testOrg, Kind: job.KindProvisioning, Family: job.FamilyDatastore, Provider: "local", Mode: mode, Config: raw, Infra: json.RawMessage(`{}`)}
}

// do runs one step (Do or Undo) the way the engine does: merge infra, come back after a Wait,
// until it is done or skipped, within a deadline.
func (b *bundle) do(t *testing.T, j *job.Job, s pipeline.Step, undo bool) error {
	t.Helper()
	fn := s.Do
	if undo {
		fn = s.Undo
	}
	if fn == nil {
		return nil
	}
	deadline := time.Now().Add(2 * time.Minute)
	for attempt := 1; ; attempt++ {
		res, err := fn(context.Background(), &pipeline.Run{Job: j, Step: s.Name, Attempt: attempt, Logger: b.logger})
		if err != nil {
			return err
		}
		if j.Infra, err = pipeline.MergeInfra(j.Infra, res.Infra); err != nil {
			t.Fatal(err)
		}
		if res.Outcome != pipeline.OutcomeWait {
			return nil
		}
		if time.Now().After(deadline) {
			t.Fatalf("step %s still waiting: %s", s.Name, res.Message)
		}
		time.Sleep(res.After)
	}
}

func (b *bundle) apply(t *testing.T, j *job.Job) {
	t.Helper()
	for _, s := range b.pipe.Steps(j) {
		if err := b.do(t, j, s, false); err != nil {
			t.Fatalf("step %s: %v", s.Name, err)
		}
	}
}

func (b *bundle) teardown(t *testing.T, j *job.Job) {
	t.Helper()
	steps := b.pipe.Steps(j)
	for i := len(steps) - 1; i >= 0; i-- {
		if err := b.do(t, j, steps[i], true); err != nil {
			t.Fatalf("undo %s: %v", steps[i].Name, err)
		}
	}
}

func infraOf[T any](t *testing.T, j *job.Job, key string) T {
	t.Helper()
	var v T
	ok, err := (&pipeline.Run{Job: j}).Infra(key, &v)
	if err != nil || !ok {
		t.Fatalf("infra %q: present=%v err=%v in %s", key, ok, err, j.Infra)
	}
	return v
}

func countFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	return n
}

func TestDatastoreEndToEnd(t *testing.T) {
	t.Parallel()
	for _, e := range ds.Engines {
		t.Run(string(e), func(t *testing.T) {
			t.Parallel()
			localtest.RequireEngine(t, e)
			ctx := context.Background()
			dataDir := localtest.DataDir(t)
			b := setup(t, dataDir, nil)
			j := newJob("job_e2e_"+string(e), job.ModeCreate, map[string]any{"engine": e, "name": "shop", "instanceClass": "db.t3.medium", "multiAZ": true})
			t.Cleanup(func() { _ = b.prov.Delete(context.Background(), j.ID) })
			if err := b.pipe.Validate(ctx, j); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			b.apply(t, j)

			dsInfo := infraOf[map[string]any](t, j, dspipe.InfraDatastore)
			if na, _ := dsInfo["notApplicable"].([]any); len(na) != 2 {
				t.Errorf("notApplicable = %v, want instanceClass and multiAZ", dsInfo["notApplicable"])
			}
			conn := infraOf[dspipe.ConnectionInfra](t, j, dspipe.InfraConnection)
			adminPW, err := b.secrets.Get(ctx, conn.SecretRef)
			if err != nil {
				t.Fatalf("admin secret: %v", err)
			}
			srv, alive, err := b.prov.Find(ctx, j.ID)
			if err != nil || !alive {
				t.Fatalf("server not running after apply: %v", err)
			}

			// Re-running every step creates nothing new: same server, same secret, no new files.
			infraBefore, secretFiles := string(j.Infra), countFiles(t, filepath.Join(dataDir, "secrets"))
			b.apply(t, j)
			if string(j.Infra) != infraBefore {
				t.Errorf("re-run changed infra:\n%s\n%s", infraBefore, j.Infra)
			}
			if n := countFiles(t, filepath.Join(dataDir, "secrets")); n != secretFiles {
				t.Errorf("re-run changed the secret store: %d files, was %d", n, secretFiles)
			}
			// A restarted Groundwork (fresh provider and pipeline over the same data dir) finds
			// the running server instead of starting a second one.
			b2 := setup(t, dataDir, nil)
			// The owners of secrets live in the job store, which a restart keeps.
			b2.vault = b.vault
			b2.pipe = dspipe.New(dspipe.Options{Drivers: map[string]dspipe.Driver{"local": b2.prov.Driver()}, Secrets: b2.vault, Poll: 50 * time.Millisecond})
			b2.apply(t, j)
			if again, alive, _ := b2.prov.Find(ctx, j.ID); !alive || again.PID != srv.PID {
				t.Fatalf("after restart pid = %d (alive %v), want %d", again.PID, alive, srv.PID)
			}

			// A database with its owner; the owner's password goes to the secret store only.
			admin := ds.Conn{Engine: e, Host: conn.Host, Port: conn.Port, User: conn.User, Password: adminPW}
			ownerRef, err := b.secrets.Put(ctx, j.ID+"/db/checkout", ds.GeneratePassword())
			if err != nil {
				t.Fatal(err)
			}
			ownerPW, _ := b.secrets.Get(ctx, ownerRef)
			if err := ds.CreateDatabase(ctx, admin, "checkout", "checkout_app", ownerPW); err != nil {
				t.Fatalf("CreateDatabase: %v", err)
			}
			user := ds.Conn{Engine: e, Host: conn.Host, Port: conn.Port, User: "checkout_app", Password: ownerPW, Database: "checkout"}
			if err := localtest.WriteRead(ctx, user); err != nil {
				t.Fatalf("checkout_app write+read: %v", err)
			}
			if err := ds.DropDatabase(ctx, admin, "checkout", "checkout_app"); err != nil {
				t.Fatalf("DropDatabase: %v", err)
			}
			if err := ds.Check(ctx, user); !ds.IsAuthFailure(err) {
				t.Fatalf("checkout_app still connects after drop: %v", err)
			}

			// Secret values never appear in infra or logs.
			for _, v := range []string{adminPW, ownerPW} {
				if strings.Contains(string(j.Infra), v) {
					t.Errorf("infra holds a password: %s", j.Infra)
				}
				if strings.Contains(b.logs.String(), v) || strings.Contains(b2.logs.String(), v) {
					t.Errorf("logs hold a password")
				}
			}

			b2.teardown(t, j)
			localtest.WaitGone(t, srv.PID)
			if _, err := os.Stat(srv.Dir); !os.IsNotExist(err) {
				t.Fatalf("server dir %s survives teardown: %v", srv.Dir, err)
			}
			if _, err := b.secrets.Get(ctx, conn.SecretRef); !errors.Is(err, secrets.ErrNotFound) {
				t.Fatalf("admin secret survives teardown: %v", err)
			}
			// Teardown re-run is harmless.
			b2.teardown(t, j)
			localtest.AssertNotOnDisk(t, dataDir, adminPW, ownerPW)
		})
	}
}

func TestHostileConfigRefused(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		cfg       map[string]any
		wantField string
	}{
		"injection": {map[string]any{"engine": "postgres", "name": `x"; DROP DATABASE postgres; --`}, "config.name"},
		"200 chars": {map[string]any{"engine": "mysql", "name": strings.Repeat("n", 200)}, "config.name"},
		"unicode":   {map[string]any{"engine": "redis", "name": "ünïcødé"}, "config.name"},
		"engine":    {map[string]any{"engine": "oracle"}, "config.engine"},
		"version":   {map[string]any{"engine": "postgres", "version": "15; rm -rf /"}, "config.version"},
		"password":  {map[string]any{"engine": "postgres", "adminPassword": "x"}, "config.adminPassword"},
		// The catalog's rule for names: dashes, not underscores (both checks must agree).
		"underscore": {map[string]any{"engine": "postgres", "name": "checkout_db"}, "config.name"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dataDir := t.TempDir()
			b := setup(t, dataDir, nil)
			j := newJob("job_hostile", job.ModeCreate, tc.cfg)
			var fe *ds.FieldError
			if err := b.pipe.Validate(context.Background(), j); !errors.As(err, &fe) || fe.Field != tc.wantField {
				t.Fatalf("Validate = %v, want a field error on %s", err, tc.wantField)
			}
			// Even if the engine ran it, the first step refuses and nothing is created.
			err := b.do(t, j, b.pipe.Steps(j)[0], false)
			if fault.ClassOf(err) != job.ClassUserAction || !errors.As(err, &fe) {
				t.Fatalf("validate step = %v, want user_action field error", err)
			}
			entries, _ := os.ReadDir(filepath.Join(dataDir, "datastores"))
			if len(entries) != 0 {
				t.Fatalf("refused job created %v", entries)
			}
		})
	}
}

// refusing fails any provider call: adopt mode must make none.
type refusing struct{ t *testing.T }

func (r refusing) fail(what string) error {
	r.t.Errorf("adopt called the provider: %s", what)
	return errors.New("no provider calls in adopt mode")
}
func (r refusing) Check(context.Context, dspipe.CheckParams) (dspipe.CheckResult, error) {
	return dspipe.CheckResult{}, r.fail("Check")
}
func (r refusing) Create(context.Context, dspipe.CreateParams) (dspipe.ServerInfo, error) {
	return dspipe.ServerInfo{}, r.fail("Create")
}
func (r refusing) Status(context.Context, dspipe.StatusParams) (dspipe.ServerStatus, error) {
	return dspipe.ServerStatus{}, r.fail("Status")
}
func (r refusing) Delete(context.Context, dspipe.DeleteParams) (bool, error) {
	return false, r.fail("Delete")
}
func (r refusing) Ensure(context.Context, dspipe.NetworkParams) (map[string]any, error) {
	return nil, r.fail("Network.Ensure")
}

type refusingNet struct{ refusing }

func (r refusingNet) Delete(context.Context, dspipe.NetworkParams) (bool, error) {
	return false, r.fail("Network.Delete")
}

func TestAdoptTouchesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, adminPW := localtest.StartServer(t, ds.EngineRedis)
	dataDir := t.TempDir()
	b := setup(t, dataDir, func(*local.Provider) map[string]dspipe.Driver {
		return map[string]dspipe.Driver{"local": {Servers: refusing{t}, Network: refusingNet{refusing{t}}}}
	})
	raw, _ := json.Marshal(map[string]any{"engine": "redis", "host": srv.Host, "port": srv.Port, "adminPassword": adminPW})
	cfg, err := dspipe.PrepareAdopt(ctx, b.jobSecrets("job_adopt"), "job_adopt", raw)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(cfg), adminPW) {
		t.Fatalf("prepared config holds the password: %s", cfg)
	}
	j := newJob("job_adopt", job.ModeAdopt, json.RawMessage(cfg))
	if err := b.pipe.Validate(ctx, j); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	b.apply(t, j)
	conn := infraOf[dspipe.ConnectionInfra](t, j, dspipe.InfraConnection)
	if conn.Port != srv.Port || conn.User != "default" {
		t.Fatalf("connection = %+v", conn)
	}
	if strings.Contains(string(j.Infra), adminPW) || strings.Contains(b.logs.String(), adminPW) {
		t.Fatal("password in infra or logs")
	}
	b.teardown(t, j)
	if err := ds.Check(ctx, srv.Admin(adminPW)); err != nil {
		t.Fatalf("adopted server harmed by teardown: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(dataDir, "datastores")); len(entries) != 0 {
		t.Fatalf("adopt created local servers: %v", entries)
	}

	// Wrong credentials are the user's to fix, not something to retry.
	raw, _ = json.Marshal(map[string]any{"engine": "redis", "host": srv.Host, "port": srv.Port, "adminPassword": "wrong-password"})
	cfg, err = dspipe.PrepareAdopt(ctx, b.jobSecrets("job_adopt_bad"), "job_adopt_bad", raw)
	if err != nil {
		t.Fatal(err)
	}
	bad := newJob("job_adopt_bad", job.ModeAdopt, json.RawMessage(cfg))
	var last error
	for _, s := range b.pipe.Steps(bad) {
		if last = b.do(t, bad, s, false); last != nil {
			break
		}
	}
	if fault.ClassOf(last) != job.ClassUserAction {
		t.Fatalf("adopt with a wrong password = %v, want user_action", last)
	}
}

// slowGone is a driver whose deletes take a few looks to finish, as a cloud's do.
type slowGone struct {
	dspipe.Servers
	net        dspipe.Network
	looks      int
	server, nw *int
}

func (s slowGone) Delete(ctx context.Context, p dspipe.DeleteParams) (bool, error) {
	if *s.server++; *s.server < s.looks {
		return false, nil
	}
	return s.Servers.Delete(ctx, p)
}

type slowGoneNet struct{ slowGone }

func (s slowGoneNet) Ensure(ctx context.Context, p dspipe.NetworkParams) (map[string]any, error) {
	return s.net.Ensure(ctx, p)
}

func (s slowGoneNet) Delete(ctx context.Context, p dspipe.NetworkParams) (bool, error) {
	if *s.nw++; *s.nw < s.looks {
		return false, nil
	}
	return s.net.Delete(ctx, p)
}

// A server or network the driver has not finished deleting keeps its undo step waiting (the
// record stays in infra) until the driver says it is gone; only then is the step done.
func TestUndoWaitsUntilGone(t *testing.T) {
	t.Parallel()
	localtest.RequireEngine(t, ds.EngineRedis)
	var servers, networks int
	b := setup(t, t.TempDir(), func(p *local.Provider) map[string]dspipe.Driver {
		d := p.Driver()
		sg := slowGone{Servers: d.Servers, net: d.Network, looks: 3, server: &servers, nw: &networks}
		return map[string]dspipe.Driver{"local": {Servers: sg, Network: slowGoneNet{sg}}}
	})
	j := newJob("job_slowgone", job.ModeCreate, map[string]any{"engine": "redis"})
	b.apply(t, j)
	for _, s := range b.pipe.Steps(j) {
		if s.Name != dspipe.StepCreateServer {
			continue
		}
		res, err := s.Undo(context.Background(), &pipeline.Run{Job: j, Step: s.Name, Attempt: 1, Logger: b.logger})
		if _, forgets := res.Infra[dspipe.InfraServer]; err != nil || res.Outcome != pipeline.OutcomeWait || forgets {
			t.Fatalf("first undo of a server not yet gone = %+v, %v; want a wait that keeps the record", res, err)
		}
	}
	b.teardown(t, j)
	if servers != 3 || networks != 3 {
		t.Fatalf("deletes asked %d (server) and %d (network) times; want 3 each, the last one gone", servers, networks)
	}
	if ok, _ := (&pipeline.Run{Job: j}).Infra(dspipe.InfraServer, new(map[string]any)); ok {
		t.Fatalf("server still recorded after teardown: %s", j.Infra)
	}
}

// keyMaker is a cloud that makes its own admin credential, as Azure Cache for Redis does: it
// ignores the password it is given and reports its key once the server is ready.
type keyMaker struct {
	key    string
	looks  *int
	gotPWs *[]string
}

func (k keyMaker) Check(context.Context, dspipe.CheckParams) (dspipe.CheckResult, error) {
	return dspipe.CheckResult{Version: "7"}, nil
}
func (k keyMaker) Create(context.Context, dspipe.CreateParams) (dspipe.ServerInfo, error) {
	return dspipe.ServerInfo{ID: "cache-1", Host: "cache-1.example", Port: 6380, AdminUser: "default", Version: "7"}, nil
}
func (k keyMaker) Status(_ context.Context, p dspipe.StatusParams) (dspipe.ServerStatus, error) {
	*k.gotPWs = append(*k.gotPWs, p.AdminPassword)
	if *k.looks++; *k.looks < 2 {
		return dspipe.ServerStatus{Message: "creating"}, nil
	}
	return dspipe.ServerStatus{Ready: true, AdminPassword: k.key}, nil
}
func (k keyMaker) Delete(context.Context, dspipe.DeleteParams) (bool, error) { return true, nil }

type noNetwork struct{}

func (noNetwork) Ensure(context.Context, dspipe.NetworkParams) (map[string]any, error) {
	return map[string]any{}, nil
}
func (noNetwork) Delete(context.Context, dspipe.NetworkParams) (bool, error) { return true, nil }

// A key the cloud made replaces the stored admin password under the same reference, and goes
// to neither infra nor the logs.
func TestCloudMadePasswordReplacesStoredSecret(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const key = "Q2xvdWRNYWRlS2V5Rm9yVGhlQ2FjaGUxMjM0NTY3OD0="
	var looks int
	var got []string
	b := setup(t, t.TempDir(), func(*local.Provider) map[string]dspipe.Driver {
		return map[string]dspipe.Driver{"local": {Servers: keyMaker{key: key, looks: &looks, gotPWs: &got}, Network: noNetwork{}}}
	})
	j := newJob("job_cloudkey", job.ModeCreate, map[string]any{"engine": "redis"})
	b.apply(t, j)

	cred := infraOf[map[string]any](t, j, dspipe.InfraCredentials)
	conn := infraOf[dspipe.ConnectionInfra](t, j, dspipe.InfraConnection)
	if conn.SecretRef == "" || conn.SecretRef != cred["secretRef"] {
		t.Fatalf("connection secret %q, credentials %v: want the same reference", conn.SecretRef, cred["secretRef"])
	}
	pw, err := b.jobSecrets(j.ID).Get(ctx, conn.SecretRef)
	if err != nil {
		t.Fatal(err)
	}
	if pw != key {
		t.Fatalf("stored admin password = %q, want the key the cloud made", pw)
	}
	if len(got) < 2 || got[0] == key {
		t.Fatalf("Status saw passwords %q; want the generated one first", got)
	}
	if strings.Contains(string(j.Infra), key) || strings.Contains(b.logs.String(), key) {
		t.Fatal("the cloud's key is in infra or logs")
	}
	// A re-run finds the key already stored and keeps it.
	b.apply(t, j)
	if again, _ := b.jobSecrets(j.ID).Get(ctx, conn.SecretRef); again != key || got[len(got)-1] != key {
		t.Fatalf("after a re-run: stored %q, Status given %q", again, got[len(got)-1])
	}
}
