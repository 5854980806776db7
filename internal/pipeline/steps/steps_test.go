package steps_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/steps"
)

type config struct {
	Name string `json:"name"`
}

func (c config) Validate() error {
	if c.Name == "" {
		return errors.New("name: required")
	}
	return nil
}

func decode(raw json.RawMessage) (config, error) {
	var c config
	if err := json.Unmarshal(raw, &c); err != nil {
		return c, err
	}
	return c, nil
}

type network struct {
	VPCID string `json:"vpcID"`
	Ready bool   `json:"ready"`
}

// driver is a scripted cloud: each method answers what the case set and counts its calls.
type driver struct {
	net     network
	gone    bool
	roles   string
	err     error
	calls   int
	gotName string
}

func (d *driver) EnsureNetwork(_ context.Context, _ *job.Job, c config) (network, error) {
	d.calls++
	d.gotName = c.Name
	return d.net, d.err
}

func (d *driver) DeleteNetwork(context.Context, *job.Job) (bool, error) {
	d.calls++
	return d.gone, d.err
}

func (d *driver) EnsureThing(_ context.Context, _ *job.Job, c config) (string, error) {
	d.calls++
	d.gotName = c.Name
	return "thing-" + c.Name, d.err
}

func (d *driver) DeleteThing(_ context.Context, _ *job.Job, c config) error {
	d.calls++
	d.gotName = c.Name
	return d.err
}

func (d *driver) EnsureRoles(context.Context, *job.Job) (string, error) {
	d.calls++
	return d.roles, d.err
}

func (d *driver) DeleteRoles(context.Context, *job.Job) error {
	d.calls++
	return d.err
}

const (
	poll = 7 * time.Second
	// Every case starts from a job that already holds a network and another key, so that the
	// merged document shows what a step sets, keeps and clears.
	before = `{"iam":"arn:old","network":{"vpcID":"vpc-old","ready":false},"other":1}`
)

var errResolve = fault.Transientf("no credentials yet")

func loader(d *driver) steps.Loader[config, *driver] {
	return steps.Loader[config, *driver]{
		Decode: decode,
		Resolve: func(_ context.Context, j *job.Job) (*driver, error) {
			if j.Provider == "unresolvable" {
				return nil, errResolve
			}
			return d, nil
		},
	}
}

func networkStep(d *driver) pipeline.Step {
	return steps.Network("create_network", "network", loader(d), poll, func(n network) bool { return n.Ready })
}

func iamStep(d *driver) pipeline.Step {
	return steps.IAM("create_iam", "iam", loader(d), (*driver).EnsureRoles, (*driver).DeleteRoles)
}

func resourceStep(d *driver) pipeline.Step {
	return steps.Resource[config, *driver, string]{
		Name: "create_thing", Key: "thing", Load: loader(d), Ensure: (*driver).EnsureThing, Delete: (*driver).DeleteThing,
	}.Step()
}

type stepCase struct {
	step     func(*driver) pipeline.Step
	undo     bool
	driver   driver
	config   string
	provider string

	want      pipeline.Outcome
	wantInfra string // the job's infra after the result is merged (when no error)
	wantClass job.FailureClass
	wantCode  string
	wantErr   error // the driver's error, which must come back unwrapped from the chain
	wantCalls int
	wantName  string // the config name the driver must have been given, if it takes the config
}

