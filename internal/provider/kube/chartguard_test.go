package kube

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/netguard"
)

// TestChartFetchDialsThroughPolicy proves that a chart fetch is checked where it dials, not
// only by checkChartHost's look-up before it: fetchChart (what locate runs after that check)
// is called directly, as if the host had resolved to an allowed address at check time and to
// 127.0.0.1 at dial time. With a policy that refuses 127.0.0.1 the fetch fails with
// OutboundRefused and the server sees no request; with one that allows it, the same fetch
// succeeds, so the refusal is the policy's and the chart CA still holds on the checked
// connections.
func TestChartFetchDialsThroughPolicy(t *testing.T) {
	t.Parallel()
	pkgs := packageDemo(t)

	var httpHits, tlsHits, regHits atomic.Int64
	httpRepo := httptest.NewServer(counting(&httpHits, http.FileServer(http.Dir(repoDir(t, pkgs, "")))))
	t.Cleanup(httpRepo.Close)

	tlsRepoFiles := &redirectRoot{}
	tlsRepo := tlsServer(t, counting(&tlsHits, tlsRepoFiles))
	tlsRepoFiles.h = http.FileServer(http.Dir(repoDir(t, pkgs, tlsRepo.URL)))
	ca, err := LoadChartCA(writeCA(t, tlsRepo.Certificate()))
	if err != nil {
		t.Fatal(err)
	}

	reg := tlsServer(t, counting(&regHits, ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))))
	pushCharts(t, reg, pkgs)
	regHits.Store(0)
	ociRef := "oci://" + strings.TrimPrefix(reg.URL, "https://") + "/charts/demo"

	refuseLoopback := netguard.New([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")})
	allowLoopback := netguard.New([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")})

	cases := []struct {
		name string
		ca   *ChartCA
		src  ChartSource
		hits *atomic.Int64
	}{
		{"HTTP repository", nil, ChartSource{RepoURL: httpRepo.URL, Name: "demo", Version: servedVersion}, &httpHits},
		{"HTTPS repository with the CA file", ca, ChartSource{RepoURL: tlsRepo.URL, Name: "demo", Version: servedVersion}, &tlsHits},
		{"OCI registry with the CA file", ca, ChartSource{OCI: ociRef, Version: servedVersion}, &regHits},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Not parallel: each case reads its server's request count.
			refused := NewInstaller(nil, InstallerOptions{CacheDir: t.TempDir(), ChartCA: tc.ca, Outbound: refuseLoopback})
			before := tc.hits.Load()
			p, err := refused.fetchChart(tc.src)
			fe := fault.As(err)
			if fe == nil || fe.Class != job.ClassUserAction || fe.Code != "OutboundRefused" {
				t.Fatalf("fetch with 127.0.0.1 refused = %q, %v (%+v); want a user_action OutboundRefused failure", p, err, fe)
			}
			if n := tc.hits.Load() - before; n != 0 {
				t.Fatalf("the server saw %d requests from a fetch the policy refuses; want none", n)
			}

			allowed := NewInstaller(nil, InstallerOptions{CacheDir: t.TempDir(), ChartCA: tc.ca, Outbound: allowLoopback})
			if p, err := allowed.fetchChart(tc.src); err != nil || p == "" {
				t.Fatalf("fetch with 127.0.0.1 allowed = %q, %v; want the chart", p, err)
			}
			if tc.hits.Load() == before {
				t.Fatal("the allowed fetch made no request: the refused one proves nothing")
			}
		})
	}
}

func counting(n *atomic.Int64, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h.ServeHTTP(w, r)
	})
}
