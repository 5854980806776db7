package components

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundworkhq/groundwork/internal/api"
	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/provider/kube"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/testenv/kubeenv"
)

func release(t *testing.T, j *job.Job) kube.ReleaseStatus {
	t.Helper()
	var st kube.ReleaseStatus
	if ok, err := (&pipeline.Run{Job: j}).Infra("release", &st); !ok || err != nil {
		t.Fatalf("job %s infra has no release (%v): %s", j.ID, err, j.Infra)
	}
	return st
}

// Through the server: the catalog lists the test component; the API server registers as a
// space (from endpoint, CA and token, and from a kubeconfig) keeping only a secret reference;
// an install-component job installs the chart with the values given; a second one for the same
// component and space upgrades the release and takes it over; deleting the superseded job
// leaves the release, deleting the owning job uninstalls it. Each mutation is audited once.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	env := kubeenv.Start(t)
	cs := clientset(t, env)
	g := startServer(t)
	ctx := t.Context()

	var cat struct {
		Data []struct {
			ID            string         `json:"id"`
			Version       string         `json:"version"`
			DefaultValues map[string]any `json:"defaultValues"`
		} `json:"data"`
	}
	g.must(t, http.StatusOK, "GET", "/api/catalog/components", nil, &cat)
	if len(cat.Data) != 1 || cat.Data[0].ID != "demo" || cat.Data[0].Version != "0.1.0" || cat.Data[0].DefaultValues["message"] != "default message" {
		t.Fatalf("catalog = %+v", cat)
	}

	r := g.call(t, "POST", "/api/spaces/register-cluster", map[string]any{
		"name": "prod", "cluster": map[string]string{"endpoint": env.Host, "caData": string(env.CA), "token": env.Token},
	})
	if r.Status != http.StatusCreated || strings.Contains(string(r.Raw), env.Token) {
		t.Fatalf("register: %d %s (the answer must not hold the token)", r.Status, r.Raw)
	}
	var sp store.Space
	r.Decode(t, &sp)
	var cfg struct {
		Cluster kube.SpaceCluster `json:"cluster"`
	}
	if err := json.Unmarshal(sp.Config, &cfg); err != nil {
		t.Fatal(err)
	}
	if sp.Status != "ready" || sp.SpaceType != "kubernetes" || !secrets.IsRef(cfg.Cluster.CredentialRef) ||
		cfg.Cluster.Endpoint != env.Host || cfg.Cluster.ServerVersion != kubeenv.Version {
		t.Fatalf("registered space = %+v, cluster %+v", sp, cfg.Cluster)
	}
	var fromKubeconfig store.Space
	g.must(t, http.StatusCreated, "POST", "/api/spaces/register-cluster", map[string]any{
		"name": "from-kubeconfig", "cluster": map[string]string{"kubeconfig": string(env.Kubeconfig())},
	}, &fromKubeconfig)
	if !strings.Contains(string(fromKubeconfig.Config), `"kubeconfig":true`) || strings.Contains(string(fromKubeconfig.Config), env.Token) {
		t.Fatalf("kubeconfig space config = %s", fromKubeconfig.Config)
	}

	// The CA as a kubeconfig carries it (base64 of the PEM) is accepted too.
	g.must(t, http.StatusCreated, "POST", "/api/spaces/register-cluster", map[string]any{
		"name": "base64-ca", "cluster": map[string]string{"endpoint": env.Host, "caData": base64.StdEncoding.EncodeToString(env.CA), "token": env.Token},
	}, nil)

	first := g.install(t, sp.ID, map[string]any{"message": "hello", "replicas": 2})
	j1 := g.waitJob(t, cs, first, job.StatusCompleted)
	cm, err := cs.CoreV1().ConfigMaps("demo-system").Get(ctx, "demo-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dep, err := cs.AppsV1().Deployments("demo-system").Get(ctx, "demo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["message"] != "hello" || *dep.Spec.Replicas != 2 || cm.Labels[kube.LabelJobID] != first || dep.Labels[kube.LabelJobID] != first {
		t.Fatalf("installed: message %q replicas %d labels %v", cm.Data["message"], *dep.Spec.Replicas, cm.Labels)
	}
	if rel := release(t, j1); rel.Revision != 1 || rel.Status != "deployed" || rel.Namespace != "demo-system" {
		t.Fatalf("release after install = %+v", rel)
	}

	// The upgrade is a second install-component job for the same component and space.
	second := g.install(t, sp.ID, map[string]any{"message": "upgraded", "replicas": 3})
	j2 := g.waitJob(t, cs, second, job.StatusCompleted)
	cm, _ = cs.CoreV1().ConfigMaps("demo-system").Get(ctx, "demo-config", metav1.GetOptions{})
	dep, _ = cs.AppsV1().Deployments("demo-system").Get(ctx, "demo", metav1.GetOptions{})
	if cm.Data["message"] != "upgraded" || *dep.Spec.Replicas != 3 || cm.Labels[kube.LabelJobID] != second {
		t.Fatalf("upgraded: message %q replicas %d labels %v", cm.Data["message"], *dep.Spec.Replicas, cm.Labels)
	}
	if rel := release(t, j2); rel.Revision != 2 || rel.Status != "deployed" {
		t.Fatalf("release after upgrade = %+v", rel)
	}

	// Deleting the superseded job tears it down without touching the release the second owns.
	g.must(t, http.StatusAccepted, "DELETE", "/api/provisioning-jobs/"+first, nil, nil)
	g.waitJob(t, nil, first, job.StatusDeleted)
	if cm2, err := cs.CoreV1().ConfigMaps("demo-system").Get(ctx, "demo-config", metav1.GetOptions{}); err != nil || cm2.ResourceVersion != cm.ResourceVersion {
		t.Fatalf("the superseded job's teardown touched the release: %v", err)
	}
	g.must(t, http.StatusAccepted, "DELETE", "/api/provisioning-jobs/"+second, nil, nil)
	g.waitJob(t, nil, second, job.StatusDeleted)
	if _, err := cs.CoreV1().ConfigMaps("demo-system").Get(ctx, "demo-config", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("configmap after uninstall: %v", err)
	}
	if _, err := cs.AppsV1().Deployments("demo-system").Get(ctx, "demo", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("deployment after uninstall: %v", err)
	}

	for action, want := range map[string]int{"space.register_cluster": 3, "component.install": 2} {
		var page struct {
			Total int `json:"total"`
		}
		g.must(t, http.StatusOK, "GET", "/api/audit-logs?action="+action, nil, &page)
		if page.Total != want {
			t.Errorf("%d audit entries for %s, want %d", page.Total, action, want)
		}
	}
}

