package app

import (
	"context"
	"encoding/base64"
	"log/slog"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/groundworkhq/groundwork/internal/job"
	kubepipe "github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/provider/kube"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store/sqlite"
	"github.com/groundworkhq/groundwork/internal/testenv/kubeenv"
)

// The cluster pipeline's bootstrap-components step installs through the component family's
// installer: a new cluster (here a real API server, its CA given base64 as EKS returns it, its
// token from the mint function) gets the catalog's chart, labelled with the cluster job.
func TestClusterBootstrapInstallsThroughTheComponentInstaller(t *testing.T) {
	t.Parallel()
	env := kubeenv.Start(t)
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sec, err := secrets.OpenLocal(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	testdata, _ := filepath.Abs(filepath.Join("..", "..", "test", "components", "testdata"))
	parts, err := wireComponents(Options{DataDir: dir, Logger: slog.New(slog.DiscardHandler), Components: ComponentOptions{
		ChartDir: filepath.Join(testdata, "charts"), CatalogFile: filepath.Join(testdata, "catalog.yaml"),
	}}, st, secrets.NewVault(sec, st))
	if err != nil {
		t.Fatal(err)
	}
	minted := 0
	inst := parts.bootstrap(func(_ context.Context, j *job.Job, cl kubepipe.Cluster) (string, error) {
		minted++
		return env.Token, nil
	})
	cl := kubepipe.Cluster{Name: "fresh", Endpoint: env.Host, CAData: base64.StdEncoding.EncodeToString(env.CA)}
	j := &job.Job{ID: "job_cluster1", Family: job.FamilyKubernetes}
	for i := 0; i < 2; i++ { // a re-run (after a crash before the checkpoint) changes nothing
		if err := inst.Install(t.Context(), j, cl, []string{"demo"}); err != nil {
			t.Fatalf("bootstrap #%d: %v", i+1, err)
		}
	}
	if minted != 2 {
		t.Fatalf("tokens minted: %d, want one per run", minted)
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	cms, err := cs.CoreV1().ConfigMaps("").List(t.Context(), metav1.ListOptions{LabelSelector: kube.LabelJobID + "=job_cluster1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cms.Items) != 1 {
		t.Fatalf("%d config maps labelled with the cluster job, want the demo chart's one", len(cms.Items))
	}
	if err := inst.Install(t.Context(), j, kubepipe.Cluster{Name: "x", Endpoint: env.Host, CAData: "%%%"}, []string{"demo"}); err == nil {
		t.Fatal("a CA that is neither PEM nor base64 was accepted")
	}
}
