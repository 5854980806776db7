package pipeline_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
)

type fixed job.Family

func (f fixed) Family() job.Family                     { return job.Family(f) }
func (fixed) LeaseTTL() time.Duration                  { return time.Minute }
func (fixed) Validate(context.Context, *job.Job) error { return nil }
func (fixed) Steps(*job.Job) []pipeline.Step           { return nil }

func TestRegistryFallback(t *testing.T) {
	t.Parallel()
	r, err := pipeline.NewRegistry(fixed(job.FamilyRegistry))
	if err != nil {
		t.Fatal(err)
	}
	var asked []job.Family
	r.SetFallback(func(f job.Family) (pipeline.Pipeline, bool) {
		asked = append(asked, f)
		if strings.Contains(string(f), "/") {
			return fixed(f), true
		}
		return nil, false
	})
	cases := []struct {
		name   string
		family job.Family
		want   bool
	}{
		{"registered wins without asking", job.FamilyRegistry, true},
		{"pair resolved by the fallback", "managed-resource/bucket", true},
		{"unknown family", "nope", false},
	}
	for _, tc := range cases {
		p, ok := r.Get(tc.family)
		if ok != tc.want || (ok && p.Family() != tc.family) {
			t.Errorf("%s: Get(%q) = %v, %v; want found=%v", tc.name, tc.family, p, ok, tc.want)
		}
	}
	if len(asked) != 2 || asked[0] != "managed-resource/bucket" || asked[1] != "nope" {
		t.Fatalf("fallback asked for %v; want only the unregistered families", asked)
	}
}
