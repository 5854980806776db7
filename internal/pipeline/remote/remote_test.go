package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/remote"
	"github.com/groundworkhq/groundwork/internal/protocol"
	"github.com/groundworkhq/groundwork/internal/protocol/protocoltest"
)

type bundle struct {
	proc *protocoltest.ExampleProcess
	pl   *remote.Pipeline
	reg  *protocol.Registry
}

// setup starts the example provisioner as a process and registers it, as a user would.

const testOrg = "org_test"

func setup(t *testing.T, bin string, delay time.Duration) *bundle {
	t.Helper()
	cat, err := catalog.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	proc := protocoltest.StartExample(t, bin, delay)
	reg := protocol.NewRegistry(protocol.NewMemoryStore(), protocol.RegistryOptions{
		BuiltIn: protocol.Provisioner{Pairs: catalog.BuiltinPairs()}, Catalog: cat,
	})
	if _, err := reg.Register(context.Background(), testOrg, protocol.RegisterInput{
		Name: "buckets", URL: proc.URL(), Pairs: []catalog.Pair{catalog.PairBucket},
	}); err != nil {
		t.Fatalf("register the example: %v", err)
	}
	pl, ok := remote.For(job.Family(catalog.PairBucket.String()), remote.Options{
		Holders: reg, Catalog: cat, PollInterval: 20 * time.Millisecond, CallTimeout: 5 * time.Second,
	})
	if !ok {
		t.Fatal("remote.For refused the bucket family")
	}
	return &bundle{proc: proc, pl: pl, reg: reg}
}

func newJob(id, config string) *job.Job {
	return &job.Job{ID: id, OrgID: testOrg, Family: job.Family(catalog.PairBucket.String()), Config: json.RawMessage(config), Infra: json.RawMessage(`{}`)}
}

// runStep drives one step as the engine does: merge infra, come back after a Wait, stop at
// Done or Skip or an error. The deadline keeps a stuck operation from hanging the test.
func runStep(t *testing.T, j *job.Job, name string, fn func(context.Context, *pipeline.Run) (pipeline.Result, error)) error {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for attempt := 1; ; attempt++ {
		res, err := fn(context.Background(), &pipeline.Run{Job: j, Step: name, Attempt: attempt})
		if err != nil {
			return err
		}
		if j.Infra, err = pipeline.MergeInfra(j.Infra, res.Infra); err != nil {
			t.Fatal(err)
		}
		if res.Outcome != pipeline.OutcomeWait {
			return nil
		}
		if time.Now().After(deadline) {
			t.Fatalf("step %s still waiting after 30s: %s", name, res.Message)
		}
		time.Sleep(res.After) // what the engine's next_run_at does
	}
}

func steps(pl *remote.Pipeline, j *job.Job) map[string]pipeline.Step {
	m := map[string]pipeline.Step{}
	for _, s := range pl.Steps(j) {
		m[s.Name] = s
	}
	return m
}

