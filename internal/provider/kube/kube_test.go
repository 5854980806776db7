package kube

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	repo "helm.sh/helm/v4/pkg/repo/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/testenv/deployctl"
	"github.com/groundworkhq/groundwork/internal/testenv/kubeenv"
)

const demoChart = "testdata/charts/demo"

func TestCredentialsValidate(t *testing.T) {
	t.Parallel()
	kubeconfigWithExec := []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh}}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`)
	cases := map[string]struct {
		creds Credentials
		want  string
	}{
		"nothing":     {Credentials{}, "endpoint: required"},
		"no token":    {Credentials{Endpoint: "https://127.0.0.1:6443"}, "token: required"},
		"not a URL":   {Credentials{Endpoint: "127.0.0.1:6443", Token: "t"}, "endpoint:"},
		"both forms":  {Credentials{Endpoint: "https://x", Token: "t", Kubeconfig: kubeconfigWithExec}, "not both"},
		"exec plugin": {Credentials{Kubeconfig: kubeconfigWithExec}, "exec plugin"},
		"garbage":     {Credentials{Kubeconfig: []byte("{{")}, "kubeconfig:"},
		"complete":    {Credentials{Endpoint: "https://127.0.0.1:6443", Token: "t", CAData: []byte("x")}, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := ValidateCredentials(tc.creds)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

// TestOnAPIServer runs the installer against one real API server; each subtest works in its
// own namespace.
func TestOnAPIServer(t *testing.T) {
	t.Parallel()
	env := kubeenv.Start(t)
	cluster, err := Connect(Credentials{Endpoint: env.Host, CAData: env.CA, Token: env.Token})
	if err != nil {
		t.Fatal(err)
	}
	in := NewInstaller(cluster, InstallerOptions{CacheDir: t.TempDir()})

	t.Run("ping", func(t *testing.T) {
		t.Parallel()
		v, err := cluster.Ping(t.Context())
		if err != nil || v != kubeenv.Version {
			t.Fatalf("Ping = %q, %v; want %s", v, err, kubeenv.Version)
		}
		viaKubeconfig, err := Connect(Credentials{Kubeconfig: env.Kubeconfig()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := viaKubeconfig.Ping(t.Context()); err != nil {
			t.Fatalf("Ping via kubeconfig: %v", err)
		}
	})

	t.Run("bad token needs the user", func(t *testing.T) {
		t.Parallel()
		bad, err := Connect(Credentials{Endpoint: env.Host, CAData: env.CA, Token: "wrong"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = bad.Ping(t.Context())
		if fe := fault.As(err); fe.Class != job.ClassUserAction || fe.Code != CodeUnauthorized {
			t.Fatalf("Ping with a wrong token = %v (%+v), want user_action %s", err, fe, CodeUnauthorized)
		}
	})

	t.Run("install upgrade uninstall", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		rel := Release{
			Name: "demo", Namespace: "lifecycle",
			Chart:  ChartSource{Path: demoChart, Version: "0.1.0"},
			Values: map[string]any{"message": "first", "replicas": 2},
			Labels: map[string]string{LabelJobID: "job_lifecycle"},
		}
		st, err := in.InstallOrUpgrade(ctx, rel)
		if err != nil {
			t.Fatalf("install: %v", err)
		}
		if !st.Changed || st.Revision != 1 || st.Status != "deployed" || st.ChartVersion != "0.1.0" {
			t.Fatalf("install status = %+v", st)
		}
		cs := cluster.Clientset()
		cm, err := cs.CoreV1().ConfigMaps("lifecycle").Get(ctx, "demo-config", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cm.Data["message"] != "first" || cm.Labels[LabelJobID] != "job_lifecycle" {
			t.Fatalf("configmap = %v %v", cm.Data, cm.Labels)
		}
		dep, err := cs.AppsV1().Deployments("lifecycle").Get(ctx, "demo", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if *dep.Spec.Replicas != 2 || dep.Labels[LabelJobID] != "job_lifecycle" {
			t.Fatalf("deployment replicas %d labels %v", *dep.Spec.Replicas, dep.Labels)
		}
		ns, err := cs.CoreV1().Namespaces().Get(ctx, "lifecycle", metav1.GetOptions{})
		if err != nil || ns.Labels[LabelJobID] != "job_lifecycle" {
			t.Fatalf("namespace labels = %v, %v", ns.Labels, err)
		}

		// A re-run with the same spec changes nothing: same revision, same objects.
		again, err := in.InstallOrUpgrade(ctx, rel)
		if err != nil {
			t.Fatalf("re-run: %v", err)
		}
		if again.Changed || again.Revision != 1 {
			t.Fatalf("re-run status = %+v, want unchanged revision 1", again)
		}
		cm2, _ := cs.CoreV1().ConfigMaps("lifecycle").Get(ctx, "demo-config", metav1.GetOptions{})
		dep2, _ := cs.AppsV1().Deployments("lifecycle").Get(ctx, "demo", metav1.GetOptions{})
		if cm2.ResourceVersion != cm.ResourceVersion || dep2.ResourceVersion != dep.ResourceVersion {
			t.Fatalf("re-run touched objects: configmap %s→%s deployment %s→%s", cm.ResourceVersion, cm2.ResourceVersion, dep.ResourceVersion, dep2.ResourceVersion)
		}

		// Nothing reconciles the Deployment here, so it is not ready until its status says so.
		r, err := in.Ready(ctx, "demo", "lifecycle")
		if err != nil {
			t.Fatal(err)
		}
		if r.Ready || len(r.Pending) != 1 || !strings.HasPrefix(r.Pending[0], "Deployment/demo") {
			t.Fatalf("readiness before the rollout = %+v", r)
		}
		deployctl.MarkAvailable(t, cluster.Clientset(), "lifecycle", "demo")
		if r, err := in.Ready(ctx, "demo", "lifecycle"); err != nil || !r.Ready {
			t.Fatalf("readiness after the rollout = %+v, %v", r, err)
		}

		// Upgrade with new values.
		rel.Values = map[string]any{"message": "second", "replicas": 3}
		up, err := in.InstallOrUpgrade(ctx, rel)
		if err != nil {
			t.Fatalf("upgrade: %v", err)
		}
		if !up.Changed || up.Revision != 2 || up.Status != "deployed" {
			t.Fatalf("upgrade status = %+v", up)
		}
		cm3, _ := cs.CoreV1().ConfigMaps("lifecycle").Get(ctx, "demo-config", metav1.GetOptions{})
		dep3, _ := cs.AppsV1().Deployments("lifecycle").Get(ctx, "demo", metav1.GetOptions{})
		if cm3.Data["message"] != "second" || *dep3.Spec.Replicas != 3 {
			t.Fatalf("after upgrade: message %q replicas %d", cm3.Data["message"], *dep3.Spec.Replicas)
		}

		// Another job's teardown leaves the release alone.
		if removed, err := in.Uninstall(ctx, "demo", "lifecycle", "job_other"); err != nil || removed {
			t.Fatalf("uninstall by another job = %v, %v", removed, err)
		}
		removed, err := in.Uninstall(ctx, "demo", "lifecycle", "job_lifecycle")
		if err != nil || !removed {
			t.Fatalf("uninstall = %v, %v", removed, err)
		}
		if _, err := cs.CoreV1().ConfigMaps("lifecycle").Get(ctx, "demo-config", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("configmap after uninstall: %v", err)
		}
		if _, err := cs.AppsV1().Deployments("lifecycle").Get(ctx, "demo", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("deployment after uninstall: %v", err)
		}
		if _, found, err := in.Status(ctx, "demo", "lifecycle"); err != nil || found {
			t.Fatalf("status after uninstall: found=%v err=%v", found, err)
		}
		// The namespace the install created goes with the release. It stays terminating: no
		// namespace controller runs beside the test API server to remove the "kubernetes"
		// finalizer, so it can be neither live nor gone here.
		terminating := func(when string) {
			t.Helper()
			ns, err := cs.CoreV1().Namespaces().Get(ctx, "lifecycle", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("namespace the install created, %s: %v; want it terminating", when, err)
			}
			if ns.DeletionTimestamp == nil {
				t.Fatalf("namespace the install created is still live %s: %v", when, ns.Status.Phase)
			}
		}
		terminating("after uninstall")
		if removed, err := in.Uninstall(ctx, "demo", "lifecycle", "job_lifecycle"); err != nil || removed {
			t.Fatalf("second uninstall = %v, %v; want a no-op", removed, err)
		}
		// Installing again while the namespace is still terminating is worth a retry, not the
		// user's attention (the apiserver would refuse new objects there as forbidden).
		terminating("after the second uninstall")
		_, err = in.InstallOrUpgrade(ctx, rel)
		if fe := fault.As(err); fe == nil || fe.Class != job.ClassTransient || fe.Code != "NamespaceTerminating" {
			t.Fatalf("install into a terminating namespace = %v, want transient NamespaceTerminating", err)
		}
	})

	t.Run("a namespace the user made, or another release shares, stays", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		cs := cluster.Clientset()
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "users-own"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		install := func(name, ns, jobID string) {
			t.Helper()
			if _, err := in.InstallOrUpgrade(ctx, Release{Name: name, Namespace: ns, Chart: ChartSource{Path: demoChart},
				Values: map[string]any{"message": name}, Labels: map[string]string{LabelJobID: jobID}}); err != nil {
				t.Fatalf("install %s/%s: %v", ns, name, err)
			}
		}
		live := func(ns string) bool {
			t.Helper()
			got, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
			return err == nil && got.DeletionTimestamp == nil
		}
		install("demo", "users-own", "job_in_users_ns")
		if removed, err := in.Uninstall(ctx, "demo", "users-own", "job_in_users_ns"); err != nil || !removed {
			t.Fatalf("uninstall = %v, %v", removed, err)
		}
		if !live("users-own") {
			t.Fatal("uninstall deleted a namespace the user made")
		}

		// "shared" is created by the first job's install; a second job's release lives there too.
		install("one", "shared", "job_first")
		install("two", "shared", "job_second")
		if removed, err := in.Uninstall(ctx, "one", "shared", "job_first"); err != nil || !removed {
			t.Fatalf("uninstall one = %v, %v", removed, err)
		}
		if !live("shared") {
			t.Fatal("uninstall deleted a namespace another release still lives in")
		}
		if removed, err := in.Uninstall(ctx, "two", "shared", "job_second"); err != nil || !removed {
			t.Fatalf("uninstall two = %v, %v", removed, err)
		}
		if !live("shared") {
			t.Fatal("the second job's uninstall deleted a namespace it did not create")
		}
		// The creating job's teardown, run again, now finds the namespace empty and drops it.
		if _, err := in.Uninstall(ctx, "one", "shared", "job_first"); err != nil {
			t.Fatal(err)
		}
		if live("shared") {
			t.Fatal("the creating job's re-run left its emptied namespace")
		}
	})

	t.Run("pending release of the same job is recovered", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		rel := Release{
			Name: "demo", Namespace: "pending",
			Chart:  ChartSource{Path: demoChart},
			Values: map[string]any{"message": "m"},
			Labels: map[string]string{LabelJobID: "job_crashed"},
		}
		if _, err := in.InstallOrUpgrade(ctx, rel); err != nil {
			t.Fatal(err)
		}
		// Make it look as a worker killed mid-install leaves it: the record says
		// pending-install and only part of the objects exist.
		setStatus(t, in, "pending", "demo", rcommon.StatusPendingInstall)
		if err := cluster.Clientset().AppsV1().Deployments("pending").Delete(ctx, "demo", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}

		// Another job may not break the lock: its owner may still be running.
		other := rel
		other.Labels = map[string]string{LabelJobID: "job_other"}
		if _, err := in.InstallOrUpgrade(ctx, other); fault.ClassOf(err) != job.ClassTransient {
			t.Fatalf("install by another job over a pending release = %v, want transient", err)
		}

		st, err := in.InstallOrUpgrade(ctx, rel)
		if err != nil {
			t.Fatalf("retry: %v", err)
		}
		if st.Status != "deployed" || st.Revision != 2 {
			t.Fatalf("retry status = %+v", st)
		}
		hist, err := in.History(ctx, "demo", "pending")
		if err != nil {
			t.Fatal(err)
		}
		deployed := 0
		for _, h := range hist {
			if h.Status == "deployed" {
				deployed++
			}
		}
		// The interrupted revision was settled (failed, then superseded by the retry).
		if deployed != 1 || len(hist) != 2 || hist[0].Status != "superseded" {
			t.Fatalf("history = %+v, want revision 1 superseded and exactly one deployed", hist)
		}
		if _, err := cluster.Clientset().AppsV1().Deployments("pending").Get(ctx, "demo", metav1.GetOptions{}); err != nil {
			t.Fatalf("deployment not re-created: %v", err)
		}
	})

	t.Run("values the chart schema refuses need the user", func(t *testing.T) {
		t.Parallel()
		_, err := in.InstallOrUpgrade(t.Context(), Release{
			Name: "demo", Namespace: "badvalues",
			Chart:  ChartSource{Path: demoChart},
			Values: map[string]any{"replicas": -1},
			Labels: map[string]string{LabelJobID: "job_bad"},
		})
		fe := fault.As(err)
		if fe == nil || fe.Class != job.ClassUserAction || !strings.Contains(err.Error(), "replicas") {
			t.Fatalf("err = %v (%+v), want user_action naming replicas", err, fe)
		}
		if _, found, _ := in.Status(t.Context(), "demo", "badvalues"); found {
			t.Fatal("a release was recorded for refused values")
		}
	})

	t.Run("chart from an HTTP repository", func(t *testing.T) {
		t.Parallel()
		srv := chartRepo(t)
		st, err := in.InstallOrUpgrade(t.Context(), Release{
			Name: "fromrepo", Namespace: "repo",
			Chart:  ChartSource{RepoURL: srv.URL, Name: "demo", Version: "0.1.0"},
			Labels: map[string]string{LabelJobID: "job_repo"},
		})
		if err != nil || st.Status != "deployed" {
			t.Fatalf("install from repo = %+v, %v", st, err)
		}
		_, err = in.InstallOrUpgrade(t.Context(), Release{
			Name: "missing", Namespace: "repo",
			Chart:  ChartSource{RepoURL: srv.URL, Name: "demo", Version: "9.9.9"},
			Labels: map[string]string{LabelJobID: "job_repo"},
		})
		if fe := fault.As(err); fe.Class != job.ClassUserAction || fe.Code != CodeInvalidChart {
			t.Fatalf("missing version = %v (%+v), want user_action %s", err, fe, CodeInvalidChart)
		}
	})
}

// TestUnreachableClusterIsTransient stops the API server under an install and starts it again:
// the failure is transient and the retry completes.
func TestUnreachableClusterIsTransient(t *testing.T) {
	t.Parallel()
	env := kubeenv.Start(t)
	cluster, err := Connect(Credentials{Endpoint: env.Host, CAData: env.CA, Token: env.Token})
	if err != nil {
		t.Fatal(err)
	}
	in := NewInstaller(cluster, InstallerOptions{CacheDir: t.TempDir()})
	rel := Release{
		Name: "demo", Namespace: "away",
		Chart:  ChartSource{Path: demoChart},
		Labels: map[string]string{LabelJobID: "job_away"},
	}
	env.StopAPIServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err = in.InstallOrUpgrade(ctx, rel)
	if fe := fault.As(err); fe.Class != job.ClassTransient || fe.Code != CodeUnreachable {
		t.Fatalf("install with the API server down = %v (%+v), want transient %s", err, fe, CodeUnreachable)
	}
	env.StartAPIServer(t)
	st, err := in.InstallOrUpgrade(t.Context(), rel)
	if err != nil || st.Status != "deployed" {
		t.Fatalf("retry after the API server came back = %+v, %v", st, err)
	}
}

func setStatus(t *testing.T, in *Installer, ns, name string, s rcommon.Status) {
	t.Helper()
	cfg, err := in.actionConfig(ns)
	if err != nil {
		t.Fatal(err)
	}
	last, err := lastRelease(cfg, name)
	if err != nil || last == nil {
		t.Fatalf("release %s/%s: %v", ns, name, err)
	}
	last.SetStatus(s, "simulated crash")
	if err := cfg.Releases.Update(last); err != nil {
		t.Fatal(err)
	}
}

// chartRepo serves the demo chart as a Helm HTTP repository (index.yaml and the package).
func chartRepo(t *testing.T) *httptest.Server {
	t.Helper()
	dir := t.TempDir()
	ch, err := loader.Load(demoChart)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chartutil.Save(ch, dir); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	idx, err := repo.IndexDirectory(dir, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	return srv
}
