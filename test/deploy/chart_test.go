// Package deploy proves the Helm chart in deploy/helm/groundwork: it lints clean with Helm's
// own linter, renders to the golden manifests in testdata (go test -update rewrites them), and
// every rendered object is accepted by a real kube-apiserver (kubeenv). Nothing runs the pods:
// the API server has no kubelet, so what is proved is that the objects are well-formed.
package deploy

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/groundworkhq/groundwork/internal/testenv/kubeenv"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the chart")

const chartDir = "../../deploy/helm/groundwork"

// cases are the value sets the goldens cover: the defaults, and everything optional switched on.
var cases = []struct {
	name   string
	values map[string]any
	kinds  []string
}{
	{"defaults", nil, []string{"Deployment", "PodDisruptionBudget", "Service", "ServiceAccount"}},
	{"all-enabled", map[string]any{
		"replicaCount":   3,
		"image":          map[string]any{"digest": "sha256:6d7429a37b63ac4901061d6535298f0efa53a8bcbb6c2f6891bbee9b3141b073"},
		"bootstrapToken": map[string]any{"existingSecret": "groundwork-bootstrap"},
		"persistence":    map[string]any{"enabled": true},
		"serviceMonitor": map[string]any{"enabled": true},
		"extraEnv":       []any{map[string]any{"name": "GROUNDWORK_POLL_INTERVAL", "value": "5s"}},
	}, []string{"Deployment", "PersistentVolumeClaim", "PodDisruptionBudget", "Service", "ServiceAccount", "ServiceMonitor"}},
}

func TestChartLints(t *testing.T) {
	t.Parallel()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			l := action.NewLint()
			l.Strict = true
			l.Namespace = "groundwork"
			res := l.Run([]string{chartDir}, c.values)
			for _, err := range res.Errors {
				t.Errorf("lint error: %v", err)
			}
			for _, m := range res.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("lint: %s", m)
				}
			}
			if res.TotalChartsLinted != 1 {
				t.Errorf("linted %d charts, want 1", res.TotalChartsLinted)
			}
		})
	}
}

// render runs Helm's template engine as `helm template gw -n groundwork` does and returns the
// non-empty manifests by template name, in name order.
func render(t *testing.T, values map[string]any) ([]string, []string) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := util.ToRenderValuesWithSchemaValidation(ch, values,
		common.ReleaseOptions{Name: "gw", Namespace: "groundwork", Revision: 1, IsInstall: true},
		common.DefaultCapabilities, false)
	if err != nil {
		t.Fatal(err)
	}
	out, err := engine.Render(ch, vals)
	if err != nil {
		t.Fatal(err)
	}
	var names, docs []string
	for name := range out {
		if strings.HasSuffix(name, ".yaml") && strings.TrimSpace(out[name]) != "" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		docs = append(docs, out[n])
	}
	return names, docs
}

func TestChartGolden(t *testing.T) {
	t.Parallel()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			names, docs := render(t, c.values)
			var b strings.Builder
			for i, n := range names {
				fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", n, strings.TrimSpace(docs[i]))
			}
			path := filepath.Join("testdata", c.name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./test/deploy -run TestChartGolden -update)", err)
			}
			if b.String() != string(want) {
				t.Errorf("rendered chart differs from %s (rerun with -update if the change is meant):\n%s", path, b.String())
			}
			var kinds []string
			for _, d := range docs {
				kinds = append(kinds, decode(t, d).GetKind())
			}
			sort.Strings(kinds)
			if strings.Join(kinds, ",") != strings.Join(c.kinds, ",") {
				t.Errorf("rendered kinds %v, want %v", kinds, c.kinds)
			}
		})
	}
}

func TestChartRequiresTheSecrets(t *testing.T) {
	t.Parallel()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"database", "secretKey"} {
		vals, err := util.ToRenderValuesWithSchemaValidation(ch, map[string]any{key: map[string]any{"existingSecret": ""}},
			common.ReleaseOptions{Name: "gw", Namespace: "groundwork", IsInstall: true}, common.DefaultCapabilities, false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := engine.Render(ch, vals); err == nil || !strings.Contains(err.Error(), key+".existingSecret is required") {
			t.Errorf("render without %s.existingSecret: err = %v", key, err)
		}
	}
}

