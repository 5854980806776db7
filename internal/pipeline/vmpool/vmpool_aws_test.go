package vmpool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
	"github.com/groundworkhq/groundwork/internal/provider/aws"
	"github.com/groundworkhq/groundwork/internal/testenv/moto"
)

var motoEnv *moto.Harness

func TestMain(m *testing.M) {
	motoEnv = moto.NewHarness()
	code := m.Run()
	motoEnv.Close()
	os.Exit(code)
}

var seq atomic.Int64

// newDriver opens the AWS provider on a fresh moto account (assume_role keeps tests apart).
func newDriver(t *testing.T, region string) (*aws.Provider, vmpool.Driver) {
	t.Helper()
	endpoint := motoEnv.Endpoint(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	acct := fmt.Sprintf("%012d", 200000000000+int64(os.Getpid()%1000)*1000+seq.Add(1))
	p, err := aws.Open(ctx, aws.Account{AuthMethod: aws.AuthAssumeRole, Region: region, Endpoint: endpoint,
		AccessKeyID: "testing", SecretAccessKey: "testing", RoleARN: "arn:aws:iam::" + acct + ":role/groundwork"})
	if err != nil {
		t.Fatal(err)
	}
	return p, aws.VMPoolDriver{P: p, Probe: aws.FakeBootstrapProbe{AllReady: true}}
}

// runSteps drives steps as the engine does: Do (or Undo) until done or skipped, re-running on
// wait, merging infra after each call. It returns each step's final outcome.
func runSteps(ctx context.Context, t *testing.T, j *job.Job, steps []pipeline.Step, undo bool) map[string]pipeline.Outcome {
	return runCrashing(ctx, t, j, steps, undo, false)
}

// runCrashing is runSteps; with crash set, each step first runs once and its result is lost,
// as when the process dies after the cloud calls and before the checkpoint commits.
func runCrashing(ctx context.Context, t *testing.T, j *job.Job, steps []pipeline.Step, undo, crash bool) map[string]pipeline.Outcome {
	t.Helper()
	out := map[string]pipeline.Outcome{}
	for _, s := range steps {
		fn := s.Do
		if undo {
			fn = s.Undo
		}
		if fn == nil {
			continue
		}
		if crash {
			if _, err := fn(ctx, &pipeline.Run{Job: j, Step: s.Name, Attempt: 1}); err != nil {
				t.Fatalf("step %s before the crash: %v", s.Name, err)
			}
		}
		for attempt := 1; ; attempt++ {
			if attempt > 50 {
				t.Fatalf("step %s still waiting after 50 rounds", s.Name)
			}
			res, err := fn(ctx, &pipeline.Run{Job: j, Step: s.Name, Attempt: attempt})
			if err != nil {
				t.Fatalf("step %s (undo=%v): %v", s.Name, undo, err)
			}
			if j.Infra, err = pipeline.MergeInfra(j.Infra, res.Infra); err != nil {
				t.Fatal(err)
			}
			if res.Outcome != pipeline.OutcomeWait {
				out[s.Name] = res.Outcome
				break
			}
		}
	}
	return out
}

func reversed(steps []pipeline.Step) []pipeline.Step {
	out := make([]pipeline.Step, len(steps))
	for i, s := range steps {
		out[len(steps)-1-i] = s
	}
	return out
}

func TestVMPoolPipelineOnAWS(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		config    string
		wantSteps int
		withZone  bool
	}{
		"reference request with LB (fixed)": {config: `{"name":"checkout-edge","instanceType":"m5.large","min":2,"max":6,"createLoadBalancer":true,"listenerPorts":[80,443]}`, wantSteps: 11},
		"LB with a DNS zone (asg)":          {config: `{"name":"web","instanceType":"t3.small","mode":"asg","min":1,"max":3,"createLoadBalancer":true,"listenerPorts":[80,443],"domain":"web.example.com"}`, wantSteps: 11, withZone: true},
		"no LB, bare (asg)":                 {config: `{"name":"batch","instanceType":"t3.small","mode":"asg","min":2,"max":4,"bare":true}`, wantSteps: 7},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, d := newDriver(t, "eu-west-3")
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
			defer cancel()
			cfg := json.RawMessage(tc.config)
			if tc.withZone {
				z, err := p.EnsureZone(ctx, aws.ZoneSpec{Tags: aws.Tags{OrgID: "org_1", JobID: "job_zone", Role: "zone"}, Name: "example.com"})
				if err != nil {
					t.Fatal(err)
				}
				var m map[string]any
				_ = json.Unmarshal(cfg, &m)
				m["zoneID"] = z.ID
				cfg, _ = json.Marshal(m)
			}
			j := &job.Job{ID: "job_" + fmt.Sprint(seq.Add(1)), OrgID: "org_1", Family: job.FamilyVMPool, Provider: "aws", Mode: job.ModeCreate, Config: cfg}
			pl := vmpool.New(func(context.Context, *job.Job) (vmpool.Driver, error) { return d, nil }, time.Millisecond)
			if err := pl.Validate(ctx, j); err != nil {
				t.Fatal(err)
			}
			steps := pl.Steps(j)
			if len(steps) != tc.wantSteps {
				t.Fatalf("%d steps, want %d", len(steps), tc.wantSteps)
			}
			outcomes := runCrashing(ctx, t, j, steps, false, true)
			tags := aws.JobTags(j)
			first, err := p.Leftovers(ctx, tags)
			if err != nil {
				t.Fatal(err)
			}
			// Despite the crash before every checkpoint: exactly one of each resource.
			c0, _ := vmpool.DecodeConfig(cfg)
			for kind, want := range map[string]int{"vpc": 1, "nat-gateway": 1, "elastic-ip": 1, "launch-template": 1, "iam-role": 1, "instance": int(c0.Desired)} {
				if first[kind] != want {
					t.Fatalf("%s: %d after crash and re-run, want %d (all: %v)", kind, first[kind], want, first)
				}
			}
			// Every step run again (as after a crash before its checkpoint) creates nothing new.
			runSteps(ctx, t, j, steps, false)
			again, err := p.Leftovers(ctx, tags)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(first) != fmt.Sprint(again) {
				t.Fatalf("second run changed resources: %v -> %v", first, again)
			}
			if tc.wantSteps == 11 {
				wantDNS := pipeline.OutcomeSkip
				if tc.withZone {
					wantDNS = pipeline.OutcomeDone
				}
				if outcomes[vmpool.StepDNSRecord] != wantDNS {
					t.Fatalf("dns step outcome %v, want %v", outcomes[vmpool.StepDNSRecord], wantDNS)
				}
				if first["load-balancer"] != 1 || first["target-group"] != 1 || first["certificate"] != 1 {
					t.Fatalf("LB pieces: %v", first)
				}
				// attach_lb / detach_lb on the live pool.
				for _, op := range []string{vmpool.OpDetachLB, vmpool.OpAttachLB} {
					patch, err := pl.VMOp(ctx, j, op)
					if err != nil {
						t.Fatalf("%s: %v", op, err)
					}
					if j.Infra, err = pipeline.MergeInfra(j.Infra, patch); err != nil {
						t.Fatal(err)
					}
				}
			}
			var vms []vmpool.VM
			r := &pipeline.Run{Job: j}
			if _, err := r.Infra(vmpool.InfraVMs, &vms); err != nil || len(vms) == 0 {
				t.Fatalf("vms in infra: %v %v", vms, err)
			}
			for _, vm := range vms {
				if vm.State != aws.VMReady {
					t.Fatalf("vm %s state %s, want ready", vm.ID, vm.State)
				}
			}
			// Resize by PATCH: patched in place on an ASG pool, refused on a fixed one.
			c, _ := vmpool.DecodeConfig(cfg)
			resized, err := pl.Resize(ctx, j, 1, 5, 2)
			switch {
			case c.Mode == "asg" && err != nil:
				t.Fatalf("resize: %v", err)
			case c.Mode == "asg":
				j.Config = resized
			case fault.ClassOf(err) != job.ClassUserAction:
				t.Fatalf("resize of a fixed pool = %v, want user_action", err)
			}

			runSteps(ctx, t, j, reversed(steps), true)
			left, err := p.Leftovers(ctx, tags)
			if err != nil {
				t.Fatal(err)
			}
			if len(left) != 0 {
				t.Fatalf("left after teardown: %v", left)
			}
		})
	}
}