// TestJobSurvivesProvisionerCrash is the end-to-end case of issue 5: a job for the bucket pair
// runs through the example provisioner; the provisioner is killed while the apply's operation
// is in progress; polling fails transiently; once it is back the job completes.
func TestJobSurvivesProvisionerCrash(t *testing.T) {
	t.Parallel()
	b := setup(t, protocoltest.BuildExample(t), 700*time.Millisecond)
	j := newJob("job_01CRASHTEST", `{"mode":"0750","description":"orders"}`)
	if err := b.pl.Validate(context.Background(), j); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	s := steps(b.pl, j)
	for _, name := range []string{"plan", "apply"} {
		if err := runStep(t, j, name, s[name].Do); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	var opID string
	if ok, _ := (&pipeline.Run{Job: j}).Infra(remote.KeyOperation, &opID); !ok {
		t.Fatalf("apply recorded no operation: infra %s", j.Infra)
	}

	b.proc.Kill() // mid-operation: the work takes 700ms and was accepted just now
	err := runStep(t, j, "await", s["await"].Do)
	if fault.ClassOf(err) != job.ClassTransient {
		t.Fatalf("await with the provisioner down: %v (class %s), want transient", err, fault.ClassOf(err))
	}
	if _, statErr := os.Stat(b.proc.BucketDir("job_01crashtest")); statErr == nil {
		t.Log("the work finished before the kill; the restart still has to answer for it")
	}

	b.proc.Start()
	for _, name := range []string{"await", "finalize"} {
		if err := runStep(t, j, name, s[name].Do); err != nil {
			t.Fatalf("%s after restart: %v", name, err)
		}
	}
	var after string
	if _, err := (&pipeline.Run{Job: j}).Infra(remote.KeyOperation, &after); err != nil || after != opID {
		t.Fatalf("operation after restart = %q, want %q: the provisioner must resume it, not start anew", after, opID)
	}
	fi, err := os.Stat(b.proc.BucketDir("job_01crashtest"))
	if err != nil || fi.Mode().Perm() != 0o750 {
		t.Fatalf("bucket after the job: %v, %v; want a directory with mode 0750", fi, err)
	}
	var outputs map[string]any
	if _, err := (&pipeline.Run{Job: j}).Infra(remote.KeyOutputs, &outputs); err != nil || outputs["path"] != b.proc.BucketDir("job_01crashtest") {
		t.Fatalf("outputs = %v, %v", outputs, err)
	}

	// Teardown: apply's Undo deletes the bucket and waits for it.
	if err := runStep(t, j, "apply", s["apply"].Undo); err != nil {
		t.Fatalf("undo apply: %v", err)
	}
	if _, err := os.Stat(b.proc.BucketDir("job_01crashtest")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("bucket after teardown: %v, want gone", err)
	}
	// Undo again (a re-run after a crash) is harmless.
	if err := runStep(t, j, "apply", s["apply"].Undo); err != nil {
		t.Fatalf("undo apply again: %v", err)
	}
}

func TestFailures(t *testing.T) {
	t.Parallel()
	bin := protocoltest.BuildExample(t)
	b := setup(t, bin, 10*time.Millisecond)
	ctx := context.Background()

	t.Run("invalid config refused by validation", func(t *testing.T) {
		t.Parallel()
		err := b.pl.Validate(ctx, newJob("job_bad", `{"mode":"rwx"}`))
		var ve *catalog.ValidationError
		if !errors.As(err, &ve) || ve.Fields[0].Field != "mode" {
			t.Fatalf("Validate = %v, want a field error on mode", err)
		}
	})
	t.Run("failed outcome carries its reason as user_action", func(t *testing.T) {
		t.Parallel()
		j := newJob("job_fail", `{"mode":"0999"}`) // past validation (skipped here), refused by the provisioner
		err := runStep(t, j, "plan", steps(b.pl, j)["plan"].Do)
		var wf *protocol.WorkFailedError
		if !errors.As(err, &wf) || fault.ClassOf(err) != job.ClassUserAction || wf.Code != "InvalidSettings" || wf.Reason == "" {
			t.Fatalf("plan = %v, want user_action InvalidSettings with a reason", err)
		}
	})
	t.Run("no provisioner for the pair", func(t *testing.T) {
		t.Parallel()
		pl := remote.New(catalog.Pair{Kind: catalog.CategoryTool, Type: "nobody"}, remote.Options{Holders: b.reg})
		err := pl.Validate(ctx, newJob("job_x", `{}`))
		if fe := fault.As(err); fe == nil || fe.Class != job.ClassUserAction || fe.Code != "NoProvisioner" {
			t.Fatalf("Validate = %v, want user_action NoProvisioner", err)
		}
	})
	t.Run("built-in pair is not remote", func(t *testing.T) {
		t.Parallel()
		pl := remote.New(catalog.PairPostgres, remote.Options{Holders: b.reg})
		if err := pl.Validate(ctx, newJob("job_y", `{}`)); fault.ClassOf(err) != job.ClassSystem {
			t.Fatalf("Validate = %v, want system", err)
		}
	})
	t.Run("retry after a failed operation applies again", func(t *testing.T) {
		t.Parallel()
		// The bucket's parent path is taken by a file, so the work itself fails; after the
		// user removes it, a retry of the job must succeed.
		j := newJob("job_retry", `{"mode":"0700"}`)
		if err := os.WriteFile(b.proc.BucketDir("job_retry"), []byte("in the way"), 0o600); err != nil {
			t.Fatal(err)
		}
		s := steps(b.pl, j)
		for _, name := range []string{"plan", "apply"} {
			if err := runStep(t, j, name, s[name].Do); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		err := runStep(t, j, "await", s["await"].Do)
		var wf *protocol.WorkFailedError
		if !errors.As(err, &wf) || wf.Code != "WorkFailed" {
			t.Fatalf("await = %v, want the work's failure", err)
		}
		// The engine records the failure on the step; the user fixes the cause and retries.
		j.Steps = []job.StepRecord{{Name: "await", Status: job.StepFailed, Error: err.Error()}}
		if err := os.Remove(b.proc.BucketDir("job_retry")); err != nil {
			t.Fatal(err)
		}
		if err := runStep(t, j, "await", s["await"].Do); err != nil {
			t.Fatalf("await on retry: %v", err)
		}
		if fi, err := os.Stat(b.proc.BucketDir("job_retry")); err != nil || !fi.IsDir() {
			t.Fatalf("bucket after retry: %v", err)
		}
	})
}
