package drivertest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
)

// RunStep runs step's Do (or its Undo) as the engine does: again after a wait or a
// transient error, merging each result's infra into the job's, until it neither waits nor
// fails, within ctx's deadline. A fault that is not transient ends the test. seen, if set,
// gets the job's infra after each call that waits.
func RunStep(ctx context.Context, t testing.TB, j *job.Job, step pipeline.Step, undo bool, seen func(json.RawMessage)) {
	t.Helper()
	fn := step.Do
	if undo {
		fn = step.Undo
	}
	if fn == nil {
		return
	}
	for attempt := 1; ; attempt++ {
		res, err := fn(ctx, &pipeline.Run{Job: j, Step: step.Name, Attempt: attempt})
		if err != nil && fault.ClassOf(err) != job.ClassTransient {
			t.Fatalf("step %s (undo=%v): %v", step.Name, undo, err)
		}
		if err == nil {
			if j.Infra, err = pipeline.MergeInfra(j.Infra, res.Infra); err != nil {
				t.Fatal(err)
			}
			if res.Outcome != pipeline.OutcomeWait {
				return
			}
			if seen != nil {
				seen(j.Infra)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("step %s (undo=%v) not done before the deadline (last error %v)", step.Name, undo, err)
		case <-time.After(time.Millisecond):
		}
	}
}

// RunSteps runs every step's Do in order, or, for undo, every Undo last first (RunStep).
func RunSteps(ctx context.Context, t testing.TB, j *job.Job, steps []pipeline.Step, undo bool, seen func(json.RawMessage)) {
	t.Helper()
	for i := range steps {
		s := steps[i]
		if undo {
			s = steps[len(steps)-1-i]
		}
		RunStep(ctx, t, j, s, undo, seen)
	}
}

// Until calls f until it reports done, failing the test on an error that is not transient
// or at ctx's deadline.
func Until(ctx context.Context, t testing.TB, what string, f func() (bool, error)) {
	t.Helper()
	for {
		done, err := f()
		if err != nil && fault.ClassOf(err) != job.ClassTransient {
			t.Fatalf("%s: %v", what, err)
		}
		if err == nil && done {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not done before the deadline (last error %v)", what, err)
		case <-time.After(time.Millisecond):
		}
	}
}

// Marker is a test cloud that notes what each request needed (an IAM permission, an RBAC
// action): Mark is where the requests served so far end, Since what came after a mark.
type Marker interface {
	Mark() int
	Since(mark int) []string
}

// RunMarked runs every step's Do in order, then every Undo last first (RunStep), and returns
// what each step's requests needed, by step name, as cloud notes it.
func RunMarked(ctx context.Context, t testing.TB, cloud Marker, j *job.Job, steps []pipeline.Step) map[string][]string {
	t.Helper()
	seen := map[string][]string{}
	for _, undo := range []bool{false, true} {
		for i := range steps {
			s := steps[i]
			if undo {
				s = steps[len(steps)-1-i]
			}
			mark := cloud.Mark()
			RunStep(ctx, t, j, s, undo, nil)
			seen[s.Name] = append(seen[s.Name], cloud.Since(mark)...)
		}
	}
	return seen
}

// MarkerOf is a Marker of a cloud's Mark and its own since method.
func MarkerOf(mark func() int, since func(int) []string) Marker { return marker{mark, since} }

type marker struct {
	mark  func() int
	since func(int) []string
}

func (m marker) Mark() int               { return m.mark() }
func (m marker) Since(mark int) []string { return m.since(mark) }

// EnsureCluster calls a kubernetes driver as the pipeline's steps do (network, roles, the
// cluster) until the cluster is ready; a transient error is retried as the engine would,
// any other is returned.
func EnsureCluster(ctx context.Context, d kubernetes.Driver, j *job.Job, cfg kubernetes.Config) error {
	for {
		ready, err := func() (bool, error) {
			n, err := d.EnsureNetwork(ctx, j, cfg)
			if err != nil || !n.Ready {
				return false, err
			}
			r, err := d.EnsureRoles(ctx, j)
			if err != nil {
				return false, err
			}
			cl, err := d.EnsureCluster(ctx, j, cfg, n, r)
			return err == nil && cl.Ready, err
		}()
		switch {
		case ready:
			return nil
		case err != nil && fault.ClassOf(err) != job.ClassTransient:
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}
