package pipeline_test

import (
	"slices"
	"testing"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/validation"
)

func TestReopen(t *testing.T) {
	t.Parallel()
	recs := func(st ...job.StepStatus) []job.StepRecord {
		var out []job.StepRecord
		for i, s := range st {
			out = append(out, job.StepRecord{Name: string(rune('a' + i)), Status: s})
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		steps []job.StepRecord
		open  []string
		rerun []string
		field string
	}{
		{name: "the named steps", steps: recs(job.StepDone, job.StepDone, job.StepDone, job.StepDone), open: []string{"b", "d"}, rerun: []string{"b", "d"}},
		{name: "and what a failed update left after the first", steps: recs(job.StepDone, job.StepDone, job.StepFailed, job.StepDone),
			open: []string{"b", "d"}, rerun: []string{"b", "c", "d"}},
		{name: "not what lies before it", steps: recs(job.StepFailed, job.StepDone, job.StepDone), open: []string{"b"}, rerun: []string{"b"}},
		{name: "a step the job lacks", steps: recs(job.StepDone), open: []string{"z"}, field: "config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			j := &job.Job{Steps: tc.steps}
			p := &pipeline.UpdatePlan{Steps: slices.Clone(tc.steps)}
			err := p.Reopen(j, tc.open...)
			if tc.field != "" {
				if f, ok := validation.Fields(err); !ok || f[0].Field != tc.field {
					t.Fatalf("Reopen: %v; want a field error on %s", err, tc.field)
				}
				return
			}
			if err != nil || !slices.Equal(p.Rerun, tc.rerun) {
				t.Fatalf("Reopen: %v, rerun %v; want %v", err, p.Rerun, tc.rerun)
			}
			for _, name := range tc.rerun {
				if s := p.Steps[j.StepIndex(name)]; s.Status != job.StepPending {
					t.Errorf("step %s is %s, want pending", name, s.Status)
				}
			}
			if tc.steps[0].Status == job.StepFailed && p.Steps[0].Status != job.StepFailed {
				t.Error("a step before the first reopened one was touched")
			}
		})
	}
}