func TestSharedSteps(t *testing.T) {
	t.Parallel()
	cloudDown := fault.Transientf("ec2: RequestLimitExceeded")
	denied := fault.UserAction(errors.New("AccessDenied"), "AccessDenied", "grant ec2:CreateVpc", "")
	cases := map[string]stepCase{
		"network ready: done with the network recorded": {
			step: networkStep, driver: driver{net: network{VPCID: "vpc-1", Ready: true}},
			want: pipeline.OutcomeDone, wantInfra: `{"iam":"arn:old","network":{"vpcID":"vpc-1","ready":true},"other":1}`, wantCalls: 1, wantName: "edge",
		},
		"network not ready: wait, recording the network so far": {
			step: networkStep, driver: driver{net: network{VPCID: "vpc-1"}},
			want: pipeline.OutcomeWait, wantInfra: `{"iam":"arn:old","network":{"vpcID":"vpc-1","ready":false},"other":1}`, wantCalls: 1, wantName: "edge",
		},
		"network ensure fails transiently: passed through": {
			step: networkStep, driver: driver{err: cloudDown},
			wantClass: job.ClassTransient, wantErr: cloudDown, wantCalls: 1,
		},
		"network ensure needs the user: passed through with its code": {
			step: networkStep, driver: driver{err: denied},
			wantClass: job.ClassUserAction, wantCode: "AccessDenied", wantErr: denied, wantCalls: 1,
		},
		"network undo not done: wait, keeping the network": {
			step: networkStep, undo: true, driver: driver{gone: false},
			want: pipeline.OutcomeWait, wantInfra: before, wantCalls: 1,
		},
		"network undo done: the network key is cleared": {
			step: networkStep, undo: true, driver: driver{gone: true},
			want: pipeline.OutcomeDone, wantInfra: `{"iam":"arn:old","other":1}`, wantCalls: 1,
		},
		"network undo fails: passed through": {
			step: networkStep, undo: true, driver: driver{err: cloudDown},
			wantClass: job.ClassTransient, wantErr: cloudDown, wantCalls: 1,
		},
		"config no longer decodes: the user's, the driver untouched": {
			step: networkStep, config: `{"name":`,
			wantClass: job.ClassUserAction, wantCode: "InvalidConfig",
		},
		"undo with a config that no longer decodes: the user's": {
			step: networkStep, undo: true, config: `[]`,
			wantClass: job.ClassUserAction, wantCode: "InvalidConfig",
		},
		"driver does not resolve: passed through": {
			step: networkStep, provider: "unresolvable",
			wantClass: job.ClassTransient, wantErr: errResolve,
		},
		"iam: done with the roles recorded": {
			step: iamStep, driver: driver{roles: "arn:aws:iam::1:role/x"},
			want: pipeline.OutcomeDone, wantInfra: `{"iam":"arn:aws:iam::1:role/x","network":{"vpcID":"vpc-old","ready":false},"other":1}`, wantCalls: 1,
		},
		"iam ensure fails: passed through": {
			step: iamStep, driver: driver{err: denied},
			wantClass: job.ClassUserAction, wantCode: "AccessDenied", wantErr: denied, wantCalls: 1,
		},
		"iam undo: the iam key is cleared": {
			step: iamStep, undo: true, driver: driver{},
			want: pipeline.OutcomeDone, wantInfra: `{"network":{"vpcID":"vpc-old","ready":false},"other":1}`, wantCalls: 1,
		},
		"resource: done with the thing made from the config": {
			step: resourceStep, driver: driver{},
			want: pipeline.OutcomeDone, wantInfra: `{"iam":"arn:old","network":{"vpcID":"vpc-old","ready":false},"other":1,"thing":"thing-edge"}`, wantCalls: 1, wantName: "edge",
		},
		"resource undo: deleted by the config's name, key cleared": {
			step: resourceStep, undo: true, driver: driver{}, config: `{"name":"edge2"}`,
			want: pipeline.OutcomeDone, wantInfra: before, wantCalls: 1, wantName: "edge2",
		},
		"iam undo fails: passed through": {
			step: iamStep, undo: true, driver: driver{err: cloudDown},
			wantClass: job.ClassTransient, wantErr: cloudDown, wantCalls: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := tc.driver
			cfg := tc.config
			if cfg == "" {
				cfg = `{"name":"edge"}`
			}
			j := &job.Job{Provider: tc.provider, Config: json.RawMessage(cfg), Infra: json.RawMessage(before)}
			step := tc.step(&d)
			fn := step.Do
			if tc.undo {
				fn = step.Undo
			}
			res, err := fn(context.Background(), &pipeline.Run{Job: j, Step: step.Name})
			if d.calls != tc.wantCalls {
				t.Errorf("driver called %d times, want %d", d.calls, tc.wantCalls)
			}
			if tc.wantClass != "" {
				checkFault(t, err, tc.wantClass, tc.wantCode, tc.wantErr)
				return
			}
			if err != nil {
				t.Fatalf("err = %v, want none", err)
			}
			if res.Outcome != tc.want {
				t.Errorf("outcome = %v, want %v", res.Outcome, tc.want)
			}
			if res.Outcome == pipeline.OutcomeWait && res.After != poll {
				t.Errorf("wait after %v, want the poll interval %v", res.After, poll)
			}
			if d.gotName != tc.wantName {
				t.Errorf("driver got config name %q, want %q", d.gotName, tc.wantName)
			}
			checkInfra(t, j.Infra, res, tc.wantInfra)
		})
	}
}

