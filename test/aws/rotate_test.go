package aws

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/job"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
)

// TestRotateRDSAdminCredentials: POST rotate-credentials on a live RDS datastore changes the
// instance's master password through ModifyDBInstance (no connection to the server, which
// moto does not run), moves the admin endpoint to a new Secrets Manager secret holding it,
// and retires the old one; the password is in no API answer.
func TestRotateRDSAdminCredentials(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	var pp passwordProxy
	proxy := pp.start(t, motoEnv.Endpoint(t))
	dataDir := t.TempDir()
	s := apptest.Start(t, app.Options{DataDir: dataDir, PollInterval: 100 * time.Millisecond,
		Datastores: app.DatastoreOptions{Poll: 100 * time.Millisecond}, AWS: app.AWSOptions{Poll: 100 * time.Millisecond}})
	e := newEnvOn(t, s, proxy, true)
	e.dataDir = dataDir
	j := e.create(t, "datastore", `{"engine":"postgres","version":"16.3","instanceClass":"db.t3.micro","allocatedStorageGB":20}`)
	j = waitStatus(t, e.s.Client, j.ID, job.StatusCompleted)
	var before datastoreInfra
	if err := json.Unmarshal(j.Infra, &before); err != nil {
		t.Fatal(err)
	}
	sm := secretsmanager.NewFromConfig(e.p.Config())
	secret := func(ref string) string {
		t.Helper()
		out, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &ref})
		if err != nil {
			t.Fatalf("secret %s: %v", ref, err)
		}
		return awssdk.ToString(out.SecretString)
	}
	oldPW := secret(before.Credentials.SecretRef)
	if sent := pp.passwords(); len(sent) != 0 {
		t.Fatalf("%d master password changes before the rotation", len(sent))
	}

	var queued job.Job
	if err := e.s.Client.Do(ctx, http.MethodPost, "/api/provisioning-jobs/"+j.ID+"/rotate-credentials", map[string]any{"target": "admin"}, &queued); err != nil {
		t.Fatalf("rotate-credentials: %v", err)
	}
	j = waitUpdated(t, e, j.ID, queued.Version)
	st, ok, err := dspipe.RotationStateOf(j)
	if err != nil || !ok || !st.Changed || !st.Retired || st.NewRef == before.Credentials.SecretRef {
		t.Fatalf("rotation state %+v (%v)", st, err)
	}
	var after datastoreInfra
	if err := json.Unmarshal(j.Infra, &after); err != nil {
		t.Fatal(err)
	}
	if after.Connection.SecretRef != st.NewRef || after.Credentials.SecretRef != st.NewRef {
		t.Fatalf("after the rotation the endpoint names %q and the credentials %q, want %q", after.Connection.SecretRef, after.Credentials.SecretRef, st.NewRef)
	}
	newPW := secret(st.NewRef)
	if newPW == oldPW || len(newPW) < 16 {
		t.Fatal("the new secret holds no new generated password")
	}
	sent := pp.passwords()
	if len(sent) == 0 {
		t.Fatal("no ModifyDBInstance MasterUserPassword reached RDS")
	}
	for _, pw := range sent {
		if pw != newPW {
			t.Fatal("ModifyDBInstance sent a master password other than the new secret's")
		}
	}
	if _, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &before.Credentials.SecretRef}); err == nil {
		t.Fatal("the old admin secret outlived the rotation")
	}
	e.noPassword(t, j, newPW)
}

// passwordProxy forwards to moto and records the MasterUserPassword of every RDS
// ModifyDBInstance that passes (moto never shows an instance's password back).
type passwordProxy struct {
	mu   sync.Mutex
	sent []string
}

func (pp *passwordProxy) start(t *testing.T, endpoint string) string {
	t.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if form, err := url.ParseQuery(string(body)); err == nil && form.Get("Action") == "ModifyDBInstance" && form.Has("MasterUserPassword") {
			pp.mu.Lock()
			pp.sent = append(pp.sent, form.Get("MasterUserPassword"))
			pp.mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func (pp *passwordProxy) passwords() []string {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	return slices.Clone(pp.sent)
}
