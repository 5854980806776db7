package vmpool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
)

// clock is a clock a test moves by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

// bootDriver is a Driver whose VMs are all running and whose sentinel shows on the VMs in
// booted; only the VMs step's calls are played (the embedded nil Driver panics on others).
type bootDriver struct {
	vmpool.Driver
	mu      sync.Mutex
	vms     []vmpool.VM
	booted  map[string]bool
	checked int
}

func (d *bootDriver) EnsureVMs(context.Context, *job.Job, vmpool.Config, vmpool.Network, vmpool.LaunchTemplate) ([]vmpool.VM, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]vmpool.VM(nil), d.vms...), nil
}

func (d *bootDriver) CheckBootstrap(_ context.Context, vms []vmpool.VM) ([]vmpool.VM, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.checked++
	all := len(vms) > 0
	for i := range vms {
		if vms[i].State == "bootstrap" && d.booted[vms[i].ID] {
			vms[i].State = "ready"
		}
		all = all && vms[i].State == "ready"
	}
	return vms, all, nil
}

// consoleDriver is a bootDriver that reads console output (or fails to, with err).
type consoleDriver struct {
	*bootDriver
	out map[string]string
	err error
}

func (d consoleDriver) ConsoleOutput(_ context.Context, vm vmpool.VM) (string, error) {
	if d.err != nil {
		return "", d.err
	}
	return d.out[vm.ID], nil
}

// bootLog is a console output of n numbered lines, with a carriage return and a terminal
// escape as real serial consoles have.
func bootLog(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "[  %3d.000000] cloud-init[812]: boot line %03d\r\n", i, i)
	}
	b.WriteString("\x1b[0m")
	return b.String()
}

