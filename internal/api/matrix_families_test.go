package api

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/provider/kube"
	"github.com/groundworkhq/groundwork/internal/provider/local"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
)

// The datastore routes act on a real server: creating or dropping a database runs SQL on it.
// One PostgreSQL serves the whole package (starting one per cell would take minutes); every
// datastore job the tests seed points its admin endpoint at it, and the databases they create
// have names unique in the process.
const sharedPGJob = "job_api_matrix"

var sharedPG struct {
	once    sync.Once
	prov    *local.Provider
	dir     string
	srv     local.Server
	pw      string
	missing error // PostgreSQL is not installed
	err     error // it is, but would not start
}

func TestMain(m *testing.M) {
	code := m.Run()
	// The local provider detaches its servers so that they outlive Groundwork: this one must
	// be stopped explicitly.
	if sharedPG.prov != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := sharedPG.prov.Delete(ctx, sharedPGJob); err != nil {
			fmt.Fprintf(os.Stderr, "stop the shared PostgreSQL: %v\n", err)
		}
		cancel()
	}
	if sharedPG.dir != "" {
		_ = os.RemoveAll(sharedPG.dir)
	}
	os.Exit(code)
}

// sharedPostgres returns the package's PostgreSQL and its admin password, starting it on first
// use. Without PostgreSQL installed the test is skipped, or failed in CI (CI=true), where
// scripts/setup.d/20-datastores.sh installs it.
func sharedPostgres(t *testing.T) (local.Server, string) {
	t.Helper()
	sharedPG.once.Do(startSharedPostgres)
	if sharedPG.missing != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("postgres server not installed in CI: %v", sharedPG.missing)
		}
		t.Skipf("postgres server not installed: %v", sharedPG.missing)
	}
	if sharedPG.err != nil {
		t.Fatalf("shared PostgreSQL: %v", sharedPG.err)
	}
	return sharedPG.srv, sharedPG.pw
}

