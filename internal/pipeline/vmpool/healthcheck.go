package vmpool

import (
	"context"
	"fmt"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
)

// opHealthCheck is the config's vmOp while a config update's health check change is pending;
// it is the update's own, not a vmOp a user sends (CheckOp refuses it).
const opHealthCheck = "health_check"

// HealthChecker is what a Driver may also do: change a live pool's load
// balancer health check in place (the config's healthCheckPath, healthCheckPort). A driver without it leaves
// the health check as the pool was made with, and a config update refuses the change.
type HealthChecker interface {
	// HealthCheckFields are the config fields (healthCheckPath, healthCheckPort) the driver
	// changes in place; a change of another is refused.
	HealthCheckFields() []string
	SetHealthCheck(ctx context.Context, j *job.Job, c Config) error
}

// healthCheck is finalize's Do for a health check change: the driver patches the check.
func (p *Pipeline) healthCheck(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	c, hc, err := driverAs[HealthChecker](ctx, p, r, "HealthCheckUnsupported", "this provider cannot change a live pool's health check",
		"Set the health check back to the pool's; make a new pool for another one.")
	if err != nil {
		return pipeline.Result{}, err
	}
	if err := hc.SetHealthCheck(ctx, r.Job, c); err != nil {
		return pipeline.Result{}, err
	}
	res := pipeline.Done(nil)
	res.Message = fmt.Sprintf("health check set to %s on port %d", c.HealthCheckPath, c.HealthCheckPort)
	return res, nil
}
