package datastores

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/provider/local/localtest"
	"github.com/groundworkhq/groundwork/internal/testenv/pgtest"
)

type databaseView struct {
	ID         string             `json:"id"`
	Name       string             `json:"name"`
	Owner      string             `json:"owner"`
	Status     string             `json:"status"`
	Connection datastore.Endpoint `json:"connection"`
}

type connectionView struct {
	ID         string             `json:"id"`
	DatabaseID string             `json:"databaseID"`
	Connection datastore.Endpoint `json:"connection"`
}

type auditPage struct {
	Total int `json:"total"`
	Data  []struct {
		Actor      string `json:"actor"`
		ResourceID string `json:"resourceID"`
	} `json:"data"`
}

func requireEngines(t *testing.T) {
	t.Helper()
	for _, e := range datastore.Engines {
		localtest.RequireEngine(t, e)
	}
}

// token makes a user with role and returns an API token of theirs.
func (s *server) token(t *testing.T, name, role string) string {
	t.Helper()
	email := name + "@example.com"
	s.must(t, http.StatusCreated, "POST", "/api/users", map[string]string{"email": email, "roleID": role}, nil)
	var tok struct {
		Secret string `json:"secret"`
	}
	s.must(t, http.StatusCreated, "POST", "/api/tokens", map[string]string{"name": name, "email": email, "expiresIn": "1h"}, &tok)
	return tok.Secret
}

// For each engine, through the real server: job → completed; hostile names refused with the
// field named and nothing created; database checkout owned by checkout_app; its connection's
// secret revealed (admins only, audited) and used to write and read as that user; the
// database deleted and the user locked out; the job torn down with its server process and
// data gone. Then nothing the server wrote, logged or answered holds a generated password.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	requireEngines(t)
	onEachStore(t, func(t *testing.T, e *env, s *server, spaceID string) {
		editor, viewer := s.token(t, "editor", "role_editor"), s.token(t, "viewer", "role_viewer")
		hostileJobs(t, s, spaceID)
		t.Run("engines", func(t *testing.T) {
			for _, eng := range datastore.Engines {
				t.Run(string(eng), func(t *testing.T) {
					t.Parallel()
					lifecycle(t, e, s, spaceID, eng, editor, viewer)
				})
			}
		})
	})
}

// hostileJobs: a job whose name breaks the rules is refused naming config.name, and no job
// is stored.
func hostileJobs(t *testing.T, s *server, spaceID string) {
	t.Helper()
	for _, bad := range []string{`x"; DROP DATABASE postgres; --`, strings.Repeat("n", 200), "ünïcødé"} {
		r := s.call(t, "POST", "/api/provisioning-jobs", map[string]any{"spaceID": spaceID, "kind": "datastore",
			"config": map[string]any{"engine": "postgres", "name": bad}})
		if r.Status != http.StatusBadRequest || firstField(r) != "config.name" {
			t.Errorf("job named %q: %d %s, want 400 naming config.name", bad, r.Status, r.Raw)
		}
	}
	var list struct {
		Data []jobView `json:"data"`
	}
	s.must(t, http.StatusOK, "GET", "/api/provisioning-jobs", nil, &list)
	if len(list.Data) != 0 {
		t.Errorf("refused jobs were stored: %+v", list.Data)
	}
}

