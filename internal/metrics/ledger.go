// Package metrics holds the Prometheus collectors that read the job ledger at scrape time.
package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groundworkhq/groundwork/internal/job"
)

// scrapeTimeout bounds a collector's read of the ledger: a slow database must not hang
// /metrics.
const scrapeTimeout = 2 * time.Second

// JobCounter counts the ledger's jobs by status.
type JobCounter interface {
	CountJobs(ctx context.Context) (map[job.Status]int, error)
}

// JobsByStatus reports the ledger's job counts at scrape time (groundwork_jobs{status}).
func JobsByStatus(st JobCounter) prometheus.Collector { return jobsByStatus{st} }

type jobsByStatus struct{ st JobCounter }

var jobsDesc = prometheus.NewDesc("groundwork_jobs", "Jobs in the ledger by status.", []string{"status"}, nil)

func (c jobsByStatus) Describe(ch chan<- *prometheus.Desc) { ch <- jobsDesc }

func (c jobsByStatus) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	counts, err := c.st.CountJobs(ctx)
	if err != nil {
		return
	}
	for _, s := range job.Statuses {
		ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
}

// DueQueue finds when the longest-waiting due job became due.
type DueQueue interface {
	OldestDue(ctx context.Context, now time.Time) (due time.Time, ok bool, err error)
}

// QueueLag reports, at scrape time, how long the longest-waiting due job has waited for a
// worker (groundwork_queue_lag_seconds): near zero while workers keep up, growing when they
// do not (all replicas down, draining, or saturated).
func QueueLag(st DueQueue) prometheus.Collector { return queueLag{st} }

type queueLag struct{ st DueQueue }

var queueLagDesc = prometheus.NewDesc("groundwork_queue_lag_seconds",
	"How long the longest-waiting queued job has been due without a worker taking it (0 when none is).", nil, nil)

func (c queueLag) Describe(ch chan<- *prometheus.Desc) { ch <- queueLagDesc }

func (c queueLag) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	now := time.Now()
	due, ok, err := c.st.OldestDue(ctx, now)
	if err != nil {
		return
	}
	lag := 0.0
	if ok {
		lag = max(now.Sub(due).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(queueLagDesc, prometheus.GaugeValue, lag)
}
