package engine

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groundworkhq/groundwork/internal/job"
)

// Metrics are the engine's Prometheus series. They register on the registry given, never on
// the global default, so tests and several engines in one process do not collide.
type Metrics struct {
	stepDuration *prometheus.HistogramVec
	stepErrors   *prometheus.CounterVec
	leaseLosses  prometheus.Counter
}

// NewMetrics creates the series and registers them on reg when reg is not nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		stepDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "groundwork_step_duration_seconds",
			Help:    "Duration of one step execution, by family, step and outcome.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"family", "step", "outcome"}),
		stepErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "groundwork_cloud_call_errors_total",
			Help: "Step errors by family and failure class (transient, user_action, system).",
		}, []string{"family", "class"}),
		leaseLosses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "groundwork_lease_losses_total",
			Help: "Leases lost by this replica (another worker took the job over).",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.stepDuration, m.stepErrors, m.leaseLosses)
	}
	return m
}

func (m *Metrics) observeStep(f job.Family, step, outcome string, d time.Duration) {
	m.stepDuration.WithLabelValues(string(f), step, outcome).Observe(d.Seconds())
}
