package kubeenv

import (
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
)

func TestRestartOnTheSamePort(t *testing.T) {
	t.Parallel()
	env := Start(t)
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil || v.GitVersion != Version {
		t.Fatalf("server version = %v, %v; want %s", v, err, Version)
	}
	start := time.Now()
	env.StopAPIServer(t)
	t.Logf("stopped in %s", time.Since(start))
	if _, err := cs.Discovery().ServerVersion(); err == nil {
		t.Fatal("API server still answers after StopAPIServer")
	}
	start = time.Now()
	env.StartAPIServer(t)
	t.Logf("restarted in %s", time.Since(start))
	if _, err := cs.Discovery().ServerVersion(); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}