func startSharedPostgres() {
	dir, err := os.MkdirTemp("", "gw-api-matrix-")
	if err != nil {
		sharedPG.err = err
		return
	}
	sharedPG.dir = dir
	// Run as root, the provider starts PostgreSQL as the postgres account, which must reach
	// the data dir (MkdirTemp makes it 0700).
	if os.Geteuid() == 0 {
		if err := os.Chmod(dir, 0o755); err != nil {
			sharedPG.err = err
			return
		}
	}
	p, err := local.New(local.Options{DataDir: dir})
	if err != nil {
		sharedPG.err = err
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := p.Installed(ctx, datastore.EnginePostgres); err != nil {
		sharedPG.missing = err
		return
	}
	sharedPG.prov = p
	pw := datastore.GeneratePassword()
	spec := local.ServerSpec{JobID: sharedPGJob, Engine: datastore.EnginePostgres, AdminPassword: pw}
	// As the datastore pipeline does: a transient answer (not accepting connections yet, or the
	// process not found) is waited out, and Ensure is asked again, which starts the server anew
	// if it has died. Only a permanent error, or the deadline, ends the wait.
	var srv local.Server
	var last error
	for {
		srv, last = p.Ensure(ctx, spec)
		ok := false
		if last == nil {
			ok, last = p.Ready(ctx, sharedPGJob, pw)
		}
		if ok {
			break
		}
		if last != nil && fault.ClassOf(last) != job.ClassTransient {
			sharedPG.err = fmt.Errorf("start: %w", last)
			return
		}
		select {
		case <-ctx.Done():
			sharedPG.err = fmt.Errorf("not ready: %w (last: %v); server log:\n%s", ctx.Err(), last, readLog(srv.Dir))
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
	sharedPG.srv, sharedPG.pw = srv, pw
}

func readLog(dir string) string {
	if dir == "" {
		return "(no server dir)"
	}
	b, err := os.ReadFile(filepath.Join(dir, "server.log"))
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// pgSeq makes database and owner names unique on the shared server, across the tests that
// share it and across -count runs.
var pgSeq atomic.Int64

func pgName(kind string) string { return fmt.Sprintf("mx_%s_%d", kind, pgSeq.Add(1)) }

// dsJob seeds a completed datastore job in org whose server is the shared PostgreSQL, as the
// datastore pipeline leaves one: the admin endpoint in infra, the admin password in the
// server's secret store.
func (e *accessEnv) dsJob(t *testing.T, org string) *job.Job {
	t.Helper()
	srv, pw := sharedPostgres(t)
	ctx := context.Background()
	id := "job_" + e.uniq()
	ref, err := e.sec.For(secrets.Owner{OrgID: org, Kind: secrets.OwnerJob, ID: id}).Put(ctx, id+"/admin", pw)
	if err != nil {
		t.Fatal(err)
	}
	infra, err := json.Marshal(map[string]any{datastore.InfraConnectionKey: datastore.Endpoint{Engine: datastore.EnginePostgres,
		Host: srv.Host, Port: srv.Port, User: srv.AdminUser, SecretRef: ref}})
	if err != nil {
		t.Fatal(err)
	}
	j := &job.Job{ID: id, OrgID: org, SpaceID: e.space(t, org), Kind: job.KindProvisioning, Family: job.FamilyDatastore,
		Provider: "local", Mode: job.ModeCreate, Config: json.RawMessage(`{"engine":"postgres"}`), Infra: infra,
		Steps: []job.StepRecord{{Name: "register", Status: job.StepDone}}, Status: job.StatusCompleted, Phase: job.PhaseApply,
		LeaseTTL: time.Minute, NextRunAt: time.Now()}
	out, err := e.st.CreateJob(ctx, &store.CreateJobParams{Job: j, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// pendingDSJob seeds a datastore job of org that has not run yet: its server does not exist.
func (e *accessEnv) pendingDSJob(t *testing.T, org string) *job.Job {
	t.Helper()
	j := &job.Job{ID: "job_" + e.uniq(), OrgID: org, SpaceID: e.space(t, org), Kind: job.KindProvisioning, Family: job.FamilyDatastore,
		Provider: "local", Mode: job.ModeCreate, Config: json.RawMessage(`{"engine":"postgres"}`), Infra: json.RawMessage(`{}`),
		Steps: []job.StepRecord{{Name: "register", Status: job.StepPending}}, Status: job.StatusQueued, Phase: job.PhaseApply,
		LeaseTTL: time.Minute, NextRunAt: time.Now()}
	out, err := e.st.CreateJob(context.Background(), &store.CreateJobParams{Job: j, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// dsService is the datastore service over the server's own store and secrets, as the API
// builds it for a request of org (without the audit, which belongs to requests).
func (e *accessEnv) dsService(org string) *datastore.Service {
	return datastore.NewService(orgJobs{st: e.st, org: org}, e.st, e.sec, nil, nil)
}

// database creates a database (and its owner) on the job's server.
func (e *accessEnv) database(t *testing.T, org, jobID string) datastore.Database {
	t.Helper()
	d, err := e.dsService(org).CreateDatabase(context.Background(), datastore.CreateDatabaseParams{JobID: jobID, Name: pgName("db"), Owner: pgName("own")})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// connection stores a connection: job-scoped when dbID is "".
func (e *accessEnv) connection(t *testing.T, org, jobID, dbID string) datastore.Connection {
	t.Helper()
	c, err := e.dsService(org).CreateConnection(context.Background(), datastore.CreateConnectionParams{JobID: jobID, DatabaseID: dbID, Name: "app"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// clusterVersion stands in for a Kubernetes API server's /version, the one call registration
// makes to check a credential (install-component's job never runs here: no engine). It serves
// TLS, as client-go sends a bearer token only over TLS, and answers only the token it was
// given, so a registration that does not pass the credential on is refused.
type clusterVersion struct {
	url, token string
	caPEM      string // the server certificate, which is its own CA
}

func newClusterVersion(t *testing.T) *clusterVersion {
	t.Helper()
	c := &clusterVersion{token: "tok-" + fmt.Sprint(time.Now().UnixNano())}
	hs := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer "+c.token {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401}`))
			return
		}
		if r.Method != http.MethodGet || r.URL.Path != "/version" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"major":"1","minor":"31","gitVersion":"v1.31.0"}`))
	}))
	t.Cleanup(hs.Close)
	c.url = hs.URL
	c.caPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hs.Certificate().Raw}))
	return c
}

// json is the "cluster" object of a registration with this server's endpoint and CA.
func (c *clusterVersion) json(token string) string {
	b, _ := json.Marshal(map[string]string{"endpoint": c.url, "caData": c.caPEM, "token": token})
	return string(b)
}

// clusterSpace makes a space of org with a registered cluster, as register-cluster leaves it:
// the credential in the secret store, the space's config naming it.
func (e *accessEnv) clusterSpace(t *testing.T, org string) string {
	t.Helper()
	ctx := context.Background()
	id := "spc_" + e.uniq()
	sc, err := kube.Register(ctx, e.sec.For(ClusterSecrets(org, id)), ClusterSecretName(id), kube.Credentials{Endpoint: e.cluster.url, CAData: []byte(e.cluster.caPEM), Token: e.cluster.token})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := json.Marshal(spaceConfig{Cluster: sc})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.CreateSpace(ctx, &store.Space{ID: id, OrgID: org, Name: id, Provider: "local", Region: "local",
		SpaceType: "kubernetes", Status: SpaceReady, Config: cfg, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return id
}

// spaceClusters finds a space's registered cluster for the component pipeline
// (clusterspace.Resolver is the production one; it imports this package, so it cannot be used here).
type spaceClusters struct{ st store.Store }

func (s spaceClusters) Cluster(ctx context.Context, spaceID string) (kube.SpaceCluster, error) {
	sp, err := s.st.GetSpace(ctx, "", spaceID)
	if err != nil {
		return kube.SpaceCluster{}, err
	}
	sc, ok, err := SpaceClusterOf(sp)
	if err != nil {
		return kube.SpaceCluster{}, err
	}
	if !ok {
		return kube.SpaceCluster{}, fmt.Errorf("space %s has no registered cluster", spaceID)
	}
	return sc, nil
}

// familyFixtures are the matrix fixtures of the datastore and component routes.
func familyFixtures() map[string]fixture {
	const jobs = "/api/provisioning-jobs/"
	return map[string]fixture{
		"GET /api/provisioning-jobs/{id}/databases": {ok: 200, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			return target{path: jobs + e.dsJob(t, org).ID + "/databases"}
		}},
		"POST /api/provisioning-jobs/{id}/databases": {ok: 201, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			return target{path: jobs + e.dsJob(t, org).ID + "/databases",
				body: `{"name":"` + pgName("db") + `","owner":"` + pgName("own") + `"}`, resourceType: "database"}
		}},
		"GET /api/provisioning-jobs/{id}/databases/{dbID}": {ok: 200, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			j := e.dsJob(t, org)
			return target{path: jobs + j.ID + "/databases/" + e.database(t, org, j.ID).ID}
		}},
		"DELETE /api/provisioning-jobs/{id}/databases/{dbID}": {ok: 204, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			j := e.dsJob(t, org)
			d := e.database(t, org, j.ID)
			return target{path: jobs + j.ID + "/databases/" + d.ID, resourceType: "database", resourceID: d.ID}
		}},
		"POST /api/provisioning-jobs/{id}/rotate-credentials": {ok: 202, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			j := e.dsJob(t, org)
			return target{path: jobs + j.ID + "/rotate-credentials", body: `{"target":"admin"}`, resourceType: "provisioning-job", resourceID: j.ID}
		}},
		"GET /api/provisioning-jobs/{id}/connections": {ok: 200, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			j := e.dsJob(t, org)
			e.connection(t, org, j.ID, "")
			return target{path: jobs + j.ID + "/connections"}
		}},
		"POST /api/provisioning-jobs/{id}/connections": {ok: 201, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			return target{path: jobs + e.dsJob(t, org).ID + "/connections", body: `{"name":"app"}`, resourceType: "connection"}
		}},
		"GET /api/provisioning-jobs/{id}/connections/{connID}": {ok: 200, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			j := e.dsJob(t, org)
			return target{path: jobs + j.ID + "/connections/" + e.connection(t, org, j.ID, "").ID}
		}},
		"DELETE /api/provisioning-jobs/{id}/connections/{connID}": {ok: 204, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			j := e.dsJob(t, org)
			c := e.connection(t, org, j.ID, "")
			return target{path: jobs + j.ID + "/connections/" + c.ID, resourceType: "connection", resourceID: c.ID}
		}},
		"GET /api/provisioning-jobs/{id}/databases/{dbID}/connections": {ok: 200, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			j := e.dsJob(t, org)
			d := e.database(t, org, j.ID)
			e.connection(t, org, j.ID, d.ID)
			return target{path: jobs + j.ID + "/databases/" + d.ID + "/connections"}
		}},
		"POST /api/provisioning-jobs/{id}/databases/{dbID}/connections": {ok: 201, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			j := e.dsJob(t, org)
			d := e.database(t, org, j.ID)
			return target{path: jobs + j.ID + "/databases/" + d.ID + "/connections", resourceType: "connection"}
		}},
		"GET /api/provisioning-jobs/{id}/databases/{dbID}/connections/{connID}": {ok: 200, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			j := e.dsJob(t, org)
			d := e.database(t, org, j.ID)
			return target{path: jobs + j.ID + "/databases/" + d.ID + "/connections/" + e.connection(t, org, j.ID, d.ID).ID}
		}},
		"DELETE /api/provisioning-jobs/{id}/databases/{dbID}/connections/{connID}": {ok: 204, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			j := e.dsJob(t, org)
			d := e.database(t, org, j.ID)
			c := e.connection(t, org, j.ID, d.ID)
			return target{path: jobs + j.ID + "/databases/" + d.ID + "/connections/" + c.ID, resourceType: "connection", resourceID: c.ID}
		}},
		"POST /api/secrets/reveal": {ok: 200, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			// A job-scoped connection carries the server's admin endpoint; its reference is what
			// an application would reveal.
			j := e.dsJob(t, org)
			ref := e.connection(t, org, j.ID, "").Endpoint.SecretRef
			_, pw := sharedPostgres(t)
			return target{path: "/api/secrets/reveal", body: `{"ref":"` + ref + `"}`, resourceType: "secret", resourceID: ref,
				check: func(got reply) error {
					if got.body["value"] != pw {
						return errors.New("the answer is not the value behind the reference")
					}
					return nil
				}}
		}},
		"GET /api/catalog/components": {ok: 200, make: func(*testing.T, *accessEnv, string) target {
			return target{path: "/api/catalog/components"}
		}},
		"POST /api/provisioning-jobs/install-component": {ok: 201, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			return target{path: jobs + "install-component", resourceType: "provisioning-job",
				body: `{"spaceID":"` + e.clusterSpace(t, org) + `","componentID":"ingress-nginx","values":{"controller":{"replicaCount":1}}}`}
		}},
		"POST /api/spaces/register-cluster": {ok: 201, crossOrg: true, make: func(t *testing.T, e *accessEnv, org string) target {
			// The cloud account is what ties the request to an org.
			return target{path: "/api/spaces/register-cluster", resourceType: "space",
				body: `{"name":"c","provider":"aws","region":"us-east-1","cloudAccountID":"` + e.account(t, org) +
					`","cluster":` + e.cluster.json(e.cluster.token) + `}`}
		}},
	}
}
