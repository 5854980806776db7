package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/provider/local"
	"github.com/groundworkhq/groundwork/internal/provider/local/localtest"
)

// The CLI drives databases, connections and secrets against a running server with a real
// Redis datastore: create, list, reveal (the value works as the owner's password), delete.
func TestDatastoresCLI(t *testing.T) {
	t.Parallel()
	localtest.RequireEngine(t, datastore.EngineRedis)
	srv := apptest.Start(t, app.Options{DataDir: localtest.DataDir(t), Datastores: app.DatastoreOptions{Poll: 100 * time.Millisecond}})
	ctx := context.Background()
	sp := srv.Space(t, "cli")
	prov, err := local.New(local.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// The catalog's default version is a cloud one; the local provider serves what is installed.
	version, err := prov.Installed(ctx, datastore.EngineRedis)
	if err != nil {
		t.Fatal(err)
	}
	var j job.Job
	if err := srv.Client.Do(ctx, "POST", "/api/provisioning-jobs", map[string]any{"spaceID": sp.ID, "kind": "datastore",
		"config": map[string]any{"engine": "redis", "version": version}}, &j); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Client.Do(ctx, "DELETE", "/api/provisioning-jobs/"+j.ID, nil, nil)
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			var got job.Job
			if err := srv.Client.Do(ctx, "GET", "/api/provisioning-jobs/"+j.ID, nil, &got); err != nil || got.Status == job.StatusDeleted {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Error("job not torn down")
	})
	if got, err := srv.Client.Watch(ctx, j.ID, func(*job.Job) {}); err != nil || got.Status != job.StatusCompleted {
		t.Fatalf("job: %v %+v", err, got)
	}

	out, err := run(t, srv.URL, srv.Token, "-o", "json", "databases", "create", j.ID, "checkout", "--owner", "checkout_app")
	if err != nil {
		t.Fatalf("databases create: %v\n%s", err, out)
	}
	var db datastore.Database
	if err := json.Unmarshal([]byte(out), &db); err != nil || db.Status != datastore.StatusReady {
		t.Fatalf("databases create: %v %s", err, out)
	}
	if out, err := run(t, srv.URL, srv.Token, "databases", "list", j.ID); err != nil || !strings.Contains(out, db.ID) || !strings.Contains(out, "checkout_app") {
		t.Fatalf("databases list: %v\n%s", err, out)
	}
	out, err = run(t, srv.URL, srv.Token, "-o", "json", "connections", "create", j.ID, "--database", db.ID)
	if err != nil {
		t.Fatalf("connections create: %v\n%s", err, out)
	}
	var c datastore.Connection
	if err := json.Unmarshal([]byte(out), &c); err != nil || c.Endpoint.SecretRef == "" {
		t.Fatalf("connections create: %v %s", err, out)
	}
	pw, err := run(t, srv.URL, srv.Token, "secrets", "reveal", c.Endpoint.SecretRef)
	if err != nil {
		t.Fatalf("secrets reveal: %v\n%s", err, pw)
	}
	user := datastore.Conn{Engine: datastore.EngineRedis, Host: c.Endpoint.Host, Port: c.Endpoint.Port, User: c.Endpoint.User,
		Password: strings.TrimSpace(pw), Database: c.Endpoint.Database}
	if err := localtest.WriteRead(ctx, user); err != nil {
		t.Fatalf("the revealed password does not work: %v", err)
	}
	if out, err := run(t, srv.URL, srv.Token, "connections", "list", j.ID, "--database", db.ID); err != nil || !strings.Contains(out, c.ID) {
		t.Fatalf("connections list: %v\n%s", err, out)
	}
	if out, err := run(t, srv.URL, srv.Token, "connections", "delete", j.ID, c.ID, "--database", db.ID); err != nil {
		t.Fatalf("connections delete: %v\n%s", err, out)
	}
	if out, err := run(t, srv.URL, srv.Token, "databases", "delete", j.ID, db.ID); err != nil {
		t.Fatalf("databases delete: %v\n%s", err, out)
	}
	if err := datastore.Check(ctx, user); !datastore.IsAuthFailure(err) {
		t.Fatalf("owner connects after the delete: %v", err)
	}
	if _, err := run(t, srv.URL, srv.Token, "secrets", "reveal", c.Endpoint.SecretRef); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("reveal after the delete: %v", err)
	}
}
