package metrics_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/groundworkhq/groundwork/internal/metrics"
	"github.com/groundworkhq/groundwork/internal/store"
)

type driftLedger struct {
	counts []store.DriftCount
	err    error
}

func (l driftLedger) DriftCounts(context.Context) ([]store.DriftCount, error) { return l.counts, l.err }

// Each space's drift is one series; a ledger that cannot be read reports nothing.
func TestDriftedFields(t *testing.T) {
	t.Parallel()
	c := metrics.DriftedFields(driftLedger{counts: []store.DriftCount{{OrgID: "org_a", SpaceID: "spc_1", Fields: 2}, {OrgID: "org_a", SpaceID: "spc_2"}}})
	want := `# HELP groundwork_drifted_fields Fields of completed jobs' resources whose value in the cloud differs from what the job applied, by the latest inspection, per space.
# TYPE groundwork_drifted_fields gauge
groundwork_drifted_fields{org="org_a",space="spc_1"} 2
groundwork_drifted_fields{org="org_a",space="spc_2"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "groundwork_drifted_fields"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(metrics.DriftedFields(driftLedger{err: errors.New("down")})); n != 0 {
		t.Fatalf("%d series from a ledger that cannot be read, want 0", n)
	}
}