func decode(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.NewYAMLOrJSONDecoder(strings.NewReader(doc), 4096).Decode(&u.Object); err != nil {
		t.Fatalf("decode manifest: %v\n%s", err, doc)
	}
	return u
}

// serviceMonitorCRD is the smallest CRD that lets the API server store a ServiceMonitor; the
// real one comes with prometheus-operator.
const serviceMonitorCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicemonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {plural: servicemonitors, singular: servicemonitor, kind: ServiceMonitor, listKind: ServiceMonitorList}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
`

func TestChartAppliesToKubeAPIServer(t *testing.T) {
	env := kubeenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	cached := memory.NewMemCacheClient(dc)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cached)
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}

	apply := func(t *testing.T, u *unstructured.Unstructured, ns string) *unstructured.Unstructured {
		t.Helper()
		gvk := u.GroupVersionKind()
		var m *meta.RESTMapping
		deadline := time.Now().Add(30 * time.Second)
		for {
			m, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err == nil || time.Now().After(deadline) {
				break
			}
			// A CRD just created takes a moment to be served; forget what discovery cached.
			mapper.Reset()
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("%s: %v", gvk, err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dyn.Resource(m.Resource).Namespace(ns)
		}
		body, err := u.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		force := true
		got, err := ri.Patch(ctx, u.GetName(), types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: "groundwork-chart-test", Force: &force})
		if err != nil {
			t.Fatalf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		return got
	}

	apply(t, decode(t, serviceMonitorCRD), "")
	for _, c := range cases {
		ns := "gw-" + c.name
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, docs := render(t, c.values)
		for _, d := range docs {
			u := decode(t, d)
			got := apply(t, u, ns)
			if got.GetUID() == "" || got.GetKind() != u.GetKind() {
				t.Errorf("%s: %s %s came back as %s without a uid", c.name, u.GetKind(), u.GetName(), got.GetKind())
			}
		}
		// Read the Deployment back through the typed client: the server kept the hardening.
		dep, err := cs.AppsV1().Deployments(ns).Get(ctx, "gw-groundwork", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ctr := dep.Spec.Template.Spec.Containers[0]
		sc := ctr.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
			t.Errorf("%s: container securityContext %+v", c.name, sc)
		}
		psc := dep.Spec.Template.Spec.SecurityContext
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 {
			t.Errorf("%s: pod securityContext %+v", c.name, psc)
		}
		if ctr.ReadinessProbe == nil || ctr.ReadinessProbe.HTTPGet == nil || ctr.ReadinessProbe.HTTPGet.Path != "/readyz" ||
			ctr.LivenessProbe == nil || ctr.LivenessProbe.HTTPGet == nil || ctr.LivenessProbe.HTTPGet.Path != "/healthz" {
			t.Errorf("%s: probes %+v %+v", c.name, ctr.ReadinessProbe, ctr.LivenessProbe)
		}
		secrets := map[string]string{}
		for _, e := range ctr.Env {
			if e.Value != "" && (strings.Contains(e.Name, "SECRET") || strings.Contains(e.Name, "DATABASE")) {
				t.Errorf("%s: %s has a literal value; it must come from a Secret", c.name, e.Name)
			}
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				secrets[e.Name] = e.ValueFrom.SecretKeyRef.Name
			}
		}
		if secrets["GROUNDWORK_DATABASE"] != "groundwork-database" || secrets["GROUNDWORK_SECRET_KEY"] != "groundwork-secret-key" {
			t.Errorf("%s: env from secrets %v", c.name, secrets)
		}
		if ctr.Resources.Requests.Cpu().IsZero() || ctr.Resources.Requests.Memory().IsZero() {
			t.Errorf("%s: no resource requests: %+v", c.name, ctr.Resources)
		}
	}
}