// Requests that cannot succeed are refused with the field named, before a job exists or
// anything reaches the cluster.
func TestRefusedBeforeInstall(t *testing.T) {
	t.Parallel()
	env := kubeenv.Start(t)
	cs := clientset(t, env)
	g := startServer(t)
	sp := g.register(t, env, "prod")
	var plain store.Space
	g.must(t, http.StatusCreated, "POST", "/api/spaces", map[string]string{"name": "no-cluster", "provider": "local", "region": "local"}, &plain)

	// The refusals run in parallel inside one group, so that what they left behind is checked
	// after all of them.
	t.Run("refusals", func(t *testing.T) {
		refusals(t, g, env, sp, &plain)
	})
	var page struct {
		Data []job.Job `json:"data"`
	}
	g.must(t, http.StatusOK, "GET", "/api/provisioning-jobs?kind=component", nil, &page)
	if len(page.Data) != 0 {
		t.Errorf("refused requests made %d jobs", len(page.Data))
	}
	var spaces struct {
		Data []store.Space `json:"data"`
	}
	g.must(t, http.StatusOK, "GET", "/api/spaces", nil, &spaces)
	if len(spaces.Data) != 2 {
		t.Errorf("refused registrations made spaces: %d, want 2", len(spaces.Data))
	}
	if _, err := cs.CoreV1().Namespaces().Get(t.Context(), "demo-system", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("refused values still reached the cluster: %v", err)
	}
}

