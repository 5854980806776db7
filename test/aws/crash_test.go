package aws

import (
	"bytes"
	"context"
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

	"github.com/aws/aws-sdk-go-v2/service/acm"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/client"
	"github.com/groundworkhq/groundwork/internal/job"
	awsp "github.com/groundworkhq/groundwork/internal/provider/aws"
	"github.com/groundworkhq/groundwork/internal/testenv/childserver"
)

// Environment of a child server.
const (
	envServe   = "GW_AWS_SERVE"
	envDataDir = "GW_AWS_DATA_DIR"
	envAddr    = "GW_AWS_ADDR"
	envCrashAt = "GW_AWS_CRASH_AT"   // comma-separated step names
	envMarkers = "GW_AWS_MARKER_DIR" // one file per crash already done
	// envCrashCalls, when set, replaces envCrashAt: step#n entries, the n-th call of a step
	// (childserver.CrashAfter), for crashes in the middle of a step that waits.
	envCrashCalls = "GW_AWS_CRASH_CALLS"
)

const childToken = "gw_test_aws_crash_0123456789abcdef"

// serve is the child: a real server whose AWS steps SIGKILL the process once per listed step,
// after the step's cloud calls and before the engine checkpoints them.
func serve() int {
	crashAt := map[string]bool{}
	for _, s := range strings.Split(os.Getenv(envCrashAt), ",") {
		crashAt[s] = true
	}
	markers := os.Getenv(envMarkers)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	afterDo := func(_ context.Context, j *job.Job, step string) {
		if !crashAt[step] {
			return
		}
		marker := filepath.Join(markers, j.ID+"."+step)
		f, err := os.OpenFile(marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return // crashed here before: let the re-run through
		}
		_ = f.Sync()
		_ = f.Close()
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way; never return to the checkpoint
	}
	if spec := os.Getenv(envCrashCalls); spec != "" {
		afterDo = childserver.CrashAfter(markers, spec)
	}
	err := app.Run(ctx, app.Options{
		Addr: os.Getenv(envAddr), DataDir: os.Getenv(envDataDir), BootstrapToken: childToken,
		PollInterval: 100 * time.Millisecond, ShutdownGrace: time.Second,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		AWS: app.AWSOptions{
			Poll: 100 * time.Millisecond, LeaseTTL: time.Second,
			Probe:   func(*awsp.Provider) awsp.BootstrapProbe { return awsp.FakeBootstrapProbe{AllReady: true} },
			AfterDo: afterDo,
		},
		// A datastore step re-run by a config update (its config then holds applyImmediately)
		// crashes as "update:<step>", apart from the same step at creation.
		Datastores: app.DatastoreOptions{Poll: 100 * time.Millisecond, LeaseTTL: time.Second,
			AfterDo: func(ctx context.Context, j *job.Job, step string) {
				if bytes.Contains(j.Config, []byte(`"applyImmediately"`)) {
					step = "update:" + step
				}
				afterDo(ctx, j, step)
			}},
		Remediation: app.RemediationOptions{AfterDo: afterDo},
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestCrashBetweenCloudCallAndCheckpoint kills the server (SIGKILL) right after each cloud
// step of a vm_pool job with a load balancer and of a registry job, before the checkpoint;
// restarted, the server finishes both jobs with exactly one of each resource in moto. The
// account names no endpoint: the child finds moto through AWS_ENDPOINT_URL.
func TestCrashBetweenCloudCallAndCheckpoint(t *testing.T) {
	t.Parallel()
	endpoint := motoEnv.Endpoint(t)
	steps := []string{"create_network", "create_iam", "create_launch_template", "create_vms", "create_load_balancer",
		"create_target_group", "create_listeners", "create_repository"}
	markers := t.TempDir()
	addr := childserver.FreeAddr(t)
	c := childserver.Start(t, append(os.Environ(), envServe+"=1", envDataDir+"="+t.TempDir(), envAddr+"="+addr,
		envCrashAt+"="+strings.Join(steps, ","), envMarkers+"="+markers, "AWS_ENDPOINT_URL="+endpoint))
	cl := client.New("http://"+addr, childToken)
	c.WaitUp(cl)
	e := newEnvOn(t, &apptest.Server{URL: "http://" + addr, Token: childToken, Client: cl}, endpoint, false)

	pool := e.create(t, "vm_pool", `{"name":"web","instanceType":"t3.micro","min":1,"max":1,"createLoadBalancer":true,"listenerPorts":[80,443]}`)
	reg := e.create(t, "registry", `{"name":"crash-images"}`)
	restarts := 0
	deadline := time.Now().Add(4 * time.Minute)
	for _, id := range []string{pool.ID, reg.ID} {
		for {
			if c.RestartIfDead() {
				restarts++
				c.WaitUp(cl)
			}
			var j job.Job
			err := cl.Do(testCtx(t), http.MethodGet, "/api/provisioning-jobs/"+id, nil, &j)
			if err == nil && j.Status == job.StatusCompleted {
				break
			}
			if err == nil && j.Status == job.StatusFailed {
				t.Fatalf("job %s failed: %+v", id, j.Failure)
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s not completed after %d restarts: %v %v", id, restarts, j.Status, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	entries, _ := os.ReadDir(markers)
	for _, en := range entries {
		t.Logf("crashed at %s", en.Name())
	}
	if len(entries) < len(steps) {
		t.Fatalf("crashed %d times (%d restarts), want one per step %v", len(entries), restarts, steps)
	}

	pool = getJob(t, cl, pool.ID)
	left := e.leftovers(t, pool)
	for kind, want := range map[string]int{"vpc": 1, "nat-gateway": 1, "elastic-ip": 1, "internet-gateway": 1,
		"launch-template": 1, "instance": 1, "load-balancer": 1, "target-group": 1, "ecr-repository": 1} {
		if left[kind] != want {
			t.Errorf("%s: %d after the crashes, want exactly %d (all: %v)", kind, left[kind], want, left)
		}
	}
	lbs, err := elbv2.NewFromConfig(e.p.Config()).DescribeLoadBalancers(testCtx(t), &elbv2.DescribeLoadBalancersInput{})
	if err != nil || len(lbs.LoadBalancers) != 1 {
		t.Fatalf("load balancers: %v", err)
	}
	ls, err := elbv2.NewFromConfig(e.p.Config()).DescribeListeners(testCtx(t), &elbv2.DescribeListenersInput{LoadBalancerArn: lbs.LoadBalancers[0].LoadBalancerArn})
	if err != nil || len(ls.Listeners) != 2 {
		t.Errorf("listeners: %d (%v), want 2 (80 and 443)", len(ls.Listeners), err)
	}
	if n := e.targets(t, pool); n != 1 {
		t.Errorf("targets: %d, want 1", n)
	}
	certs, err := acm.NewFromConfig(e.p.Config()).ListCertificates(testCtx(t), &acm.ListCertificatesInput{})
	if err != nil || len(certs.CertificateSummaryList) != 1 {
		t.Errorf("ACM certificates: %v (%v), want the one self-signed", certs, err)
	}
	repos, err := ecr.NewFromConfig(e.p.Config()).DescribeRepositories(testCtx(t), &ecr.DescribeRepositoriesInput{})
	if err != nil || len(repos.Repositories) != 1 {
		t.Errorf("repositories: %v (%v), want 1", repos, err)
	}
	t.Logf("%d crashes, %d restarts; resources: %v", len(entries), restarts, left)

	// The restarted server also tears both down completely.
	e.teardown(t, pool.ID)
	e.teardown(t, reg.ID)
	if left := e.leftovers(t, pool); len(left) > 0 {
		t.Fatalf("after teardown, moto still holds %v", left)
	}
}
