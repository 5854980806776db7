package datastores

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/provider/local"
	"github.com/groundworkhq/groundwork/internal/provider/local/localtest"
	"github.com/groundworkhq/groundwork/internal/secrets"
)

// adoptedJob is the part of a job answer adoption is judged on.
type adoptedJob struct {
	ID      string          `json:"id"`
	Mode    string          `json:"mode"`
	Status  string          `json:"status"`
	Config  json.RawMessage `json:"config"`
	Infra   json.RawMessage `json:"infra"`
	Failure *job.Failure    `json:"failure"`
}

// adoptedInfra is what an adopted job records: references and addresses, never a password.
type adoptedInfra struct {
	Credentials *struct {
		SecretRef string `json:"secretRef"`
		AdminUser string `json:"adminUser"`
		Adopted   bool   `json:"adopted"`
	} `json:"credentials"`
	Server *struct {
		Host    string `json:"host"`
		Port    int    `json:"port"`
		Adopted bool   `json:"adopted"`
	} `json:"server"`
	Connection *datastore.Endpoint `json:"connection"`
}

// Adopt mode through the real server, for each job store and engine: a server the test owns
// (started in the test's own directory, not Groundwork's) is registered with its host, port,
// admin user and password given once; the job completes without Groundwork starting anything;
// the password is only in the secret store (the job keeps a reference; no answer, log or job
// store holds it); a database made through the API works for its owner; a wrong password fails
// the job as the user's to fix.
//
// Teardown of an adopted datastore touches nothing on the server: the server is the
// customer's, and so is what lives in it, including the databases and users Groundwork made
// there (the reference: "teardown is a no-op ... only removes [our] pointer; the underlying
// datastore stays running"). Groundwork forgets its records and its copies of the passwords.
// Dropping a database stays possible before teardown, by deleting it explicitly.
func TestAdopt(t *testing.T) {
	t.Parallel()
	requireEngines(t)
	onEachStore(t, func(t *testing.T, e *env, s *server, spaceID string) {
		t.Run("engines", func(t *testing.T) {
			for _, eng := range datastore.Engines {
				t.Run(string(eng), func(t *testing.T) {
					t.Parallel()
					adopt(t, e, s, spaceID, eng)
				})
			}
		})
		// Groundwork ran no server for any adopted job: its datastores folder stayed empty.
		entries, err := os.ReadDir(filepath.Join(e.dataDir, "datastores"))
		if err != nil {
			t.Fatal(err)
		}
		for _, en := range entries {
			t.Errorf("Groundwork's datastores folder holds %s after adopt-only jobs", en.Name())
		}
	})
}

