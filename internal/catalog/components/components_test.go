package components

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

func TestDefaultCatalogHasTheCuratedComponents(t *testing.T) {
	t.Parallel()
	cat, err := Default()
	if err != nil {
		t.Fatalf("Default: %v", err)
	}
	want := map[string]string{
		"ingress-nginx":         "ingress",
		"cert-manager":          "tls",
		"kube-prometheus-stack": "observability",
		"external-dns":          "dns",
		"metrics-server":        "observability",
	}
	got := map[string]string{}
	for _, s := range cat.List() {
		if s.Name == "" || s.Version == "" || s.Description == "" {
			t.Errorf("%s: incomplete summary %+v", s.ID, s)
		}
		got[s.ID] = s.Category
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("components = %v, want %v", got, want)
	}
	nginx, _ := cat.Get("ingress-nginx")
	if nginx.Chart.RepoURL == "" || nginx.Chart.Version != "4.10.0" {
		t.Errorf("ingress-nginx chart = %+v", nginx.Chart)
	}
	prom, _ := cat.Get("kube-prometheus-stack")
	if !strings.HasPrefix(prom.Chart.OCI, "oci://") {
		t.Errorf("kube-prometheus-stack chart = %+v, want an OCI reference", prom.Chart)
	}
}

func TestListMatchesTheReferenceShape(t *testing.T) {
	t.Parallel()
	cat, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(cat.List()[0])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "name", "category", "version", "description", "defaultValues"} {
		if _, ok := m[k]; !ok {
			t.Errorf("listing lacks %q: %s", k, b)
		}
	}
	if m["id"] != "ingress-nginx" || m["version"] != "4.10.0" || m["category"] != "ingress" {
		t.Errorf("first entry = %s", b)
	}
}

func TestValues(t *testing.T) {
	t.Parallel()
	cat, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		component string
		user      map[string]any
		check     func(t *testing.T, v map[string]any)
		wantField string // non-empty: validation must fail naming this field
	}{
		"dotted key from the reference": {
			component: "ingress-nginx",
			user:      map[string]any{"controller.service.type": "NodePort"},
			check: func(t *testing.T, v map[string]any) {
				c := v["controller"].(map[string]any)
				if got := c["service"].(map[string]any)["type"]; got != "NodePort" {
					t.Errorf("service.type = %v", got)
				}
				// Defaults beside the overridden key survive.
				if got := c["replicaCount"]; got != float64(2) {
					t.Errorf("replicaCount = %v, want default 2", got)
				}
			},
		},
		"nested and dotted together": {
			component: "ingress-nginx",
			user: map[string]any{
				"controller":                 map[string]any{"replicaCount": 3},
				"controller.metrics.enabled": false,
				`controller.service.annotations.service\.beta\.kubernetes\.io/aws-load-balancer-type`: "nlb",
			},
			check: func(t *testing.T, v map[string]any) {
				c := v["controller"].(map[string]any)
				if c["replicaCount"] != 3 || c["metrics"].(map[string]any)["enabled"] != false {
					t.Errorf("controller = %v", c)
				}
				ann := c["service"].(map[string]any)["annotations"].(map[string]any)
				if ann["service.beta.kubernetes.io/aws-load-balancer-type"] != "nlb" {
					t.Errorf("annotations = %v", ann)
				}
			},
		},
		"enum violated": {
			component: "ingress-nginx",
			user:      map[string]any{"controller.service.type": "Balanced"},
			wantField: "controller.service.type",
		},
		"wrong type": {
			component: "cert-manager",
			user:      map[string]any{"replicaCount": "two"},
			wantField: "replicaCount",
		},
		"below minimum in nested form": {
			component: "kube-prometheus-stack",
			user:      map[string]any{"prometheus": map[string]any{"prometheusSpec": map[string]any{"replicas": 0}}},
			wantField: "prometheus.prometheusSpec.replicas",
		},
		"array item": {
			component: "external-dns",
			user:      map[string]any{"sources": []any{"service", "pods"}},
			wantField: "sources.1",
		},
		"key set twice": {
			component: "ingress-nginx",
			user:      map[string]any{"controller.replicaCount": 3, "controller": map[string]any{"replicaCount": 4}},
			wantField: "controller.replicaCount",
		},
		"field inside a scalar": {
			component: "metrics-server",
			user:      map[string]any{"replicas": 2, "replicas.max": 3},
			wantField: "replicas.max",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			comp, ok := cat.Get(tc.component)
			if !ok {
				t.Fatalf("no component %s", tc.component)
			}
			v, err := comp.Values(tc.user)
			if tc.wantField != "" {
				var ve *ValuesError
				if !errors.As(err, &ve) {
					t.Fatalf("err = %v, want a ValuesError", err)
				}
				fields := []string{}
				for _, fe := range ve.Errors {
					fields = append(fields, fe.Field)
				}
				if !strings.Contains(strings.Join(fields, ","), tc.wantField) || !strings.Contains(err.Error(), tc.wantField) {
					t.Fatalf("error %q (fields %v) does not name %s", err, fields, tc.wantField)
				}
				return
			}
			if err != nil {
				t.Fatalf("Values: %v", err)
			}
			tc.check(t, v)
		})
	}
}

func TestValuesDoesNotModifyTheCatalog(t *testing.T) {
	t.Parallel()
	cat, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	comp, _ := cat.Get("ingress-nginx")
	if _, err := comp.Values(map[string]any{"controller.service.type": "ClusterIP"}); err != nil {
		t.Fatal(err)
	}
	svc := comp.Defaults["controller"].(map[string]any)["service"].(map[string]any)
	if svc["type"] != "LoadBalancer" {
		t.Fatalf("default service.type changed to %v", svc["type"])
	}
}

func TestParseRejectsBrokenCatalogs(t *testing.T) {
	t.Parallel()
	const good = `
  - id: a
    name: A
    category: x
    description: d
    chart: {repoURL: "https://charts.example", name: a, version: 1.0.0}
    namespace: a
    releaseName: a
`
	cases := map[string]struct {
		doc  string
		want string
	}{
		"duplicate id": {doc: "components:" + good + good, want: `id "a" appears twice`},
		"no chart source": {doc: `components:
  - {id: b, name: B, category: x, description: d, chart: {version: 1.0.0}, namespace: b, releaseName: b}`, want: "exactly one of repoURL or oci"},
		"defaults break schema": {doc: `components:
  - id: c
    name: C
    category: x
    description: d
    chart: {oci: "oci://r.example/c", version: 1.0.0}
    namespace: c
    releaseName: c
    defaults: {replicas: many}
    schema: {type: object, properties: {replicas: {type: integer}}}`, want: "replicas"},
		"unknown field": {doc: "components:" + good + "    colour: blue\n", want: "colour"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
	if _, err := Parse([]byte("components:" + good)); err != nil {
		t.Fatalf("good catalog: %v", err)
	}
}

func TestListHandler(t *testing.T) {
	t.Parallel()
	cat, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	cat.ListHandler()(rec, httptest.NewRequest(http.MethodGet, "/api/catalog/components", nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("status %d type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	var body struct {
		Data []Summary `json:"data"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Data) != 5 || body.Data[1].ID != "cert-manager" || body.Data[1].Category != "tls" {
		t.Fatalf("data = %+v", body.Data)
	}
}
