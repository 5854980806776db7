package component

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/groundworkhq/groundwork/internal/catalog/components"
	"github.com/groundworkhq/groundwork/internal/cluster"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/provider/kube"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/secrets/secretstest"
	"github.com/groundworkhq/groundwork/internal/testenv/deployctl"
	"github.com/groundworkhq/groundwork/internal/testenv/kubeenv"
)

// spaces is the space registry as the pipeline sees it; the real one is the lead's store.
type spaces struct {
	mu sync.Mutex
	m  map[string]kube.SpaceCluster
}

func (s *spaces) Cluster(_ context.Context, id string) (kube.SpaceCluster, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc, ok := s.m[id]
	if !ok {
		return kube.SpaceCluster{}, fault.UserAction(fmt.Errorf("space %s not found", id), "SpaceNotFound", "", "")
	}
	return sc, nil
}

const testOrg = "org_test"

type bundle struct {
	env *kubeenv.Env
	p   *Pipeline
	cs  kubernetes.Interface
}

// setup registers the API server as space spc_test (token in a real local secret store) and
// builds the pipeline with the test catalog and the testdata chart directory.
func setup(t *testing.T) *bundle {
	t.Helper()
	env := kubeenv.Start(t)
	store, err := secrets.OpenLocal(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	vault := secretstest.Vault(store)
	sc, err := kube.Register(t.Context(), vault.For(secrets.Owner{OrgID: testOrg, Kind: secrets.OwnerCluster, ID: "spc_test"}), "space-spc_test", kube.Credentials{Endpoint: env.Host, CAData: env.CA, Token: env.Token})
	if err != nil {
		t.Fatalf("register space: %v", err)
	}
	if sc.ServerVersion != kubeenv.Version || !secrets.IsRef(sc.CredentialRef) {
		t.Fatalf("registered space = %+v", sc)
	}
	cat, err := components.Load("testdata/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Options{
		Catalog:   cat,
		Spaces:    &spaces{m: map[string]kube.SpaceCluster{"spc_test": sc}},
		Secrets:   vault,
		Connect:   kubeConnector(kube.InstallerOptions{CacheDir: t.TempDir()}),
		ChartDir:  "../../provider/kube/testdata/charts",
		ReadyPoll: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{env: env, p: p, cs: cs}
}

func newJob(id string, cfg Config) *job.Job {
	b, _ := json.Marshal(cfg)
	j := &job.Job{ID: id, OrgID: testOrg, SpaceID: "spc_test", Kind: job.KindProvisioning, Family: job.FamilyComponent, Mode: job.ModeCreate, Config: b, Infra: json.RawMessage(`{}`)}
	return j
}

// step runs one step's Do (or Undo) the way the engine does: a snapshot in, infra merged out.
func step(t *testing.T, p *Pipeline, j *job.Job, name string, undo bool) (pipeline.Result, error) {
	t.Helper()
	if len(j.Steps) == 0 {
		j.Steps = pipeline.NewStepRecords(p.Steps(j))
	}
	for _, s := range p.Steps(j) {
		if s.Name != name {
			continue
		}
		fn := s.Do
		if undo {
			fn = s.Undo
		}
		if fn == nil {
			return pipeline.Skip("no undo"), nil
		}
		i := j.StepIndex(name)
		if j.Steps[i].StartedAt == nil {
			now := time.Now()
			j.Steps[i].StartedAt = &now
		}
		res, err := fn(t.Context(), &pipeline.Run{Job: j, Step: name, Attempt: 1})
		if err != nil {
			return res, err
		}
		infra, mErr := pipeline.MergeInfra(j.Infra, res.Infra)
		if mErr != nil {
			t.Fatal(mErr)
		}
		j.Infra = infra
		if res.Outcome != pipeline.OutcomeWait {
			j.Steps[i].Status = job.StepDone
		}
		return res, nil
	}
	t.Fatalf("no step %s", name)
	return pipeline.Result{}, nil
}

func mustStep(t *testing.T, p *Pipeline, j *job.Job, name string) pipeline.Result {
	t.Helper()
	res, err := step(t, p, j, name, false)
	if err != nil {
		t.Fatalf("step %s: %v", name, err)
	}
	return res
}

// apply runs all steps; wait-ready is answered by playing the deployment controller.
func (b *bundle) apply(t *testing.T, j *job.Job) {
	t.Helper()
	for _, name := range []string{StepValidate, StepConnect, StepInstall} {
		mustStep(t, b.p, j, name)
	}
	res := mustStep(t, b.p, j, StepWaitReady)
	if res.Outcome != pipeline.OutcomeWait {
		t.Fatalf("wait-ready before any rollout = %+v, want wait", res)
	}
	deployctl.MarkAvailable(t, b.cs, "demo-system", "demo")
	deadline := time.Now().Add(30 * time.Second)
	for res.Outcome == pipeline.OutcomeWait {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting: %s", res.Message)
		}
		res = mustStep(t, b.p, j, StepWaitReady)
	}
	mustStep(t, b.p, j, StepFinalize)
}

func TestInstallUpgradeUninstall(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	first := newJob("job_first", Config{ComponentID: "demo", Values: map[string]any{"message": "hello"}})
	if err := b.p.Validate(ctx, first); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	b.apply(t, first)

	cm, err := b.cs.CoreV1().ConfigMaps("demo-system").Get(ctx, "demo-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["message"] != "hello" || cm.Labels[kube.LabelJobID] != "job_first" {
		t.Fatalf("configmap data %v labels %v", cm.Data, cm.Labels)
	}
	var out map[string]any
	r := pipeline.Run{Job: first}
	if ok, err := r.Infra("outputs", &out); !ok || err != nil || out["revision"] != float64(1) {
		t.Fatalf("outputs = %v (%v, %v)", out, ok, err)
	}

	// Re-running every step changes nothing in the cluster.
	dep, _ := b.cs.AppsV1().Deployments("demo-system").Get(ctx, "demo", metav1.GetOptions{})
	for _, name := range []string{StepValidate, StepConnect, StepInstall, StepWaitReady, StepFinalize} {
		if res := mustStep(t, b.p, first, name); res.Outcome == pipeline.OutcomeWait {
			t.Fatalf("re-run of %s waits: %s", name, res.Message)
		}
	}
	cm2, _ := b.cs.CoreV1().ConfigMaps("demo-system").Get(ctx, "demo-config", metav1.GetOptions{})
	dep2, _ := b.cs.AppsV1().Deployments("demo-system").Get(ctx, "demo", metav1.GetOptions{})
	if cm2.ResourceVersion != cm.ResourceVersion || dep2.ResourceVersion != dep.ResourceVersion {
		t.Fatal("re-running the steps modified the release's objects")
	}
	var rel kube.ReleaseStatus
	if _, err := r.Infra("release", &rel); err != nil || rel.Revision != 1 || rel.Changed {
		t.Fatalf("release after re-run = %+v, %v", rel, err)
	}

	// A second install-component job of the same component upgrades the release.
	second := newJob("job_second", Config{ComponentID: "demo", Values: map[string]any{"message": "upgraded", "replicas": 2}})
	for _, name := range []string{StepValidate, StepConnect, StepInstall} {
		mustStep(t, b.p, second, name)
	}
	cm3, _ := b.cs.CoreV1().ConfigMaps("demo-system").Get(ctx, "demo-config", metav1.GetOptions{})
	dep3, _ := b.cs.AppsV1().Deployments("demo-system").Get(ctx, "demo", metav1.GetOptions{})
	if cm3.Data["message"] != "upgraded" || *dep3.Spec.Replicas != 2 || cm3.Labels[kube.LabelJobID] != "job_second" {
		t.Fatalf("after upgrade: data %v replicas %d labels %v", cm3.Data, *dep3.Spec.Replicas, cm3.Labels)
	}
	if _, err := (&pipeline.Run{Job: second}).Infra("release", &rel); err != nil || rel.Revision != 2 {
		t.Fatalf("release after upgrade = %+v, %v", rel, err)
	}

	// Deleting the first job leaves the release that the second job now owns.
	if res, err := step(t, b.p, first, StepInstall, true); err != nil || res.Outcome != pipeline.OutcomeSkip {
		t.Fatalf("undo of the superseded job = %+v, %v; want skip", res, err)
	}
	if _, err := b.cs.CoreV1().ConfigMaps("demo-system").Get(ctx, "demo-config", metav1.GetOptions{}); err != nil {
		t.Fatalf("superseded job's teardown removed the release: %v", err)
	}
	// Deleting the second job uninstalls; a re-run of the undo is a no-op.
	if _, err := step(t, b.p, second, StepInstall, true); err != nil {
		t.Fatalf("undo: %v", err)
	}
	if _, err := b.cs.CoreV1().ConfigMaps("demo-system").Get(ctx, "demo-config", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("configmap after uninstall: %v", err)
	}
	if _, err := b.cs.AppsV1().Deployments("demo-system").Get(ctx, "demo", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("deployment after uninstall: %v", err)
	}
	if res, err := step(t, b.p, second, StepInstall, true); err != nil || res.Outcome != pipeline.OutcomeSkip {
		t.Fatalf("second undo = %+v, %v; want skip", res, err)
	}
}

func TestInvalidValuesRefusedBeforeInstall(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cases := map[string]struct {
		cfg   Config
		field string
	}{
		"too many replicas": {Config{ComponentID: "demo", Values: map[string]any{"replicas": 9}}, "replicas"},
		"message not text":  {Config{ComponentID: "demo", Values: map[string]any{"message": map[string]any{"a": 1}}}, "message"},
		"unknown component": {Config{ComponentID: "nope"}, "componentID"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			j := newJob("job_bad", tc.cfg)
			err := b.p.Validate(t.Context(), j)
			if fe := fault.As(err); fe == nil || fe.Class != job.ClassUserAction || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("Validate = %v, want user_action naming %s", err, tc.field)
			}
			// The steps refuse too (a job accepted before a catalog change), before touching
			// the cluster.
			if _, err := step(t, b.p, j, StepInstall, false); fault.ClassOf(err) != job.ClassUserAction {
				t.Fatalf("install step = %v, want user_action", err)
			}
		})
	}
	t.Cleanup(func() {
		if _, err := b.cs.CoreV1().Namespaces().Get(context.Background(), "demo-system", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("refused values still created the namespace: %v", err)
		}
	})
}