func adopt(t *testing.T, e *env, s *server, spaceID string, eng datastore.Engine) {
	ctx := context.Background()
	own, adminPW := localtest.StartServer(t, eng)
	e.remember(adminPW)
	admin := own.Admin(adminPW)

	// A wrong password: the job fails at its one login, as the user's to fix.
	wrong := datastore.GeneratePassword()
	e.remember(wrong)
	bad := s.adoptJob(t, spaceID, own, wrong)
	if f := s.waitSettled(t, bad.ID); f.Status != "failed" || f.Failure == nil ||
		f.Failure.Code != "AuthFailed" || f.Failure.Class != job.ClassUserAction || f.Failure.Step != "wait_ready" {
		t.Errorf("adopt with a wrong password: %s %+v, want failed with AuthFailed at wait_ready", f.Status, f.Failure)
	}

	j := s.adoptJob(t, spaceID, own, adminPW)
	if j.Mode != "adopt" {
		t.Fatalf("job mode %q, want adopt", j.Mode)
	}
	var cfg map[string]any
	if err := json.Unmarshal(j.Config, &cfg); err != nil {
		t.Fatal(err)
	}
	ref, _ := cfg["adminSecretRef"].(string)
	if _, ok := cfg["adminPassword"]; ok || !secrets.IsRef(ref) {
		t.Fatalf("stored config %s, want adminSecretRef and no adminPassword", j.Config)
	}
	if got := s.waitSettled(t, j.ID); got.Status != "completed" {
		t.Fatalf("adopted job %s: %+v", got.Status, got.Failure)
	}
	done := s.adopted(t, j.ID)
	var infra adoptedInfra
	if err := json.Unmarshal(done.Infra, &infra); err != nil {
		t.Fatal(err)
	}
	if infra.Credentials == nil || infra.Credentials.SecretRef != ref || !infra.Credentials.Adopted ||
		infra.Server == nil || !infra.Server.Adopted || infra.Server.Host != own.Host || infra.Server.Port != own.Port ||
		infra.Connection == nil || infra.Connection.SecretRef != ref || infra.Connection.User != own.AdminUser {
		t.Fatalf("infra %s, want the owned server at %s:%d under reference %s", done.Infra, own.Host, own.Port, ref)
	}
	e.assertNoServer(t, j.ID)
	base := "/api/provisioning-jobs/" + j.ID

	// The reference is the password given, and only admins reach it (through a connection).
	var jobConn connectionView
	s.must(t, http.StatusCreated, "POST", base+"/connections", map[string]string{"name": "ops"}, &jobConn)
	if got := s.reveal(t, jobConn.Connection.SecretRef); got != adminPW {
		t.Error("the adopted job's admin connection reveals another password than the one given")
	}

	var db databaseView
	s.must(t, http.StatusCreated, "POST", base+"/databases", map[string]string{"name": "checkout", "owner": "checkout_app"}, &db)
	if db.Status != datastore.StatusReady || db.Connection.Host != own.Host || db.Connection.Port != own.Port {
		t.Fatalf("database = %+v, want ready on %s:%d", db, own.Host, own.Port)
	}
	var conn connectionView
	s.must(t, http.StatusCreated, "POST", base+"/databases/"+db.ID+"/connections", nil, &conn)
	user := datastore.Conn{Engine: eng, Host: conn.Connection.Host, Port: conn.Connection.Port, User: conn.Connection.User,
		Password: s.reveal(t, conn.Connection.SecretRef), Database: conn.Connection.Database}
	if user.User != "checkout_app" || user.Database != "checkout" {
		t.Fatalf("connection = %+v", conn.Connection)
	}
	if err := localtest.WriteRead(ctx, user); err != nil {
		t.Fatalf("write and read as checkout_app on the adopted server: %v", err)
	}

	// Teardown of both: the completed job ends deleted; the failed one, its done steps undone,
	// ends cancelled (the engine's word for a job torn down before it completed).
	for id, want := range map[string]string{j.ID: "deleted", bad.ID: "cancelled"} {
		s.must(t, http.StatusAccepted, "DELETE", "/api/provisioning-jobs/"+id, nil, nil)
		s.waitJob(t, id, want)
	}

	// The owned server still runs and answers its admin, and what Groundwork made in it stays.
	if !localtest.Alive(own.PID) {
		t.Fatalf("the adopted server (pid %d) is gone after teardown", own.PID)
	}
	if err := datastore.Check(ctx, admin); err != nil {
		t.Fatalf("the adopted server refuses its admin after teardown: %v", err)
	}
	if err := datastore.Check(ctx, user); err != nil {
		t.Fatalf("checkout_app or its database is gone after teardown: %v", err)
	}
	if err := localtest.WriteRead(ctx, user); err != nil {
		t.Fatalf("write and read as checkout_app after teardown: %v", err)
	}

	// Groundwork's side is forgotten: records, and its copies of both passwords.
	var dbs struct{ Data []databaseView }
	s.must(t, http.StatusOK, "GET", base+"/databases", nil, &dbs)
	var conns struct{ Data []connectionView }
	s.must(t, http.StatusOK, "GET", base+"/connections", nil, &conns)
	if len(dbs.Data) != 0 || len(conns.Data) != 0 {
		t.Errorf("records left after teardown: databases %+v, connections %+v", dbs.Data, conns.Data)
	}
	var badCfg struct {
		AdminSecretRef string `json:"adminSecretRef"`
	}
	if err := json.Unmarshal(bad.Config, &badCfg); err != nil || !secrets.IsRef(badCfg.AdminSecretRef) {
		t.Fatalf("stored config of the failed job %s: %v", bad.Config, err)
	}
	for _, r := range []string{ref, badCfg.AdminSecretRef, conn.Connection.SecretRef} {
		if got := s.call(t, "POST", "/api/secrets/reveal", map[string]string{"ref": r}); got.Status != http.StatusNotFound {
			t.Errorf("reveal of %s after teardown: %d %s, want 404", r, got.Status, got.Raw)
		}
	}
	e.assertNoServer(t, j.ID)
	e.assertNoServer(t, bad.ID)
}

// adoptJob submits an adopt job for the server own, with the admin password given once.
func (s *server) adoptJob(t *testing.T, spaceID string, own local.Server, pw string) adoptedJob {
	t.Helper()
	var j adoptedJob
	s.must(t, http.StatusCreated, "POST", "/api/provisioning-jobs", map[string]any{"spaceID": spaceID, "kind": "datastore", "mode": "adopt",
		"config": map[string]any{"engine": own.Engine, "name": "shop", "host": own.Host, "port": own.Port,
			"adminUser": own.AdminUser, "adminPassword": pw}}, &j)
	return j
}

func (s *server) adopted(t *testing.T, id string) adoptedJob {
	t.Helper()
	var j adoptedJob
	s.must(t, http.StatusOK, "GET", "/api/provisioning-jobs/"+id, nil, &j)
	return j
}

// waitSettled polls the job until it is completed, failed or cancelled.
func (s *server) waitSettled(t *testing.T, id string) adoptedJob {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		j := s.adopted(t, id)
		switch j.Status {
		case "completed", "failed", "cancelled":
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %s after 3 minutes", id, j.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// remember adds a password the test gave Groundwork to the values the leak scan looks for.
func (e *env) remember(v string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.secrets = append(e.secrets, v)
}

// assertNoServer fails when Groundwork runs a server process for the job or keeps anything
// for it under its datastores folder.
func (e *env) assertNoServer(t *testing.T, jobID string) {
	t.Helper()
	if procs := e.serverProcesses(t, jobID); len(procs) != 0 {
		t.Errorf("Groundwork runs server processes %v for adopted job %s", procs, jobID)
	}
	entries, err := os.ReadDir(filepath.Join(e.dataDir, "datastores"))
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		if strings.Contains(en.Name(), jobID) {
			t.Errorf("Groundwork keeps %s under its datastores folder for adopted job %s", en.Name(), jobID)
		}
	}
}