func checkFault(t *testing.T, err error, class job.FailureClass, code string, want error) {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil, want a %s fault", class)
	}
	fe := fault.As(err)
	if fe.Class != class {
		t.Errorf("class = %s, want %s (err %v)", fe.Class, class, err)
	}
	if code != "" && fe.Code != code {
		t.Errorf("code = %q, want %q", fe.Code, code)
	}
	if want != nil && !errors.Is(err, want) {
		t.Errorf("err = %v, want the driver's %v", err, want)
	}
}

// checkInfra merges res into doc as the engine does and compares the document it leaves.
func checkInfra(t *testing.T, doc json.RawMessage, res pipeline.Result, want string) {
	t.Helper()
	got, err := pipeline.MergeInfra(doc, res.Infra)
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if string(gb) != string(wb) {
		t.Errorf("infra = %s, want %s", gb, wb)
	}
}

func TestValidateAndFinalize(t *testing.T) {
	t.Parallel()
	check := steps.CheckConfig(decode)
	cases := map[string]struct {
		config   string
		wantCode string // empty: the step is done
	}{
		"valid":                  {config: `{"name":"edge"}`},
		"field at fault":         {config: `{}`, wantCode: "InvalidConfig"},
		"config does not decode": {config: `{"name":1}`, wantCode: "InvalidConfig"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			step := steps.Validate("validate", check)
			if step.Name != "validate" || step.Undo != nil {
				t.Fatalf("step %q with undo %v, want validate without undo", step.Name, step.Undo != nil)
			}
			j := &job.Job{Config: json.RawMessage(tc.config)}
			res, err := step.Do(context.Background(), &pipeline.Run{Job: j})
			if tc.wantCode != "" {
				checkFault(t, err, job.ClassUserAction, tc.wantCode, nil)
				if want := check(context.Background(), j); err.Error() != want.Error() {
					t.Errorf("err = %q, want the check's %q", err, want)
				}
				return
			}
			if err != nil || res.Outcome != pipeline.OutcomeDone || len(res.Infra) != 0 {
				t.Errorf("Do = %+v, %v; want done without infra", res, err)
			}
		})
	}
	t.Run("finalize", func(t *testing.T) {
		t.Parallel()
		step := steps.Finalize("finalize")
		res, err := step.Do(context.Background(), &pipeline.Run{Job: &job.Job{}})
		if step.Name != "finalize" || step.Undo != nil || err != nil || res.Outcome != pipeline.OutcomeDone || len(res.Infra) != 0 {
			t.Errorf("finalize %q undo=%v: %+v, %v; want done without infra or undo", step.Name, step.Undo != nil, res, err)
		}
	})
}

// Waits on slow cloud resources back off; once ready, the result is done.
func TestCloudWaitsBackOff(t *testing.T) {
	t.Parallel()
	const poll = 10 * time.Second
	for name, r := range map[string]pipeline.Result{
		"ensured, not ready": steps.Ensured("thing", 1, false, poll, "coming up"),
		"gone, not yet":      steps.Gone("thing", false, poll, "going"),
		"cloud wait":         steps.CloudWait(poll, "coming up", nil),
	} {
		if r.Outcome != pipeline.OutcomeWait || r.After != poll {
			t.Fatalf("%s: %+v", name, r)
		}
		// 10 s, 15 s, 22.5 s, 33.75 s, then 40 s (four times the poll) from then on.
		if got := []time.Duration{r.Backoff.Delay(r.After, 2), r.Backoff.Delay(r.After, 4), r.Backoff.Delay(r.After, 50)}; got[0] != 15*time.Second ||
			got[1] != 33750*time.Millisecond || got[2] != 4*poll {
			t.Fatalf("%s: delays %v", name, got)
		}
	}
	if r := steps.Ensured("thing", 1, true, poll, "coming up"); r.Outcome != pipeline.OutcomeDone {
		t.Fatalf("ready: %+v", r)
	}
}
