package fault

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/groundworkhq/groundwork/internal/job"
)

func TestClassOf(t *testing.T) {
	t.Parallel()
	base := errors.New("boom")
	cases := map[string]struct {
		err  error
		want job.FailureClass
	}{
		"transient":         {Transient(base), job.ClassTransient},
		"wrapped transient": {fmt.Errorf("step x: %w", Transient(base)), job.ClassTransient},
		"user action":       {UserAction(base, "AccessDenied", "grant it", ""), job.ClassUserAction},
		"system":            {System(base), job.ClassSystem},
		"unclassified":      {base, job.ClassSystem},
		"deadline":          {fmt.Errorf("call: %w", context.DeadlineExceeded), job.ClassTransient},
		"outer class wins":  {Transient(System(base)), job.ClassTransient},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := ClassOf(tc.err); got != tc.want {
				t.Fatalf("ClassOf(%v) = %s, want %s", tc.err, got, tc.want)
			}
			if !errors.Is(tc.err, base) && name != "deadline" {
				t.Fatalf("classification lost the cause")
			}
		})
	}
}