// refusals runs each request that must be refused, in parallel.
func refusals(t *testing.T, g *gw, env *kubeenv.Env, sp, plain *store.Space) {
	cases := []struct {
		name   string
		body   map[string]any
		status int
		field  string
	}{
		{"replicas above the schema's maximum", map[string]any{"spaceID": sp.ID, "componentID": "demo", "values": map[string]any{"replicas": 9}}, 400, "values.replicas"},
		{"message not text", map[string]any{"spaceID": sp.ID, "componentID": "demo", "values": map[string]any{"message": map[string]any{"a": 1}}}, 400, "values.message"},
		{"dotted key into a string", map[string]any{"spaceID": sp.ID, "componentID": "demo", "values": map[string]any{"message.inner": "x"}}, 400, "values.message"},
		{"unknown component", map[string]any{"spaceID": sp.ID, "componentID": "nope"}, 400, "componentID"},
		{"bad namespace", map[string]any{"spaceID": sp.ID, "componentID": "demo", "namespace": "Not_A_Namespace"}, 400, "namespace"},
		{"space without a cluster", map[string]any{"spaceID": plain.ID, "componentID": "demo"}, 400, "spaceID"},
		{"unknown space", map[string]any{"spaceID": "spc_missing", "componentID": "demo"}, 404, "spaceID"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := g.call(t, "POST", "/api/provisioning-jobs/install-component", tc.body)
			if r.Status != tc.status || !slices.Contains(r.Fields(), tc.field) {
				t.Fatalf("%d %s; want %d naming %s", r.Status, r.Raw, tc.status, tc.field)
			}
		})
	}
	regCases := []struct {
		name    string
		cluster map[string]string
		status  int
		field   string
	}{
		{"no credential", map[string]string{}, 400, "cluster.endpoint"},
		{"endpoint without token", map[string]string{"endpoint": env.Host}, 400, "cluster.token"},
		{"token the cluster refuses", map[string]string{"endpoint": env.Host, "caData": string(env.CA), "token": "wrong"}, 400, "cluster"},
		{"CA that did not sign the server", map[string]string{"endpoint": env.Host, "token": env.Token}, 400, "cluster"},
		{"nothing listening", map[string]string{"endpoint": "https://127.0.0.1:1", "caData": string(env.CA), "token": env.Token}, 422, "cluster.endpoint"},
	}
	for _, tc := range regCases {
		t.Run("register "+tc.name, func(t *testing.T) {
			t.Parallel()
			r := g.call(t, "POST", "/api/spaces/register-cluster", map[string]any{"name": "x", "cluster": tc.cluster})
			if r.Status != tc.status || !slices.Contains(r.Fields(), tc.field) {
				t.Fatalf("%d %s; want %d naming %s", r.Status, r.Raw, tc.status, tc.field)
			}
		})
	}
}

// With the API server down the space turns unreachable and an install fails as transient
// (retryable, code ClusterUnreachable); once it is back the space is ready again and a retry
// of the same job completes.
func TestUnreachableClusterThenRetry(t *testing.T) {
	t.Parallel()
	env := kubeenv.Start(t)
	cs := clientset(t, env)
	g := startServer(t)
	sp := g.register(t, env, "flaky")

	env.StopAPIServer(t)
	g.waitSpace(t, sp.ID, "unreachable")
	id := g.install(t, sp.ID, map[string]any{"message": "eventually"})
	j := g.waitJob(t, nil, id, job.StatusFailed)
	if j.Failure == nil || j.Failure.Class != job.ClassTransient || j.Failure.Code != kube.CodeUnreachable || !j.Failure.Retryable {
		t.Fatalf("failure = %+v, want retryable transient %s", j.Failure, kube.CodeUnreachable)
	}

	env.StartAPIServer(t)
	g.waitSpace(t, sp.ID, "ready")
	g.must(t, http.StatusAccepted, "POST", "/api/provisioning-jobs/"+id+"/retry", nil, nil)
	j = g.waitJob(t, cs, id, job.StatusCompleted)
	if rel := release(t, j); rel.Revision != 1 || rel.Status != "deployed" {
		t.Fatalf("release after retry = %+v", rel)
	}
	cm, err := cs.CoreV1().ConfigMaps("demo-system").Get(t.Context(), "demo-config", metav1.GetOptions{})
	if err != nil || cm.Data["message"] != "eventually" {
		t.Fatalf("configmap after retry = %v, %v", cm, err)
	}
}

