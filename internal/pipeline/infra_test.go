package pipeline_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
)

func TestInfraOf(t *testing.T) {
	t.Parallel()
	type network struct {
		VPCID string `json:"vpcID"`
	}
	cases := map[string]struct {
		infra   string
		want    network
		wantErr string // empty: no error; else a part of the system fault's message
	}{
		"recorded":            {infra: `{"network":{"vpcID":"vpc-1"},"iam":{}}`, want: network{VPCID: "vpc-1"}},
		"absent":              {infra: `{"iam":{}}`, wantErr: `infra "network" missing`},
		"cleared to null":     {infra: `{"network":null}`, wantErr: `infra "network" missing`},
		"no infra at all":     {infra: ``, wantErr: `infra "network" missing`},
		"recorded unreadable": {infra: `{"network":"vpc-1"}`, wantErr: `decode infra "network"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := &pipeline.Run{Job: &job.Job{Infra: json.RawMessage(tc.infra)}}
			got, err := pipeline.InfraOf[network](r, "network")
			if tc.wantErr == "" {
				if err != nil || !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("InfraOf = %+v, %v; want %+v", got, err, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want one saying %q", err, tc.wantErr)
			}
			if c := fault.ClassOf(err); c != job.ClassSystem {
				t.Errorf("class = %s, want system: a gap in infra is ours, not the user's", c)
			}
		})
	}
}
