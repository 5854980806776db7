package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/groundworkhq/groundwork/internal/api"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/jobs"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/provider"
	"github.com/groundworkhq/groundwork/internal/store"
)

// DefaultInspectTick is how often a replica looks for scheduled inspections that are due.
const DefaultInspectTick = time.Minute

// inspectorsOf finds a job's inspector: the driver its provider's module opens for its
// family, when that driver reads back what it made.
func inspectorsOf(mods *provider.Registry) jobs.InspectorFor {
	return func(ctx context.Context, j *job.Job) (jobs.Inspector, bool, error) {
		var d any
		var err error
		switch j.Family {
		case job.FamilyNetwork:
			a, ok := provider.Ability[provider.NetworkDrivers](mods, j.Provider)
			if !ok {
				return nil, false, nil
			}
			d, err = a.NetworkDriver(ctx, j)
		case job.FamilyVMPool:
			a, ok := provider.Ability[provider.VMPoolDrivers](mods, j.Provider)
			if !ok {
				return nil, false, nil
			}
			d, err = a.VMPoolDriver(ctx, j)
		case job.FamilyDatastore:
			a, ok := provider.Ability[provider.DatastoreDrivers](mods, j.Provider)
			if !ok {
				return nil, false, nil
			}
			d = a.DatastoreDriver().Servers
		default:
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		in, ok := d.(jobs.Inspector)
		return in, ok, nil
	}
}

// driftAPI is the drift routes' configuration.
func driftAPI(mods *provider.Registry) *api.DriftConfig {
	return &api.DriftConfig{Inspectors: inspectorsOf(mods)}
}

// runInspections runs the inspection schedule of every space until ctx ends.
func runInspections(ctx context.Context, st store.Full, reg *pipeline.Registry, mods *provider.Registry, tick time.Duration, log *slog.Logger) {
	if tick <= 0 {
		tick = DefaultInspectTick
	}
	svc := &jobs.Inspections{Jobs: &jobs.Service{Store: st, Pipelines: reg, Log: log, Now: time.Now}, Ledger: st,
		Inspectors: inspectorsOf(mods)}
	svc.RunSchedule(ctx, st, tick)
}
