package gcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/client"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/provider/gcp/gcpfake"
	"github.com/groundworkhq/groundwork/internal/testenv/childserver"
)

// Environment of a child server.
const (
	envServe   = "GW_GCP_SERVE"
	envDataDir = "GW_GCP_DATA_DIR"
	envAddr    = "GW_GCP_ADDR"
	envCrashAt = "GW_GCP_CRASH_AT" // step#n,...: SIGKILL after the n-th Do of the step (*: every step)
	envMarkers = "GW_GCP_MARKER_DIR"
)

const childToken = "gw_test_gcp_crash_0123456789abcdef"

// serve is the child: a real server, SIGKILLed after the listed calls of its steps, after the
// cloud calls and before the engine records them. It reaches the parent's fake project
// through the account's endpoints, as it would any GCP-compatible target.
func serve() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	afterDo := childserver.CrashAfter(os.Getenv(envMarkers), os.Getenv(envCrashAt))
	err := app.Run(ctx, app.Options{
		Addr: os.Getenv(envAddr), DataDir: os.Getenv(envDataDir), BootstrapToken: childToken,
		PollInterval: 50 * time.Millisecond, ShutdownGrace: time.Second,
		Logger:     slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		AWS:        app.AWSOptions{Poll: 50 * time.Millisecond, LeaseTTL: time.Second, AfterDo: afterDo},
		Datastores: app.DatastoreOptions{Poll: 50 * time.Millisecond, LeaseTTL: time.Second, AfterDo: afterDo},
		Components: app.ComponentOptions{LeaseTTL: time.Second},
		GCP:        app.GCPOptions{Poll: 10 * time.Millisecond},
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// crashJobs are the jobs the crash test runs, one per family, and what each holds when done.
var crashJobs = map[string]struct {
	kind, config string
	made         map[string]int // resource kind → how many the job holds when done
}{
	"registry": {"registry", `{"name":"crash-images"}`, map[string]int{"artifactregistry.repository": 1}},
	"dns_zone": {"dns_zone", `{"domain":"crash.example.com"}`,
		map[string]int{"dns#managedZone": 1}},
	"network": {"network", `{"cidr":"10.50.0.0/16"}`, map[string]int{"compute#network": 1, "compute#subnetwork": 1,
		"compute#router": 1, "compute#firewall": 2, "compute#address": 1}},
	"datastore": {"datastore", `{"engine":"postgres","version":"16","instanceClass":"db-custom-2-7680"}`,
		map[string]int{"sql#instance": 1, "compute#network": 1}},
	"kubernetes": {"kubernetes", `{"name":"crash","version":"1.33","nodeGroups":[{"name":"system","instanceType":"e2-standard-4","min":1,"max":3}]}`,
		map[string]int{"container.cluster": 1, "iam.serviceAccount": 1, "compute#network": 1, "compute#subnetwork": 1}},
	"vm_pool": {"vm_pool", `{"name":"crash","instanceType":"e2-small","min":2,"max":2,"createLoadBalancer":true,"listenerPorts":[80]}`,
		map[string]int{"compute#instanceTemplate": 1, "compute#instance": 2, "compute#instanceGroup": 1, "compute#backendService": 1,
			"compute#healthCheck": 1, "compute#urlMap": 1, "compute#targetHttpProxy": 1, "compute#forwardingRule": 1, "iam.serviceAccount": 1}},
}

// TestCrashMidPipelineResumes SIGKILLs the server during one job of every GCP family: after
// the first call of every step (an operation started, its name not yet recorded) and after
// the third (names recorded, operations in flight). Restarted each time, the server completes
// every job: every create was sent once, every job holds one of each thing it makes, and
// teardown leaves nothing of any job.
func TestCrashMidPipelineResumes(t *testing.T) {
	t.Parallel()
	cloud := gcpfake.New(t)
	markers := t.TempDir()
	addr := childserver.FreeAddr(t)
	c := childserver.Start(t, append(os.Environ(), envServe+"=1", envDataDir+"="+t.TempDir(), envAddr+"="+addr,
		envCrashAt+"=*#1,*#3", envMarkers+"="+markers))
	cl := client.New("http://"+addr, childToken)
	c.WaitUp(cl)
	space := newSpace(t, cl, cloud, nil)

	ids := map[string]string{}
	for name, spec := range crashJobs {
		var j job.Job
		if err := cl.Do(testCtx(t), http.MethodPost, "/api/provisioning-jobs",
			map[string]any{"spaceID": space.ID, "kind": spec.kind, "config": json.RawMessage(spec.config)}, &j); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		ids[name] = j.ID
	}
	if err := os.WriteFile(filepath.Join(markers, childserver.Armed), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	restarts := c.WaitJobs(t, cl, ids, job.StatusCompleted, deadline)
	crashed, _ := filepath.Glob(filepath.Join(markers, "*.crash"))
	for name, id := range ids {
		if n, _ := filepath.Glob(filepath.Join(markers, id+".*.crash")); len(n) == 0 {
			t.Errorf("the %s job never crashed", name)
		}
	}
	for name, spec := range crashJobs {
		have := labelled(cloud, ids[name])
		for kind, n := range spec.made {
			if have[kind] != n {
				t.Errorf("%s holds %d of %s after the crashes, want %d (all: %v)", name, have[kind], kind, n, have)
			}
		}
	}
	// Every create reached Google once: a re-run after a crash found what the first made.
	// (Compute inserts carry a requestId, and a re-sent one is answered 200 with the first
	// call's operation; the counts above hold them to one of each.)
	for host, path := range map[string]string{gcpfake.HostArtifactRegistry: "/repositories", gcpfake.HostDNS: "/managedZones",
		"sqladmin.googleapis.com": "/instances", "container.googleapis.com": "/clusters"} {
		creates := 0
		for _, call := range cloud.Calls() {
			if call.Service == host && call.Method == http.MethodPost && strings.HasSuffix(call.Path, path) && call.Status == http.StatusOK {
				creates++
			}
		}
		if creates != 1 {
			t.Errorf("%s: %d successful creates across the crashes, want 1", host, creates)
		}
	}
	t.Logf("%d crashes, %d restarts", len(crashed), restarts)

	for name, id := range ids {
		if err := cl.Do(testCtx(t), http.MethodDelete, "/api/provisioning-jobs/"+id, nil, nil); err != nil {
			t.Fatalf("delete %s: %v", name, err)
		}
	}
	c.WaitJobs(t, cl, ids, job.StatusDeleted, deadline)
	for name, id := range ids {
		if left := labelled(cloud, id); len(left) > 0 {
			t.Errorf("after teardown the project still holds %v of the %s job", left, name)
		}
	}
}
