package aws

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
	"github.com/groundworkhq/groundwork/internal/provider/drivertest"
)

// stepClock is a clock the test moves.
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *stepClock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

// probeNever is a BootstrapProbe that must not be asked.
type probeNever struct{ t *testing.T }

func (p probeNever) SentinelPresent(context.Context, string) (bool, error) {
	p.t.Error("the bootstrap sentinel was probed")
	return false, nil
}

// bootstrapPool is a one-VM pool's job on p and its steps, the VMs step's index among them.
func bootstrapPool(t *testing.T, p *Provider, probe BootstrapProbe, config string, clk *stepClock) (*job.Job, []pipeline.Step, int) {
	t.Helper()
	j := &job.Job{ID: "job_" + sanitize(t.Name()), OrgID: "org_test", Family: job.FamilyVMPool, Provider: "aws", Mode: job.ModeCreate,
		Config: json.RawMessage(config), Infra: json.RawMessage(`{}`)}
	pl := vmpool.New(func(context.Context, *job.Job) (vmpool.Driver, error) { return VMPoolDriver{P: p, Probe: probe}, nil }, time.Millisecond).
		WithClock(clk.Now)
	if err := pl.Validate(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	steps := pl.Steps(j)
	return j, steps, slices.IndexFunc(steps, func(s pipeline.Step) bool { return s.Name == vmpool.StepVMs })
}

// ConsoleOutput decodes what EC2 captured of an instance's console (moto serves a fixed
// boot log), and a pool whose VMs never write the sentinel fails at its deadline quoting it.
func TestVMPoolBootstrapTimeoutQuotesTheConsole(t *testing.T) {
	t.Parallel()
	p, _ := testProvider(t, "eu-west-1")
	ctx := testCtx(t)
	clk := &stepClock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	j, steps, i := bootstrapPool(t, p, FakeBootstrapProbe{}, `{"name":"web","instanceType":"t3.small","min":1,"max":1,"bare":true,"bootstrapTimeoutMinutes":10}`, clk)
	drivertest.RunSteps(ctx, t, j, steps[:i], false, nil)
	vmsStep := steps[i]
	var vm vmpool.VM
	drivertest.Until(ctx, t, "the VM running", func() (bool, error) {
		res, err := vmsStep.Do(ctx, &pipeline.Run{Job: j, Step: vmsStep.Name, Attempt: 1})
		if err != nil {
			return false, err
		}
		if j.Infra, err = pipeline.MergeInfra(j.Infra, res.Infra); err != nil {
			return false, err
		}
		var vms []vmpool.VM
		if _, err := (&pipeline.Run{Job: j}).Infra(vmpool.InfraVMs, &vms); err != nil || len(vms) != 1 {
			return false, err
		}
		vm = vms[0]
		return res.Outcome == pipeline.OutcomeWait && vm.State == VMBootstrap, nil
	})

	out, err := p.ConsoleOutput(ctx, vm.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Linux version") || !strings.Contains(out, "Kernel command line: root=/dev/sda1") {
		t.Fatalf("console output of %s:\n%q", vm.ID, out)
	}
	if _, err := p.ConsoleOutput(ctx, "i-0000000000000dead"); err == nil {
		t.Fatal("console output of an instance that does not exist")
	}

	clk.Add(10 * time.Minute)
	_, err = vmsStep.Do(ctx, &pipeline.Run{Job: j, Step: vmsStep.Name, Attempt: 1})
	fe := fault.As(err)
	if err == nil || fe.Class != job.ClassUserAction || fe.Code != "BootstrapTimeout" {
		t.Fatalf("at the deadline: %v (%+v), want user_action BootstrapTimeout", err, fe)
	}
	for _, w := range []string{vm.ID, "SSM agent", "Last lines of its console output", "Kernel command line: root=/dev/sda1", "Enabling fast FPU save and restore... done."} {
		if !strings.Contains(fe.FixHint, w) {
			t.Errorf("hint lacks %q:\n%s", w, fe.FixHint)
		}
	}
	drivertest.RunSteps(ctx, t, j, steps[:i+1], true, nil)
	if left, err := p.Leftovers(ctx, JobTags(j)); err != nil || len(left) != 0 {
		t.Fatalf("left after teardown: %v %v", left, err)
	}
}

// With waitForBootstrap false a pool on plain moto completes without a bootstrap probe.
func TestVMPoolWithoutWaitingForBootstrap(t *testing.T) {
	t.Parallel()
	p, _ := testProvider(t, "eu-west-1")
	ctx := testCtx(t)
	clk := &stepClock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	j, steps, _ := bootstrapPool(t, p, probeNever{t}, `{"name":"web","instanceType":"t3.small","min":2,"max":2,"waitForBootstrap":false}`, clk)
	drivertest.RunSteps(ctx, t, j, steps, false, nil)
	var vms []vmpool.VM
	if _, err := (&pipeline.Run{Job: j}).Infra(vmpool.InfraVMs, &vms); err != nil || len(vms) != 2 {
		t.Fatalf("vms %v (%v), want 2", vms, err)
	}
	for _, v := range vms {
		if v.State != VMReady {
			t.Fatalf("VM %s is %s, want ready", v.ID, v.State)
		}
	}
	drivertest.RunSteps(ctx, t, j, steps, true, nil)
	if left, err := p.Leftovers(ctx, JobTags(j)); err != nil || len(left) != 0 {
		t.Fatalf("left after teardown: %v %v", left, err)
	}
}
