package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groundworkhq/groundwork/internal/store"
)

// DriftCounter sums the drift the latest inspections found, per org and space.
type DriftCounter interface {
	DriftCounts(ctx context.Context) ([]store.DriftCount, error)
}

// DriftedFields reports, at scrape time, how many fields of completed jobs' resources differ
// from what was applied, by the latest inspection of each job, per org and space
// (groundwork_drifted_fields{org,space}). It reads the ledger, so every replica answers the
// same, whichever inspected.
func DriftedFields(st DriftCounter) prometheus.Collector { return driftedFields{st} }

type driftedFields struct{ st DriftCounter }

var driftDesc = prometheus.NewDesc("groundwork_drifted_fields",
	"Fields of completed jobs' resources whose value in the cloud differs from what the job applied, by the latest inspection, per space.",
	[]string{"org", "space"}, nil)

func (c driftedFields) Describe(ch chan<- *prometheus.Desc) { ch <- driftDesc }

func (c driftedFields) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	counts, err := c.st.DriftCounts(ctx)
	if err != nil {
		return
	}
	for _, d := range counts {
		ch <- prometheus.MustNewConstMetric(driftDesc, prometheus.GaugeValue, float64(d.Fields), d.OrgID, d.SpaceID)
	}
}