// vmsStep returns the pool's VMs step on d, its job (with the infra the earlier steps leave)
// and the pipeline's clock.
func vmsStep(t *testing.T, d vmpool.Driver, config string, clk *clock) (pipeline.Step, *job.Job) {
	t.Helper()
	j := &job.Job{ID: "job_boot", OrgID: "org_1", Family: job.FamilyVMPool, Provider: "gcp", Mode: job.ModeCreate,
		Config: json.RawMessage(config),
		Infra:  json.RawMessage(`{"network":{"vpcID":"net","ready":true},"launchTemplate":{"launchTemplateID":"tmpl","version":1}}`)}
	pl := vmpool.New(func(context.Context, *job.Job) (vmpool.Driver, error) { return d, nil }, time.Second).WithClock(clk.Now)
	if err := pl.Validate(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	for _, s := range pl.Steps(j) {
		if s.Name == vmpool.StepVMs {
			return s, j
		}
	}
	t.Fatal("no VMs step")
	return pipeline.Step{}, nil
}

// runOnce runs the step's Do once and merges its infra as the engine does.
func runOnce(t *testing.T, s pipeline.Step, j *job.Job) (pipeline.Result, error) {
	t.Helper()
	res, err := s.Do(context.Background(), &pipeline.Run{Job: j, Step: s.Name, Attempt: 1})
	if err == nil {
		if j.Infra, err = pipeline.MergeInfra(j.Infra, res.Infra); err != nil {
			t.Fatal(err)
		}
	}
	return res, err
}

func since(t *testing.T, j *job.Job) map[string]time.Time {
	t.Helper()
	out := map[string]time.Time{}
	if _, err := (&pipeline.Run{Job: j}).Infra(vmpool.InfraBootstrapSince, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// A VM that never writes its sentinel fails the step as user_action BootstrapTimeout once
// bootstrapTimeoutMinutes have passed since it was first seen running, counted from the time
// in infra (so a restarted server with a fresh pipeline keeps counting); the hint quotes the
// end of its console output.
func TestBootstrapDeadline(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		console func(*bootDriver) vmpool.Driver
		want    []string
		notWant []string
		// maxTail bounds what the hint quotes of the console.
		maxTail int
	}{
		{"console read", func(b *bootDriver) vmpool.Driver {
			return consoleDriver{bootDriver: b, out: map[string]string{"vm-b": bootLog(50)}}
		}, []string{"Last lines of its console output:\n[   31.000000] cloud-init[812]: boot line 031", "boot line 050"},
			[]string{"boot line 030", "\r", "\x1b", "[0m"}, 0},
		{"console of long lines", func(b *bootDriver) vmpool.Driver {
			long := strings.Repeat("x", 700)
			return consoleDriver{bootDriver: b, out: map[string]string{"vm-b": strings.Repeat("line "+long+"\n", 8) + "last " + long}}
		}, []string{"\nline x", "last x"}, nil, 2048},
		{"console unreadable", func(b *bootDriver) vmpool.Driver {
			return consoleDriver{bootDriver: b, err: errors.New("serial port output is disabled")}
		}, []string{"The console output could not be read: serial port output is disabled"}, []string{"boot line"}, 0},
		{"driver without console", func(b *bootDriver) vmpool.Driver { return b },
			[]string{"The console output could not be read"}, []string{"boot line"}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := &bootDriver{vms: []vmpool.VM{{ID: "vm-a", State: "bootstrap"}, {ID: "vm-b", State: "bootstrap"}},
				booted: map[string]bool{"vm-a": true}}
			d := tc.console(b)
			clk := &clock{t: t0}
			cfg := `{"name":"web","instanceType":"e2-small","min":2,"max":2,"bootstrapTimeoutMinutes":15}`
			s, j := vmsStep(t, d, cfg, clk)
			res, err := runOnce(t, s, j)
			if err != nil || res.Outcome != pipeline.OutcomeWait {
				t.Fatalf("first look: %v %v, want a wait", res.Outcome, err)
			}
			if got := since(t, j); len(got) != 1 || !got["vm-b"].Equal(t0) {
				t.Fatalf("bootstrapSince %v, want vm-b at %s only", got, t0)
			}
			clk.Add(14*time.Minute + 59*time.Second)
			if res, err := runOnce(t, s, j); err != nil || res.Outcome != pipeline.OutcomeWait {
				t.Fatalf("before the deadline: %v %v, want a wait", res.Outcome, err)
			}
			if got := since(t, j); !got["vm-b"].Equal(t0) {
				t.Fatalf("the first sighting moved: %v", got)
			}
			// A restarted server builds its pipeline again; the count is the job's.
			clk.Add(time.Second)
			s, _ = vmsStep(t, d, cfg, clk)
			_, err = runOnce(t, s, j)
			fe := fault.As(err)
			if err == nil || fe.Class != job.ClassUserAction || fe.Code != "BootstrapTimeout" {
				t.Fatalf("at the deadline: %v (%+v), want user_action BootstrapTimeout", err, fe)
			}
			if !strings.Contains(err.Error(), "vm-b") || strings.Contains(err.Error(), "vm-a") {
				t.Fatalf("error %q should name vm-b alone", err)
			}
			for _, w := range append([]string{"cloud-init", "metadata server", "waitForBootstrap: false", "vm-b"}, tc.want...) {
				if !strings.Contains(fe.FixHint, w) {
					t.Errorf("hint lacks %q:\n%s", w, fe.FixHint)
				}
			}
			if _, tail, ok := strings.Cut(fe.FixHint, "console output:\n"); ok && tc.maxTail > 0 && len(tail) > tc.maxTail {
				t.Errorf("the hint quotes %d bytes of console, want at most %d", len(tail), tc.maxTail)
			}
			for _, w := range tc.notWant {
				if strings.Contains(fe.FixHint, w) {
					t.Errorf("hint has %q:\n%s", w, fe.FixHint)
				}
			}
		})
	}
}

// Once every VM is ready the step is done and forgets its sightings; a VM that was replaced
// while booting drops out of them, and its replacement starts its own count.
func TestBootstrapSightingsFollowTheVMs(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	b := &bootDriver{vms: []vmpool.VM{{ID: "vm-a", State: "bootstrap"}}, booted: map[string]bool{}}
	clk := &clock{t: t0}
	s, j := vmsStep(t, b, `{"name":"web","instanceType":"e2-small","min":1,"max":1}`, clk)
	if _, err := runOnce(t, s, j); err != nil {
		t.Fatal(err)
	}
	clk.Add(19 * time.Minute)
	b.vms = []vmpool.VM{{ID: "vm-c", State: "bootstrap"}}
	if res, err := runOnce(t, s, j); err != nil || res.Outcome != pipeline.OutcomeWait {
		t.Fatalf("replacement: %v %v", res.Outcome, err)
	}
	if got := since(t, j); len(got) != 1 || !got["vm-c"].Equal(clk.Now()) {
		t.Fatalf("bootstrapSince %v, want vm-c alone from now", got)
	}
	// The default deadline (20 minutes) counts from the replacement's sighting.
	clk.Add(19 * time.Minute)
	if res, err := runOnce(t, s, j); err != nil || res.Outcome != pipeline.OutcomeWait {
		t.Fatalf("replacement before its deadline: %v %v", res.Outcome, err)
	}
	b.booted["vm-c"] = true
	res, err := runOnce(t, s, j)
	if err != nil || res.Outcome != pipeline.OutcomeDone {
		t.Fatalf("all ready: %v %v, want done", res.Outcome, err)
	}
	if ok, _ := (&pipeline.Run{Job: j}).Infra(vmpool.InfraBootstrapSince, new(map[string]time.Time)); ok {
		t.Fatalf("bootstrapSince outlives the step: %s", j.Infra)
	}
}

// With waitForBootstrap false the sentinel is not looked for: running VMs are ready.
func TestNoWaitForBootstrap(t *testing.T) {
	t.Parallel()
	b := &bootDriver{vms: []vmpool.VM{{ID: "vm-a", State: "bootstrap"}, {ID: "vm-b", State: "pending"}}}
	clk := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	s, j := vmsStep(t, b, `{"name":"web","instanceType":"e2-small","min":2,"max":2,"waitForBootstrap":false}`, clk)
	if res, err := runOnce(t, s, j); err != nil || res.Outcome != pipeline.OutcomeWait {
		t.Fatalf("a VM still pending: %v %v, want a wait", res.Outcome, err)
	}
	b.vms[1].State = "bootstrap"
	res, err := runOnce(t, s, j)
	if err != nil || res.Outcome != pipeline.OutcomeDone {
		t.Fatalf("all running: %v %v, want done", res.Outcome, err)
	}
	if b.checked != 0 {
		t.Fatalf("CheckBootstrap called %d times", b.checked)
	}
	var vms []vmpool.VM
	if _, err := (&pipeline.Run{Job: j}).Infra(vmpool.InfraVMs, &vms); err != nil || len(vms) != 2 || vms[0].State != "ready" || vms[1].State != "ready" {
		t.Fatalf("vms %v (%v), want both ready", vms, err)
	}
	var nginx bool
	if _, err := (&pipeline.Run{Job: j}).Infra(vmpool.InfraBootstrapReady, &nginx); err != nil || nginx {
		t.Fatalf("bootstrapNginxReady %v without the sentinel", nginx)
	}
}

func TestBootstrapConfig(t *testing.T) {
	t.Parallel()
	cases := []struct {
		config  string
		timeout time.Duration
		waits   bool
		err     string
	}{
		{`{}`, 20 * time.Minute, true, ""},
		{`{"bootstrapTimeoutMinutes":240,"waitForBootstrap":true}`, 240 * time.Minute, true, ""},
		{`{"bootstrapTimeoutMinutes":1,"waitForBootstrap":false}`, time.Minute, false, ""},
		{`{"bootstrapTimeoutMinutes":241}`, 0, true, "bootstrapTimeoutMinutes"},
		{`{"bootstrapTimeoutMinutes":-5}`, 0, true, "bootstrapTimeoutMinutes"},
	}
	for _, tc := range cases {
		t.Run(tc.config, func(t *testing.T) {
			t.Parallel()
			var m map[string]any
			_ = json.Unmarshal([]byte(tc.config), &m)
			m["name"], m["instanceType"], m["min"], m["max"] = "p", "t", 1, 1
			raw, _ := json.Marshal(m)
			c, err := vmpool.DecodeConfig(raw)
			if err != nil {
				t.Fatal(err)
			}
			err = c.Validate()
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
					t.Fatalf("Validate = %v, want an error on %s", err, tc.err)
				}
				return
			}
			if err != nil || c.BootstrapTimeout() != tc.timeout || c.WaitsForBootstrap() != tc.waits {
				t.Fatalf("timeout %s waits %v (%v), want %s %v", c.BootstrapTimeout(), c.WaitsForBootstrap(), err, tc.timeout, tc.waits)
			}
		})
	}
}
