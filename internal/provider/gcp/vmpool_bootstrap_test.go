package gcp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
)

// testClock is a clock the test moves.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *testClock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

// poolJob is a fixed pool's job and its pipeline on c, measuring time with clk.
func poolJob(c *Client, id, config string, clk *testClock) (*job.Job, []pipeline.Step) {
	j := &job.Job{ID: id, OrgID: "org_test", SpaceID: "spc_test", Kind: job.KindProvisioning, Family: job.FamilyVMPool,
		Provider: Name, Mode: job.ModeCreate, Config: json.RawMessage(config), Infra: json.RawMessage(`{}`)}
	pl := vmpool.New(func(context.Context, *job.Job) (vmpool.Driver, error) { return VMPoolDriver{C: c}, nil }, time.Millisecond).
		WithClock(clk.Now)
	return j, pl.Steps(j)
}

// A pool one of whose VMs never sets its bootstrap guest attribute fails at its
// bootstrapTimeoutMinutes with user_action BootstrapTimeout, and the hint quotes the end of
// that VM's serial port output: cloud-init's final stage started and never finished.
func TestVMPoolBootstrapTimeout(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c, cloud := testClient(t)
	clk := &testClock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	j, steps := poolJob(c, "job_noboot", `{"name":"web","instanceType":"e2-small","min":2,"max":2,"bootstrapTimeoutMinutes":5}`, clk)
	stuck := fmt.Sprintf("%s-1", name(j, roleVMs))
	cloud.NoBoot(stuck)
	i := slices.IndexFunc(steps, func(s pipeline.Step) bool { return s.Name == vmpool.StepVMs })
	runSteps(ctx, t, j, steps[:i], false, nil)
	vmsStep := steps[i]
	stuckID := vmID(c.Zone(), stuck)
	// Until the other VM is ready and the stuck one is counting, the step waits.
	until(t, ctx, "the VMs running", func() (bool, error) {
		res, err := vmsStep.Do(ctx, &pipeline.Run{Job: j, Step: vmsStep.Name, Attempt: 1})
		if err != nil {
			return false, err
		}
		if res.Outcome != pipeline.OutcomeWait {
			return false, fmt.Errorf("step %v with a VM that never boots", res.Outcome)
		}
		if j.Infra, err = pipeline.MergeInfra(j.Infra, res.Infra); err != nil {
			return false, err
		}
		var vms []vmpool.VM
		since := map[string]time.Time{}
		r := &pipeline.Run{Job: j}
		if _, err := r.Infra(vmpool.InfraVMs, &vms); err != nil {
			return false, err
		}
		if _, err := r.Infra(vmpool.InfraBootstrapSince, &since); err != nil {
			return false, err
		}
		ready := 0
		for _, v := range vms {
			if v.State == "ready" {
				ready++
			}
		}
		return ready == 1 && len(since) == 1 && !since[stuckID].IsZero(), nil
	})
	clk.Add(4 * time.Minute)
	if res, err := vmsStep.Do(ctx, &pipeline.Run{Job: j, Step: vmsStep.Name, Attempt: 1}); err != nil || res.Outcome != pipeline.OutcomeWait {
		t.Fatalf("before the deadline: %v %v, want a wait", res.Outcome, err)
	}
	clk.Add(time.Minute)
	_, err := vmsStep.Do(ctx, &pipeline.Run{Job: j, Step: vmsStep.Name, Attempt: 1})
	fe := fault.As(err)
	if err == nil || fe.Class != job.ClassUserAction || fe.Code != "BootstrapTimeout" {
		t.Fatalf("at the deadline: %v (%+v), want user_action BootstrapTimeout", err, fe)
	}
	for _, w := range []string{stuckID, "Last lines of its console output", "Hostname set to <" + stuck + ">",
		"running 'modules:final'", "metadata server", "waitForBootstrap: false"} {
		if !strings.Contains(fe.FixHint, w) {
			t.Errorf("hint lacks %q:\n%s", w, fe.FixHint)
		}
	}
	if strings.Contains(fe.FixHint, "finished at") {
		t.Errorf("the stuck VM's console says cloud-init finished:\n%s", fe.FixHint)
	}
	runSteps(ctx, t, j, steps[:i+1], true, nil)
}

// With waitForBootstrap false a pool whose VMs never report their bootstrap completes: a
// running VM counts as ready.
func TestVMPoolWithoutWaitingForBootstrap(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c, cloud := testClient(t)
	clk := &testClock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	j, steps := poolJob(c, "job_nowait", `{"name":"web","instanceType":"e2-small","min":2,"max":2,"waitForBootstrap":false}`, clk)
	for i := range 2 {
		cloud.NoBoot(fmt.Sprintf("%s-%d", name(j, roleVMs), i))
	}
	runSteps(ctx, t, j, steps, false, nil)
	var vms []vmpool.VM
	if _, err := (&pipeline.Run{Job: j}).Infra(vmpool.InfraVMs, &vms); err != nil || len(vms) != 2 {
		t.Fatalf("vms %v (%v)", vms, err)
	}
	for _, v := range vms {
		if v.State != "ready" {
			t.Fatalf("VM %s is %s, want ready", v.ID, v.State)
		}
	}
	for _, call := range cloud.Calls() {
		if strings.HasSuffix(call.Path, "/getGuestAttributes") {
			t.Fatalf("the guest attributes were read: %s", call.Path)
		}
	}
	runSteps(ctx, t, j, steps, true, nil)
}

// ConsoleOutput reads the end of serial port 1: the boot log the fake keeps (with cloud-init
// finished once the VM reported its bootstrap), or what a test set, of which it asks for the
// last consoleTailBytes.
func TestVMPoolConsoleOutput(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c, cloud := testClient(t)
	clk := &testClock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	j, steps := poolJob(c, "job_console", `{"name":"web","instanceType":"e2-small","min":2,"max":2}`, clk)
	runSteps(ctx, t, j, steps[:slices.IndexFunc(steps, func(s pipeline.Step) bool { return s.Name == vmpool.StepVMs })+1], false, nil)
	d := VMPoolDriver{C: c}
	booted, err := d.ConsoleOutput(ctx, vmpool.VM{ID: vmID(c.Zone(), name(j, roleVMs)+"-0")})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(booted, "Linux version") || !strings.Contains(booted, "Cloud-init v. 22.4.2 finished at") {
		t.Fatalf("console of a booted VM:\n%s", booted)
	}
	long := strings.Repeat("0123456789abcdef", 2000) + "END"
	cloud.SetSerialPortOutput(name(j, roleVMs)+"-1", long)
	got, err := d.ConsoleOutput(ctx, vmpool.VM{ID: vmID(c.Zone(), name(j, roleVMs)+"-1")})
	if err != nil {
		t.Fatal(err)
	}
	if got != long[len(long)-consoleTailBytes:] {
		t.Fatalf("console: %d bytes ending %q, want the last %d of %d", len(got), got[max(len(got)-10, 0):], consoleTailBytes, len(long))
	}
	if _, err := d.ConsoleOutput(ctx, vmpool.VM{ID: vmID(c.Zone(), "not-there")}); err == nil || fault.ClassOf(err) == job.ClassTransient {
		t.Fatalf("console of a missing VM: %v", err)
	}
}
