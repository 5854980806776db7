package azure

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
	"github.com/groundworkhq/groundwork/internal/provider/azure/azurefake"
	"github.com/groundworkhq/groundwork/internal/testenv/childserver"
)

// Environment of a child server.
const (
	envServe   = "GW_AZURE_SERVE"
	envDataDir = "GW_AZURE_DATA_DIR"
	envAddr    = "GW_AZURE_ADDR"
	envCloud   = "GW_AZURE_CLOUD"    // the parent's azurefake URL
	envCrashAt = "GW_AZURE_CRASH_AT" // step#n,...: SIGKILL after the n-th Do of the step (*: every step)
	envMarkers = "GW_AZURE_MARKER_DIR"
)

const childToken = "gw_test_azure_crash_0123456789abcdef"

// serve is the child: a real server on the parent's fake subscription, SIGKILLed after the
// listed calls of its steps, after the cloud calls and before the engine records them.
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
		Azure:      app.AzureOptions{Transport: azurefake.Transport(os.Getenv(envCloud)), Poll: 10 * time.Millisecond},
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestCrashMidPipelineResumes SIGKILLs the server during one job of every Azure family: after
// the first call of every step (an operation started, its token not yet recorded) and after
// the third (tokens recorded, operations in flight). Restarted each time, the server
// completes every job: the network's resources are each PUT exactly once, every job holds
// one of each thing it makes, the operations recorded before a crash are polled after it,
// and teardown leaves nothing of any job.
func TestCrashMidPipelineResumes(t *testing.T) {
	t.Parallel()
	cloud := azurefake.New(t)
	markers := t.TempDir()
	addr := childserver.FreeAddr(t)
	c := childserver.Start(t, append(os.Environ(), envServe+"=1", envDataDir+"="+t.TempDir(), envAddr+"="+addr, envCloud+"="+cloud.URL,
		envCrashAt+"=*#1,*#3", envMarkers+"="+markers))
	cl := client.New("http://"+addr, childToken)
	c.WaitUp(cl)
	e := &env{cloud: cloud, space: newSpaceWith(t, cl, cloud.URL, nil, map[string]string{"keyVaultURL": "https://crash-kv.vault.azure.net/"})}

	jobs := map[string]struct {
		kind, config string
		made         map[string]int // resource type → how many the job holds when done
	}{
		"network": {"network", `{"cidr":"10.50.0.0/16"}`, map[string]int{"Microsoft.Network/virtualNetworks": 1,
			"Microsoft.Network/natGateways": 1, "Microsoft.Network/publicIPAddresses": 1, "Microsoft.Network/networkSecurityGroups": 1}},
		"registry": {"registry", `{"name":"crash-images"}`, map[string]int{"Microsoft.ContainerRegistry/registries": 1}},
		"dns_zone": {"dns_zone", `{"domain":"crash.example.com"}`, map[string]int{"Microsoft.Network/dnszones": 1}},
		"datastore": {"datastore", `{"engine":"postgres","version":"16","instanceClass":"Standard_D2ds_v5"}`,
			map[string]int{"Microsoft.DBforPostgreSQL/flexibleServers": 1, "Microsoft.Network/virtualNetworks": 1}},
		"kubernetes": {"kubernetes", `{"name":"crash","version":"1.30","nodeGroups":[{"name":"system","instanceType":"Standard_D4s_v5","min":1,"max":3}]}`,
			map[string]int{"Microsoft.ContainerService/managedClusters": 1, "Microsoft.ManagedIdentity/userAssignedIdentities": 1,
				"Microsoft.Network/virtualNetworks": 1}},
	}
	ids := map[string]string{}
	for name, spec := range jobs {
		var j job.Job
		if err := cl.Do(testCtx(t), http.MethodPost, "/api/provisioning-jobs",
			map[string]any{"spaceID": e.space.ID, "kind": spec.kind, "config": json.RawMessage(spec.config)}, &j); err != nil {
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
		n, _ := filepath.Glob(filepath.Join(markers, id+".*.crash"))
		if len(n) == 0 {
			t.Errorf("the %s job never crashed", name)
		}
	}
	puts := map[string]int{}
	for _, call := range cloud.Calls() {
		if strings.HasPrefix(call, "PUT ") && strings.Contains(call, "/gw-"+strings.ToLower(ids["network"][len(ids["network"])-12:])) {
			puts[call]++
		}
	}
	if len(puts) != 4 {
		t.Errorf("the network's PUTs %v; want one each of the NSG, NAT IP, NAT gateway and VNet", puts)
	}
	for call, n := range puts {
		if n != 1 {
			t.Errorf("%s sent %d times across the crashes", call, n)
		}
	}
	for name, spec := range jobs {
		have := tagged(cloud, ids[name])
		for typ, n := range spec.made {
			if have[typ] != n {
				t.Errorf("%s holds %d of %s after the crashes, want %d (all: %v)", name, have[typ], typ, n, have)
			}
		}
	}
	if cloud.OperationPolls() == 0 {
		t.Error("no operation was polled: the restarted server did not resume from the recorded tokens")
	}
	t.Logf("%d crashes, %d restarts, %d operation polls", len(crashed), restarts, cloud.OperationPolls())

	for name, id := range ids {
		if err := cl.Do(testCtx(t), http.MethodDelete, "/api/provisioning-jobs/"+id, nil, nil); err != nil {
			t.Fatalf("delete %s: %v", name, err)
		}
	}
	c.WaitJobs(t, cl, ids, job.StatusDeleted, deadline)
	for name, id := range ids {
		if left := tagged(cloud, id); len(left) > 0 {
			t.Errorf("after teardown the subscription still holds %v of the %s job", left, name)
		}
	}
	if left := cloud.VaultSecrets("crash-kv"); len(left) != 0 {
		t.Errorf("after teardown the vault holds %+v", left)
	}
}