func lifecycle(t *testing.T, e *env, s *server, spaceID string, eng datastore.Engine, editor, viewer string) {
	ctx := context.Background()
	jobID := s.createJob(t, spaceID, eng)
	s.waitJob(t, jobID, "completed")
	procs := e.serverProcesses(t, jobID)
	if len(procs) != 1 {
		t.Fatalf("%d server processes for %s, want 1", len(procs), jobID)
	}
	base := "/api/provisioning-jobs/" + jobID

	// Hostile names: 400 naming the field, nothing created.
	for _, bad := range []struct{ name, owner, field string }{
		{`x"; DROP DATABASE postgres; --`, "x_app", "name"},
		{strings.Repeat("d", 200), "x_app", "name"},
		{"ünïcødé", "x_app", "name"},
		{"okname", `a'; DROP USER root; --`, "owner"},
		{"okname", strings.Repeat("o", 200), "owner"},
	} {
		r := s.call(t, "POST", base+"/databases", map[string]string{"name": bad.name, "owner": bad.owner})
		if r.Status != http.StatusBadRequest || firstField(r) != bad.field {
			t.Errorf("database %q owned by %q: %d %s, want 400 naming %s", bad.name, bad.owner, r.Status, r.Raw, bad.field)
		}
	}
	var dbs struct{ Data []databaseView }
	s.must(t, http.StatusOK, "GET", base+"/databases", nil, &dbs)
	if len(dbs.Data) != 0 {
		t.Fatalf("hostile requests created databases: %+v", dbs.Data)
	}

	// RBAC: a viewer may not create databases; an editor may not reveal.
	if r := s.callAs(t, viewer, "POST", base+"/databases", map[string]string{"name": "checkout", "owner": "checkout_app"}); r.Status != http.StatusForbidden {
		t.Errorf("viewer creates a database: %d %s", r.Status, r.Raw)
	}

	var db databaseView
	s.must(t, http.StatusCreated, "POST", base+"/databases", map[string]string{"name": "checkout", "owner": "checkout_app"}, &db)
	if db.Status != datastore.StatusReady || db.Connection.User != "checkout_app" || db.Connection.Database != "checkout" {
		t.Fatalf("database = %+v", db)
	}
	var again databaseView
	s.must(t, http.StatusOK, "POST", base+"/databases", map[string]string{"name": "checkout", "owner": "checkout_app"}, &again)
	if again.ID != db.ID {
		t.Fatalf("the same create again made %s, want %s", again.ID, db.ID)
	}
	var conn connectionView
	s.must(t, http.StatusCreated, "POST", base+"/databases/"+db.ID+"/connections", nil, &conn)
	if conn.DatabaseID != db.ID || conn.Connection.SecretRef == "" {
		t.Fatalf("connection = %+v", conn)
	}
	if r := s.callAs(t, editor, "POST", "/api/secrets/reveal", map[string]string{"ref": conn.Connection.SecretRef}); r.Status != http.StatusForbidden {
		t.Errorf("editor reveals: %d %s", r.Status, r.Raw)
	}
	pw := s.reveal(t, conn.Connection.SecretRef)
	var audits auditPage
	s.must(t, http.StatusOK, "GET", "/api/audit-logs?action=secret.reveal&resourceID="+url.QueryEscape(conn.Connection.SecretRef), nil, &audits)
	if audits.Total != 1 {
		t.Errorf("%d audit entries for the reveal, want 1", audits.Total)
	}
	s.must(t, http.StatusOK, "GET", "/api/audit-logs?action=database.create&resourceID="+db.ID, nil, &audits)
	if audits.Total != 1 {
		t.Errorf("%d audit entries for the database, want 1", audits.Total)
	}

	// The admin password is revealed through a job-scoped connection (and joins the scan).
	var jobConn connectionView
	s.must(t, http.StatusCreated, "POST", base+"/connections", map[string]string{"name": "ops"}, &jobConn)
	s.reveal(t, jobConn.Connection.SecretRef)

	user := datastore.Conn{Engine: eng, Host: conn.Connection.Host, Port: conn.Connection.Port, User: conn.Connection.User,
		Password: pw, Database: conn.Connection.Database}
	if err := localtest.WriteRead(ctx, user); err != nil {
		t.Fatalf("write and read as checkout_app: %v", err)
	}

	// Deleting the connection keeps the user; deleting the database drops it.
	s.must(t, http.StatusNoContent, "DELETE", base+"/databases/"+db.ID+"/connections/"+conn.ID, nil, nil)
	if err := datastore.Check(ctx, user); err != nil {
		t.Fatalf("user gone with its connection: %v", err)
	}
	s.must(t, http.StatusNoContent, "DELETE", base+"/databases/"+db.ID, nil, nil)
	if err := datastore.Check(ctx, user); !datastore.IsAuthFailure(err) {
		t.Fatalf("checkout_app connects after the delete: %v", err)
	}
	s.must(t, http.StatusNotFound, "GET", base+"/databases/"+db.ID, nil, nil)
	if r := s.call(t, "POST", "/api/secrets/reveal", map[string]string{"ref": conn.Connection.SecretRef}); r.Status != http.StatusNotFound {
		t.Errorf("reveal of a dropped owner's secret: %d %s", r.Status, r.Raw)
	}

	// Teardown: the job ends deleted, its server process and data are gone.
	s.must(t, http.StatusAccepted, "DELETE", base, nil, nil)
	s.waitJob(t, jobID, "deleted")
	localtest.WaitGone(t, procs[0])
	if _, err := os.Stat(filepath.Join(e.dataDir, "datastores", jobID)); !os.IsNotExist(err) {
		t.Errorf("data of %s left after teardown: %v", jobID, err)
	}
	var conns struct{ Data []connectionView }
	s.must(t, http.StatusOK, "GET", base+"/connections", nil, &conns)
	if len(conns.Data) != 0 {
		t.Errorf("connections left after teardown: %+v", conns.Data)
	}
}

