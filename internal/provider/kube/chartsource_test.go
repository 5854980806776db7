package kube

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/registry"
	repo "helm.sh/helm/v4/pkg/repo/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/testenv/kubeenv"
)

// servedVersion exists only on the chart servers below: the testdata chart is 0.1.0, so a
// release of it can only have come over the network.
const (
	servedVersion = "0.2.0"
	servedMessage = "served over the network"
)

// TestChartSources installs charts the way production fetches them, through Helm's
// LocateChart: from an HTTP chart repository (index.yaml) and from an OCI registry, both
// served in-process on 127.0.0.1.
func TestChartSources(t *testing.T) {
	t.Parallel()
	env := kubeenv.Start(t)
	cluster, err := Connect(Credentials{Endpoint: env.Host, CAData: env.CA, Token: env.Token})
	if err != nil {
		t.Fatal(err)
	}
	pkgs := packageDemo(t)
	plain := NewInstaller(cluster, InstallerOptions{CacheDir: t.TempDir()})

	// This index has relative chart URLs, the TLS one absolute URLs: repositories use both.
	httpRepo := httptest.NewServer(http.FileServer(http.Dir(repoDir(t, pkgs, ""))))
	t.Cleanup(httpRepo.Close)

	// The TLS servers share one certificate, made by httptest; its CA file is what an
	// operator would pass for a mirror with a private CA.
	tlsRepoFiles := &redirectRoot{}
	tlsRepo := tlsServer(t, tlsRepoFiles)
	tlsRepoFiles.h = http.FileServer(http.Dir(repoDir(t, pkgs, tlsRepo.URL)))
	caFile := writeCA(t, tlsRepo.Certificate())
	ca, err := LoadChartCA(caFile)
	if err != nil {
		t.Fatal(err)
	}
	withCA := NewInstaller(cluster, InstallerOptions{CacheDir: t.TempDir(), ChartCA: ca})

	reg := tlsServer(t, ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	regHost := strings.TrimPrefix(reg.URL, "https://")
	pushCharts(t, reg, pkgs)
	ociRef := "oci://" + regHost + "/charts/demo"

	dead := closedAddr(t)

	install := func(t *testing.T, in *Installer, ns string, src ChartSource) (ReleaseStatus, error) {
		t.Helper()
		return in.InstallOrUpgrade(t.Context(), Release{
			Name: "demo", Namespace: ns, Chart: src,
			Labels: map[string]string{LabelJobID: "job_" + ns},
		})
	}

	t.Run("installs", func(t *testing.T) {
		t.Parallel()
		cases := []struct {
			name, ns string
			in       *Installer
			src      ChartSource
		}{
			{"HTTP repository", "fromhttp", plain, ChartSource{RepoURL: httpRepo.URL, Name: "demo", Version: servedVersion}},
			{"HTTPS repository with the CA file", "fromhttps", withCA, ChartSource{RepoURL: tlsRepo.URL, Name: "demo", Version: servedVersion}},
			{"OCI registry with the CA file", "fromoci", withCA, ChartSource{OCI: ociRef, Version: servedVersion}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				st, err := install(t, tc.in, tc.ns, tc.src)
				if err != nil {
					t.Fatalf("install: %v", err)
				}
				if st.Status != "deployed" || st.Chart != "demo" || st.ChartVersion != servedVersion || st.Revision != 1 {
					t.Fatalf("status = %+v, want demo %s deployed at revision 1", st, servedVersion)
				}
				cs := cluster.Clientset()
				cm, err := cs.CoreV1().ConfigMaps(tc.ns).Get(t.Context(), "demo-config", metav1.GetOptions{})
				if err != nil {
					t.Fatalf("configmap: %v", err)
				}
				if cm.Data["message"] != servedMessage || cm.Labels[LabelJobID] != "job_"+tc.ns {
					t.Fatalf("configmap data %v labels %v, want the served chart's default message", cm.Data, cm.Labels)
				}
				if _, err := cs.AppsV1().Deployments(tc.ns).Get(t.Context(), "demo", metav1.GetOptions{}); err != nil {
					t.Fatalf("deployment: %v", err)
				}
				// A re-run fetches the chart again and finds the release as asked.
				again, err := install(t, tc.in, tc.ns, tc.src)
				if err != nil || again.Changed || again.Revision != 1 {
					t.Fatalf("re-run = %+v, %v; want unchanged revision 1", again, err)
				}
			})
		}
	})

	t.Run("failures", func(t *testing.T) {
		t.Parallel()
		cases := []struct {
			name, ns string
			in       *Installer
			src      ChartSource
			class    job.FailureClass
			code     string
			mention  string
		}{
			{"version the HTTP repository lacks", "httpmissing", plain,
				ChartSource{RepoURL: httpRepo.URL, Name: "demo", Version: "9.9.9"}, job.ClassUserAction, CodeInvalidChart, "9.9.9"},
			{"chart the HTTP repository lacks", "httpnochart", plain,
				ChartSource{RepoURL: httpRepo.URL, Name: "nosuchchart", Version: servedVersion}, job.ClassUserAction, CodeInvalidChart, "nosuchchart"},
			{"version the OCI registry lacks", "ocimissing", withCA,
				ChartSource{OCI: ociRef, Version: "9.9.9"}, job.ClassUserAction, CodeInvalidChart, "9.9.9"},
			{"HTTPS repository without its CA", "httpsnoca", plain,
				ChartSource{RepoURL: tlsRepo.URL, Name: "demo", Version: servedVersion}, job.ClassUserAction, CodeChartCertificate, "certificate"},
			{"OCI registry without its CA", "ocinoca", plain,
				ChartSource{OCI: ociRef, Version: servedVersion}, job.ClassUserAction, CodeChartCertificate, "certificate"},
			{"HTTP repository nothing listens on", "httpdead", plain,
				ChartSource{RepoURL: "http://" + dead, Name: "demo", Version: servedVersion}, job.ClassTransient, "ChartRepositoryUnreachable", dead},
			{"OCI registry nothing listens on", "ocidead", withCA,
				ChartSource{OCI: "oci://" + dead + "/charts/demo", Version: servedVersion}, job.ClassTransient, "ChartRepositoryUnreachable", dead},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				_, err := install(t, tc.in, tc.ns, tc.src)
				fe := fault.As(err)
				if fe == nil || fe.Class != tc.class || fe.Code != tc.code || !strings.Contains(err.Error(), tc.mention) {
					t.Fatalf("install = %v (%+v), want %s %s mentioning %q", err, fe, tc.class, tc.code, tc.mention)
				}
				if _, found, err := tc.in.Status(t.Context(), "demo", tc.ns); err != nil || found {
					t.Fatalf("a release was recorded for a chart that could not be fetched: found=%v err=%v", found, err)
				}
			})
		}
	})

	t.Run("unreadable CA file is refused when loaded, before any install", func(t *testing.T) {
		t.Parallel()
		bad := filepath.Join(t.TempDir(), "ca.pem")
		if err := os.WriteFile(bad, []byte("not a certificate"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, file := range []string{bad, filepath.Join(t.TempDir(), "missing.pem")} {
			if ca, err := LoadChartCA(file); err == nil || ca != nil || !strings.Contains(err.Error(), "CA file") {
				t.Fatalf("LoadChartCA(%s) = %v, %v; want an error naming the CA file", file, ca, err)
			}
		}
	})
}

// packageDemo packages the testdata chart as it is (0.1.0) and as servedVersion with another
// default message, and returns the two .tgz files.
func packageDemo(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	var out []string
	for _, v := range []string{"0.1.0", servedVersion} {
		ch, err := loader.Load(demoChart)
		if err != nil {
			t.Fatal(err)
		}
		if v != ch.Metadata.Version {
			ch.Metadata.Version = v
			// Save writes values.yaml from the raw file, not from ch.Values.
			for _, f := range ch.Raw {
				if f.Name == "values.yaml" {
					f.Data = []byte(strings.Replace(string(f.Data), "message: hello", "message: "+servedMessage, 1))
				}
			}
		}
		p, err := chartutil.Save(ch, dir)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// tlsServer serves h over TLS with httptest's certificate. The handshakes that the cases
// without the CA fail on purpose are not logged.
func tlsServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// repoDir lays the packages out as a chart repository whose index.yaml points at baseURL
// (relative URLs when it is empty).
func repoDir(t *testing.T, pkgs []string, baseURL string) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range pkgs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(p)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	idx, err := repo.IndexDirectory(dir, baseURL)
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// redirectRoot lets a server be started (so its URL is known) before the handler that needs
// the URL exists; requests arrive only after the handler is set.
type redirectRoot struct{ h http.Handler }

func (r *redirectRoot) ServeHTTP(w http.ResponseWriter, req *http.Request) { r.h.ServeHTTP(w, req) }

// pushCharts pushes every package to reg as charts/<name>:<version> with Helm's own client.
func pushCharts(t *testing.T, reg *httptest.Server, pkgs []string) {
	t.Helper()
	rc, err := registry.NewClient(
		registry.ClientOptHTTPClient(reg.Client()),
		registry.ClientOptCredentialsFile(filepath.Join(t.TempDir(), "registry.json")),
		registry.ClientOptWriter(io.Discard),
	)
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(reg.URL, "https://")
	for _, p := range pkgs {
		ch, err := loader.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		ref := host + "/charts/" + ch.Metadata.Name + ":" + ch.Metadata.Version
		if _, err := rc.Push(data, ref); err != nil {
			t.Fatalf("push %s: %v", ref, err)
		}
	}
}

func writeCA(t *testing.T, cert *x509.Certificate) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// closedAddr returns a 127.0.0.1 address that nothing listens on: the port was just free.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		t.Fatal(err)
	}
	return addr
}
