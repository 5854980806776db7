package vmpool_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
)

// execDriver is a bootDriver that says how commands reach its VMs.
type execDriver struct{ *bootDriver }

func (execDriver) ExecMode() string { return "OSLogin+IAP" }

// The pool's space records the exec channel its driver names, and none when the driver names
// none.
func TestRegisterSpaceRecordsTheExecChannel(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		d    vmpool.Driver
		want any
	}{
		"driver with an exec channel": {execDriver{&bootDriver{}}, "OSLogin+IAP"},
		"driver without":              {&bootDriver{}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pl := vmpool.New(func(context.Context, *job.Job) (vmpool.Driver, error) { return tc.d, nil }, 0)
			j := &job.Job{ID: "job_exec", Family: job.FamilyVMPool, Config: json.RawMessage(`{"name":"p","instanceType":"t","min":1,"max":1}`),
				Infra: json.RawMessage(`{"vms":[{"id":"i-1","state":"ready"}]}`)}
			for _, s := range pl.Steps(j) {
				if s.Name != vmpool.StepRegisterSpace {
					continue
				}
				res, err := s.Do(context.Background(), &pipeline.Run{Job: j, Step: s.Name, Attempt: 1})
				if err != nil {
					t.Fatal(err)
				}
				space, _ := res.Infra[vmpool.InfraSpace].(map[string]any)
				if space["execMode"] != tc.want || space["vmCount"] != 1 {
					t.Fatalf("space %v, want execMode %v", space, tc.want)
				}
				return
			}
			t.Fatal("no register_space step")
		})
	}
}
