// Package drivertest is the conformance suite every cloud module's family drivers pass, as
// River runs one driver suite against every database driver. A module's tests call the
// function of each family it serves (Network, Registry, DNSZone, VMPool, Kubernetes,
// Datastore) with a harness that opens the driver on an isolated account of its test cloud
// (moto, a fake, real local servers) and an Observer that lists what that account holds.
//
// What the suite holds every driver to, because the engine's correctness rests on it:
//   - ensure twice is one resource: a step re-run after a crash or a lost answer finds what
//     the first run made instead of making a second one;
//   - every resource it makes carries the job's id in its tags or labels, which is how a
//     re-run finds it and how a teardown knows it is the job's to delete;
//   - delete removes all of it, and delete of what is gone (or never was) succeeds, so an
//     undo can be re-run and a teardown of a half-built job finishes;
//   - a request the cloud refuses comes back as a classified fault, so the engine knows
//     whether to retry or to ask the user.
package drivertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
)

// Resource is one thing in the test account, as the cloud reports it.
type Resource struct {
	// Kind names the resource type ("vpc", "ecr-repository", "server").
	Kind string
	ID   string
	// JobID is the job id its tags or labels carry; empty when it carries none.
	JobID string
}

func (r Resource) String() string { return r.Kind + "/" + r.ID }

// Observer lists every resource of the families under test in the harness's isolated
// account, whoever made it: a resource without the job's tag must show up to fail the suite.
// Resources the cloud makes by itself with a parent (a VPC's main route table, its default
// security group) are left out, as they go with the parent.
type Observer func(ctx context.Context) ([]Resource, error)

// Refusal is a call the test cloud refuses, and the fault class the driver must give it.
type Refusal[D any] struct {
	// Call makes the refused request on a driver opened by the harness, for job j.
	Call func(ctx context.Context, d D, j *job.Job) error
	// Class is the class the error must carry (user_action for a request the user can fix).
	Class job.FailureClass
}

// Options tune the suite to a test cloud.
type Options struct {
	// Timeout bounds the whole suite for one family (default 5 minutes).
	Timeout time.Duration
	// Poll is the wait between calls while a resource is not ready or not gone yet.
	Poll time.Duration
}

// lifecycle is one family's driver reduced to what the suite checks: make everything a job
// needs, and remove it. Both are called repeatedly until they report ready (or gone), as the
// pipeline's steps are.
type lifecycle struct {
	ensure func(ctx context.Context, j *job.Job) (ready bool, err error)
	delete func(ctx context.Context, j *job.Job) (gone bool, err error)
	refuse func(ctx context.Context, j *job.Job) error
	class  job.FailureClass
}

// run is the suite. newJob makes a job of the family with the harness's config.
func run(t *testing.T, o Options, lc lifecycle, observe Observer, newJob func(id string) *job.Job) {
	t.Helper()
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.Poll <= 0 {
		o.Poll = 50 * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()

	baseline, err := observe(ctx)
	if err != nil {
		t.Fatalf("observe the empty account: %v", err)
	}
	fresh := func(t *testing.T) []Resource {
		t.Helper()
		now, err := observe(ctx)
		if err != nil {
			t.Fatalf("observe: %v", err)
		}
		return slices.DeleteFunc(now, func(r Resource) bool { return slices.Contains(baseline, r) })
	}
	id := suffix(t.Name())
	j := newJob("job_dt" + id)
	var first []Resource

	t.Run("EnsureTwiceIsOneResource", func(t *testing.T) {
		until(ctx, t, o.Poll, "ensure", func() (bool, error) { return lc.ensure(ctx, j) })
		first = fresh(t)
		if len(first) == 0 {
			t.Fatal("ensure reported ready but the account holds nothing new")
		}
		until(ctx, t, o.Poll, "ensure again", func() (bool, error) { return lc.ensure(ctx, j) })
		if again := fresh(t); !sameSet(first, again) {
			t.Fatalf("ensure again changed the account:\n first %v\n again %v", first, again)
		}
	})
	t.Run("ResourcesCarryTheJobID", func(t *testing.T) {
		if len(first) == 0 {
			t.Fatal("nothing was made, so there is nothing to check (see EnsureTwiceIsOneResource)")
		}
		for _, r := range first {
			if r.JobID != j.ID {
				t.Errorf("%s carries job id %q, want %q", r, r.JobID, j.ID)
			}
		}
	})
	t.Run("DeleteRemovesAllAndIsRepeatable", func(t *testing.T) {
		until(ctx, t, o.Poll, "delete", func() (bool, error) { return lc.delete(ctx, j) })
		if left := fresh(t); len(left) != 0 {
			t.Fatalf("left after delete: %v", left)
		}
		gone, err := lc.delete(ctx, j)
		if err != nil || !gone {
			t.Fatalf("delete of what is gone = %v, %v; want gone, no error", gone, err)
		}
	})
	t.Run("DeleteOfWhatNeverExistedSucceeds", func(t *testing.T) {
		never := newJob("job_dn" + id)
		until(ctx, t, o.Poll, "delete", func() (bool, error) { return lc.delete(ctx, never) })
		if left := fresh(t); len(left) != 0 {
			t.Fatalf("delete made something: %v", left)
		}
	})
	t.Run("RefusalIsClassified", func(t *testing.T) {
		if lc.refuse == nil {
			t.Fatal("the harness gives no refused call; every driver must show its errors are classified")
		}
		rj := newJob("job_dr" + id)
		err := lc.refuse(ctx, rj)
		var fe *fault.Error
		switch {
		case err == nil:
			t.Fatal("the refused call succeeded")
		case !errors.As(err, &fe):
			t.Fatalf("error is not classified: %v", err)
		case fe.Class != lc.class:
			t.Fatalf("class %s, want %s: %v", fe.Class, lc.class, err)
		}
		// Whatever the refused call left is removable like anything else.
		until(ctx, t, o.Poll, "delete after refusal", func() (bool, error) { return lc.delete(ctx, rj) })
	})
}

// until calls f until it reports done. A transient error is retried, as the engine does.
func until(ctx context.Context, t *testing.T, poll time.Duration, what string, f func() (bool, error)) {
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
		case <-time.After(poll):
		}
	}
}

func sameSet(a, b []Resource) bool {
	if len(a) != len(b) {
		return false
	}
	for _, r := range a {
		if !slices.Contains(b, r) {
			return false
		}
	}
	return true
}

// suffix makes a short id from the test's name; job ids become cloud names, which are short.
func suffix(name string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(name) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
		}
	}
	s := b.String()
	if len(s) > 12 {
		s = s[len(s)-12:]
	}
	return fmt.Sprintf("%s%d", s, time.Now().UnixNano()%10000)
}
