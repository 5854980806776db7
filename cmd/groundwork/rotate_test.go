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
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/provider/local"
	"github.com/groundworkhq/groundwork/internal/provider/local/localtest"
)

// credentials rotate against a running server with a real Redis datastore: a request naming no
// credential is refused naming the field; --target admin --watch follows the rotation until the
// job records it retired, and the new password is the one the server takes.
func TestCredentialsRotateCLI(t *testing.T) {
	t.Parallel()
	localtest.RequireEngine(t, datastore.EngineRedis)
	srv := apptest.Start(t, app.Options{DataDir: localtest.DataDir(t), Datastores: app.DatastoreOptions{Poll: 100 * time.Millisecond}})
	ctx := context.Background()
	sp := srv.Space(t, "cli")
	prov, err := local.New(local.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
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
		_, _ = srv.Client.Watch(ctx, j.ID, func(*job.Job) {})
	})
	if got, err := srv.Client.Watch(ctx, j.ID, func(*job.Job) {}); err != nil || got.Status != job.StatusCompleted {
		t.Fatalf("job: %v %+v", err, got)
	}

	if out, err := run(t, srv.URL, srv.Token, "credentials", "rotate", j.ID); err == nil || !strings.Contains(err.Error(), "--target") {
		t.Fatalf("rotate naming nothing: %v\n%s, want a refusal naming target", err, out)
	}
	if out, err := run(t, srv.URL, srv.Token, "credentials", "rotate", j.ID, "--target", "admin", "--watch"); err != nil {
		t.Fatalf("credentials rotate: %v\n%s", err, out)
	}
	var got job.Job
	if err := srv.Client.Do(ctx, "GET", "/api/provisioning-jobs/"+j.ID, nil, &got); err != nil {
		t.Fatal(err)
	}
	st, ok, err := dspipe.RotationStateOf(&got)
	if err != nil || !ok || !st.Retired || got.Status != job.StatusCompleted {
		t.Fatalf("after the rotation: %s %+v (%v)", got.Status, st, err)
	}
	var infra struct {
		Connection datastore.Endpoint `json:"connection"`
	}
	if err := json.Unmarshal(got.Infra, &infra); err != nil || infra.Connection.SecretRef != st.NewRef {
		t.Fatalf("the admin endpoint holds %q, want %q (%v)", infra.Connection.SecretRef, st.NewRef, err)
	}
}