func TestUnreachableClusterIsTransientThenCompletes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := newJob("job_away", Config{ComponentID: "demo"})
	mustStep(t, b.p, j, StepValidate)
	b.env.StopAPIServer(t)
	for _, name := range []string{StepConnect, StepInstall} {
		_, err := step(t, b.p, j, name, false)
		if fe := fault.As(err); fe.Class != job.ClassTransient || fe.Code != kube.CodeUnreachable {
			t.Fatalf("%s with the API server down = %v (%+v), want transient %s", name, err, fe, kube.CodeUnreachable)
		}
	}
	b.env.StartAPIServer(t)
	b.apply(t, j)
	if _, err := b.cs.CoreV1().ConfigMaps("demo-system").Get(t.Context(), "demo-config", metav1.GetOptions{}); err != nil {
		t.Fatalf("configmap after retry: %v", err)
	}
}

func TestBootstrapInstallsDefaultsThroughTheSameInstaller(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in, _, err := kubeConnector(kube.InstallerOptions{CacheDir: t.TempDir()})(t.Context(), kube.Credentials{Endpoint: b.env.Host, CAData: b.env.CA, Token: b.env.Token})
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]map[string]any{"demo": {"message": "from the cluster job"}}
	sts, err := b.p.Bootstrap(t.Context(), in, "job_cluster", []string{"demo"}, vals)
	if err != nil || len(sts) != 1 || sts[0].Status != "deployed" {
		t.Fatalf("Bootstrap = %+v, %v", sts, err)
	}
	again, err := b.p.Bootstrap(t.Context(), in, "job_cluster", []string{"demo"}, vals)
	if err != nil || again[0].Changed || again[0].Revision != 1 {
		t.Fatalf("second Bootstrap = %+v, %v; want unchanged", again, err)
	}
	if _, err := b.p.Bootstrap(t.Context(), in, "job_cluster", []string{"demo"}, map[string]map[string]any{"demo": {"replicas": 99}}); fault.ClassOf(err) != job.ClassUserAction {
		t.Fatalf("Bootstrap with bad values = %v, want user_action", err)
	}
	if err := b.p.Teardown(t.Context(), in, "job_cluster", []string{"demo"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.cs.CoreV1().ConfigMaps("demo-system").Get(t.Context(), "demo-config", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("configmap after teardown: %v", err)
	}
}

// kubeConnector connects as the server does: client-go and the Helm SDK.
func kubeConnector(opts kube.InstallerOptions) Connector {
	return func(ctx context.Context, creds cluster.Credentials) (Installer, string, error) {
		in, v, err := kube.Open(ctx, creds, opts)
		if err != nil {
			return nil, "", err
		}
		return in, v, nil
	}
}