// Groundwork is killed with SIGKILL while Helm waits on the chart's pre-install hook (the
// release recorded pending-install). The restarted server claims the job once the dead one's
// lease runs out, settles the release it left pending and completes the job: one deployed
// revision, nothing left pending or failed twice.
func TestSIGKILLDuringInstall(t *testing.T) {
	t.Parallel()
	env := kubeenv.Start(t)
	cs := clientset(t, env)
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	first := startChild(t, dir, dataDir, 1)
	sp := first.register(t, env, "crash")
	id := first.install(t, sp.ID, map[string]any{"message": "survives", "preInstallHook": true})

	cluster, err := kube.Connect(kube.Credentials{Endpoint: env.Host, CAData: env.CA, Token: env.Token})
	if err != nil {
		t.Fatal(err)
	}
	in := kube.NewInstaller(cluster, kube.InstallerOptions{CacheDir: t.TempDir()})
	deadline := time.Now().Add(90 * time.Second)
	for {
		st, found, _ := in.Status(t.Context(), "demo", "demo-system")
		_, hookErr := cs.BatchV1().Jobs("demo-system").Get(t.Context(), "demo-pre-install", metav1.GetOptions{})
		if found && st.Status == "pending-install" && hookErr == nil {
			break
		}
		select {
		case <-first.done:
			b, _ := os.ReadFile(first.log)
			t.Fatalf("the server exited before it was killed:\n%s", b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the install never reached pending-install with its hook created (job %+v)", first.job(t, id))
		}
		time.Sleep(100 * time.Millisecond)
	}
	first.kill()

	second := startChild(t, dir, dataDir, 2)
	j := second.waitJob(t, cs, id, job.StatusCompleted)
	hist, err := in.History(t.Context(), "demo", "demo-system")
	if err != nil {
		t.Fatal(err)
	}
	deployed := 0
	for _, h := range hist {
		switch h.Status {
		case "deployed":
			deployed++
		case "pending-install", "pending-upgrade":
			t.Fatalf("a revision is still pending: %+v", hist)
		}
	}
	if deployed != 1 {
		t.Fatalf("history = %+v, want exactly one deployed revision", hist)
	}
	if rel := release(t, j); rel.Status != "deployed" || rel.Revision != hist[len(hist)-1].Revision {
		t.Fatalf("job's release = %+v, history %+v", rel, hist)
	}
	cm, err := cs.CoreV1().ConfigMaps("demo-system").Get(t.Context(), "demo-config", metav1.GetOptions{})
	if err != nil || cm.Data["message"] != "survives" || cm.Labels[kube.LabelJobID] != id {
		t.Fatalf("configmap after recovery = %v, %v", cm, err)
	}
}

// Who may do what: a viewer reads the catalog but registers and installs nothing; an editor
// holding its role only on one space installs there and nowhere else, and registers nothing
// (a new space is an org-wide change); every install is on the record under its caller.
func TestAccess(t *testing.T) {
	t.Parallel()
	env := kubeenv.Start(t)
	g := startServer(t)
	a, b := g.register(t, env, "a"), g.register(t, env, "b")
	viewer := g.as(t, "viewer", "role_viewer", "")
	scoped := g.as(t, "scoped", "role_editor", "space:"+a.ID)
	editor := g.as(t, "editor", "role_editor", "")
	install := func(spaceID string) map[string]any {
		return map[string]any{"spaceID": spaceID, "componentID": "demo", "values": map[string]any{"message": "by " + spaceID}}
	}
	reg := map[string]any{"name": "x", "cluster": map[string]string{"endpoint": env.Host, "caData": string(env.CA), "token": env.Token}}
	cases := []struct {
		name         string
		who          *gw
		method, path string
		body         any
		want         int
	}{
		{"viewer reads the catalog", viewer, "GET", "/api/catalog/components", nil, 200},
		{"viewer installs", viewer, "POST", "/api/provisioning-jobs/install-component", install(a.ID), 403},
		{"viewer registers", viewer, "POST", "/api/spaces/register-cluster", reg, 403},
		{"scoped editor reads the catalog", scoped, "GET", "/api/catalog/components", nil, 200},
		{"scoped editor installs into its space", scoped, "POST", "/api/provisioning-jobs/install-component", install(a.ID), 201},
		{"scoped editor installs elsewhere", scoped, "POST", "/api/provisioning-jobs/install-component", install(b.ID), 403},
		{"scoped editor registers", scoped, "POST", "/api/spaces/register-cluster", reg, 403},
		{"editor registers", editor, "POST", "/api/spaces/register-cluster", reg, 201},
	}
	for _, tc := range cases {
		if r := tc.who.call(t, tc.method, tc.path, tc.body); r.Status != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, r.Status, r.Raw, tc.want)
		}
	}
	var page struct {
		Data []struct {
			Actor string `json:"actor"`
		} `json:"data"`
	}
	g.must(t, http.StatusOK, "GET", "/api/audit-logs?action=component.install", nil, &page)
	if len(page.Data) != 1 || page.Data[0].Actor != "scoped@example.com" {
		t.Fatalf("install entries = %+v, want one by scoped@example.com", page.Data)
	}
}

