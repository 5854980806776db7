package kube

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundworkhq/groundwork/internal/testenv/kubeenv"
)

// Environment of the child process of TestSIGKILLDuringInstall.
const (
	childHost  = "GW_KUBE_CHILD_HOST"
	childCA    = "GW_KUBE_CHILD_CA"
	childToken = "GW_KUBE_CHILD_TOKEN"
)

func crashRelease() Release {
	return Release{
		Name: "demo", Namespace: "crash",
		Chart:  ChartSource{Path: demoChart},
		Values: map[string]any{"message": "survives", "preInstallHook": true},
		Labels: map[string]string{LabelJobID: "job_crash"},
	}
}

// TestSIGKILLDuringInstall kills a process in the middle of a Helm install (the release is
// recorded pending-install and Helm is waiting on the chart's pre-install hook), then runs the
// same job's install again as a restarted worker would: the release ends deployed exactly once.
func TestSIGKILLDuringInstall(t *testing.T) {
	if os.Getenv(childHost) != "" {
		runChildInstall(t)
		return
	}
	t.Parallel()
	env := kubeenv.Start(t)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, env.CA, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSIGKILLDuringInstall$", "-test.count=1")
	cmd.Env = append(os.Environ(), childHost+"="+env.Host, childCA+"="+caFile, childToken+"="+env.Token)
	out, err := os.Create(filepath.Join(t.TempDir(), "child.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	cluster, err := Connect(Credentials{Endpoint: env.Host, CAData: env.CA, Token: env.Token})
	if err != nil {
		t.Fatal(err)
	}
	in := NewInstaller(cluster, InstallerOptions{CacheDir: t.TempDir()})
	// Kill once the release is recorded pending-install and Helm has created the hook Job it
	// is now waiting on.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatal("the child never reached pending-install with its hook created")
		}
		select {
		case err := <-done:
			b, _ := os.ReadFile(out.Name())
			t.Fatalf("child exited before it was killed: %v\n%s", err, b)
		default:
		}
		st, found, _ := in.Status(t.Context(), "demo", "crash")
		_, hookErr := cluster.Clientset().BatchV1().Jobs("crash").Get(t.Context(), "demo-pre-install", metav1.GetOptions{})
		if found && st.Status == "pending-install" && hookErr == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-done

	st, err := in.InstallOrUpgrade(t.Context(), crashRelease())
	if err != nil {
		t.Fatalf("install after the kill: %v", err)
	}
	if st.Status != "deployed" {
		t.Fatalf("status after the kill = %+v", st)
	}
	hist, err := in.History(t.Context(), "demo", "crash")
	if err != nil {
		t.Fatal(err)
	}
	deployed := 0
	for _, h := range hist {
		if h.Status == "deployed" {
			deployed++
		}
		if h.Status == "pending-install" || h.Status == "pending-upgrade" {
			t.Fatalf("a revision is still pending: %+v", hist)
		}
	}
	if deployed != 1 {
		t.Fatalf("history = %+v, want exactly one deployed revision", hist)
	}
	cm, err := cluster.Clientset().CoreV1().ConfigMaps("crash").Get(t.Context(), "demo-config", metav1.GetOptions{})
	if err != nil || cm.Data["message"] != "survives" {
		t.Fatalf("configmap after recovery = %v, %v", cm, err)
	}
	// And a further retry of the same step changes nothing.
	again, err := in.InstallOrUpgrade(t.Context(), crashRelease())
	if err != nil || again.Changed || again.Revision != st.Revision {
		t.Fatalf("re-run after recovery = %+v, %v", again, err)
	}
}

// runChildInstall is the process that gets killed: it installs and blocks on the hook.
func runChildInstall(t *testing.T) {
	ca, err := os.ReadFile(os.Getenv(childCA))
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := Connect(Credentials{Endpoint: os.Getenv(childHost), CAData: ca, Token: os.Getenv(childToken)})
	if err != nil {
		t.Fatal(err)
	}
	in := NewInstaller(cluster, InstallerOptions{CacheDir: t.TempDir(), HookTimeout: 2 * time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err = in.InstallOrUpgrade(ctx, crashRelease())
	t.Fatalf("the install returned (%v); it should have been killed while waiting on its hook", err)
}