// scanDump dumps the PostgreSQL job store and looks for the passwords.
func scanDump(t *testing.T, e *env) {
	t.Helper()
	bin, err := pgtest.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(bin, "pg_dump"), "--no-owner", e.db).Output()
	if err != nil {
		t.Fatalf("pg_dump: %v", err)
	}
	if !strings.Contains(string(out), "datastore_databases") {
		t.Fatal("the dump holds no datastore tables; it proves nothing")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, v := range e.secrets {
		if strings.Contains(string(out), v) {
			t.Error("the PostgreSQL job store holds a generated password")
		}
	}
}

// SIGKILL of Groundwork after a server process started but before create_server's checkpoint,
// then again after CREATE DATABASE/CREATE USER ran but before the record said ready: after each
// restart every job completes with exactly one server process, and one working database.
func TestCrash(t *testing.T) {
	t.Parallel()
	requireEngines(t)
	e := newEnv(t, "")
	s := e.start("create_server")
	spaceID := s.space(t)
	ids := map[datastore.Engine]string{}
	for _, eng := range datastore.Engines {
		ids[eng] = s.createJob(t, spaceID, eng)
	}
	all := func() []string {
		var out []string
		for _, id := range ids {
			out = append(out, id)
		}
		return out
	}
	e.waitMarkers(t, s, all()...)
	before := map[string][]int{}
	for _, id := range ids {
		before[id] = e.serverProcesses(t, id)
		if len(before[id]) != 1 {
			t.Fatalf("%d server processes for %s before the crash", len(before[id]), id)
		}
	}
	s.kill()
	for _, id := range all() {
		_ = os.Remove(filepath.Join(e.dir, "markers", id))
	}

	// Restart, stopping this time inside database creation.
	s = e.start("database_ready")
	for eng, id := range ids {
		s.waitJob(t, id, "completed")
		if got := e.serverProcesses(t, id); len(got) != 1 || got[0] != before[id][0] {
			t.Fatalf("%s: server processes %v after the restart, want the one from before (%v)", eng, got, before[id])
		}
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The answer never comes: the server is killed mid-request.
			req, _ := http.NewRequest("POST", s.addr+"/api/provisioning-jobs/"+id+"/databases",
				strings.NewReader(`{"name":"checkout","owner":"checkout_app"}`))
			req.Header.Set("Authorization", "Bearer "+bootstrapToken)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	e.waitMarkers(t, s, all()...)
	s.kill()
	wg.Wait()

	// Restart: the server finishes the databases itself; the client's retry answers the same one.
	s = e.start("")
	for eng, id := range ids {
		base := "/api/provisioning-jobs/" + id
		deadline := time.Now().Add(2 * time.Minute)
		var dbs struct{ Data []databaseView }
		for {
			s.must(t, http.StatusOK, "GET", base+"/databases", nil, &dbs)
			if len(dbs.Data) == 1 && dbs.Data[0].Status == datastore.StatusReady {
				break
			}
			if len(dbs.Data) != 1 || time.Now().After(deadline) {
				t.Fatalf("%s: databases %+v, want one that becomes ready", eng, dbs.Data)
			}
			time.Sleep(100 * time.Millisecond)
		}
		var db databaseView
		s.must(t, http.StatusOK, "POST", base+"/databases", map[string]string{"name": "checkout", "owner": "checkout_app"}, &db)
		if db.ID != dbs.Data[0].ID {
			t.Fatalf("%s: the retried create answered %s, want %s", eng, db.ID, dbs.Data[0].ID)
		}
		var conn connectionView
		s.must(t, http.StatusCreated, "POST", base+"/databases/"+db.ID+"/connections", nil, &conn)
		pw := s.reveal(t, conn.Connection.SecretRef)
		user := datastore.Conn{Engine: eng, Host: conn.Connection.Host, Port: conn.Connection.Port, User: "checkout_app", Password: pw, Database: "checkout"}
		if err := localtest.WriteRead(context.Background(), user); err != nil {
			t.Fatalf("%s: write and read as checkout_app after the crash: %v", eng, err)
		}
		if got := e.serverProcesses(t, id); len(got) != 1 {
			t.Fatalf("%s: %d server processes, want 1", eng, len(got))
		}
	}
	for eng, id := range ids {
		s.must(t, http.StatusAccepted, "DELETE", "/api/provisioning-jobs/"+id, nil, nil)
		s.waitJob(t, id, "deleted")
		localtest.WaitGone(t, before[id][0])
		if got := e.serverProcesses(t, id); len(got) != 0 {
			t.Errorf("%s: server processes %v after teardown", eng, got)
		}
	}
	s.stop()
	e.scan(t)
}