// as makes a user holding role (org-wide, or at scope) and returns the server as seen with a
// token of theirs.
func (g *gw) as(t *testing.T, name, role, scope string) *gw {
	t.Helper()
	email := name + "@example.com"
	if scope == "" {
		g.must(t, http.StatusCreated, "POST", "/api/users", map[string]string{"email": email, "roleID": role}, nil)
	} else {
		g.must(t, http.StatusCreated, "POST", "/api/users", map[string]string{"email": email}, nil)
		g.must(t, http.StatusCreated, "POST", "/api/role-assignments", map[string]string{"email": email, "roleID": role, "scope": scope}, nil)
	}
	var tok struct {
		Secret string `json:"secret"`
	}
	g.must(t, http.StatusCreated, "POST", "/api/tokens", map[string]string{"name": name, "email": email, "expiresIn": "1h"}, &tok)
	return &gw{url: g.url, token: tok.Secret}
}

// Deleting a registered cluster's space deletes its credential from the secret store: nothing
// may use it any more, and it must not outlive the space.
func TestDeleteSpaceDeletesClusterCredential(t *testing.T) {
	t.Parallel()
	env := kubeenv.Start(t)
	dataDir := t.TempDir()
	s := apptest.Start(t, app.Options{DataDir: dataDir, Components: componentOptions()})
	g := &gw{url: s.URL, token: s.Token}
	sp := g.register(t, env, "short-lived")
	cl, ok, err := api.SpaceClusterOf(sp)
	if err != nil || !ok || cl.CredentialRef == "" {
		t.Fatalf("space has no cluster credential: %v %v %+v", ok, err, cl)
	}
	sec, err := secrets.OpenLocal(dataDir, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sec.Get(t.Context(), cl.CredentialRef); err != nil {
		t.Fatalf("credential not stored: %v", err)
	}
	g.must(t, http.StatusNoContent, "DELETE", "/api/spaces/"+sp.ID, nil, nil)
	if _, err := sec.Get(t.Context(), cl.CredentialRef); !errors.Is(err, secrets.ErrNotFound) {
		t.Fatalf("credential after the space was deleted: %v", err)
	}
}
