package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/testenv/deployctl"
	"github.com/groundworkhq/groundwork/internal/testenv/kubeenv"
)

// The CLI registers a real API server as a space (from CA and token files, and from a
// kubeconfig), lists the catalog, installs the test component with --set values, is refused
// values outside the schema with the field named, and uninstalls.
func TestComponentsCLI(t *testing.T) {
	t.Parallel()
	env := kubeenv.Start(t)
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	testdata, _ := filepath.Abs("../../test/components/testdata")
	srv := apptest.Start(t, app.Options{Components: app.ComponentOptions{
		ChartDir: filepath.Join(testdata, "charts"), CatalogFile: filepath.Join(testdata, "catalog.yaml"),
		ReadyPoll: 200 * time.Millisecond, CheckInterval: -1,
	}})
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caFile, tokenFile, kubeconfig := write("ca.crt", env.CA), write("token", []byte(env.Token+"\n")), write("kubeconfig", env.Kubeconfig())
	cli := func(args ...string) string {
		t.Helper()
		out, err := run(t, srv.URL, srv.Token, args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return out
	}

	var sp store.Space
	out := cli("-o", "json", "spaces", "register-cluster", "--name", "prod", "--endpoint", env.Host, "--ca-file", caFile, "--token-file", tokenFile)
	if err := json.Unmarshal([]byte(out), &sp); err != nil || sp.Status != "ready" || strings.Contains(out, env.Token) {
		t.Fatalf("register-cluster printed %s (%v)", out, err)
	}
	if out := cli("spaces", "register-cluster", "--name", "kc", "--kubeconfig", kubeconfig); !strings.Contains(out, "ready") {
		t.Fatalf("register-cluster --kubeconfig printed %s", out)
	}
	if _, err := run(t, srv.URL, srv.Token, "spaces", "register-cluster", "--name", "both", "--kubeconfig", kubeconfig, "--endpoint", env.Host, "--token-file", tokenFile); err == nil {
		t.Fatal("--kubeconfig with --endpoint was accepted")
	}
	if out := cli("components", "list"); !strings.Contains(out, "demo") || !strings.Contains(out, "0.1.0") {
		t.Fatalf("components list:\n%s", out)
	}
	if _, err := run(t, srv.URL, srv.Token, "components", "install", "demo", "--space", sp.ID, "--set", "replicas=9"); err == nil || !strings.Contains(err.Error(), "values.replicas") {
		t.Fatalf("install with replicas=9: %v, want values.replicas named", err)
	}

	var j job.Job
	out = cli("-o", "json", "components", "install", "demo", "--space", sp.ID, "--set", "message=from the cli", "--set", "replicas=2")
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("install printed %s: %v", out, err)
	}
	waitComponentJob(t, srv, cs, j.ID, job.StatusCompleted)
	cm, err := cs.CoreV1().ConfigMaps("demo-system").Get(t.Context(), "demo-config", metav1.GetOptions{})
	if err != nil || cm.Data["message"] != "from the cli" {
		t.Fatalf("configmap = %v, %v", cm, err)
	}
	cli("components", "uninstall", j.ID)
	waitComponentJob(t, srv, cs, j.ID, job.StatusDeleted)
	if _, err := cs.CoreV1().ConfigMaps("demo-system").Get(t.Context(), "demo-config", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("configmap after uninstall: %v", err)
	}
}

// waitComponentJob polls the job until it has status want, playing the deployment controller (the test
// API server has none) so that the release's deployment becomes available.
func waitComponentJob(t *testing.T, srv *apptest.Server, cs kubernetes.Interface, id string, want job.Status) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var j job.Job
		if err := srv.Client.Do(t.Context(), "GET", "/api/provisioning-jobs/"+id, nil, &j); err != nil {
			t.Fatal(err)
		}
		if j.Status == want {
			return
		}
		if j.Status == job.StatusFailed || time.Now().After(deadline) {
			t.Fatalf("job %s is %s, want %s: %+v", id, j.Status, want, j.Failure)
		}
		deployctl.MarkAvailable(t, cs, "demo-system", "demo")
		time.Sleep(100 * time.Millisecond)
	}
}
