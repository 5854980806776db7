package engine

import (
	"testing"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
)

// A stored job is run only when this build lays it out as the build that stored it did: step
// records are matched by position, so a renamed or reordered step would run other work
// against the record.
func TestStepsChanged(t *testing.T) {
	t.Parallel()
	steps := []pipeline.Step{{Name: "validate"}, {Name: "network"}, {Name: "finalize"}}
	recs := func(names ...string) []job.StepRecord {
		out := make([]job.StepRecord, len(names))
		for i, n := range names {
			out[i] = job.StepRecord{Name: n}
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		records []job.StepRecord
		want    string
	}{
		{"same layout", recs("validate", "network", "finalize"), ""},
		{"a step more", recs("validate", "network", "dns", "finalize"), "3 steps, 4 records"},
		{"renamed", recs("validate", "net", "finalize"), `step 2 is "network", its record "net"`},
		{"reordered", recs("network", "validate", "finalize"), `step 1 is "validate", its record "network"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := stepsChanged(steps, tc.records); got != tc.want {
				t.Fatalf("stepsChanged = %q, want %q", got, tc.want)
			}
		})
	}
}
