package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// SpaceInspectInterval is the space setting (in the space's config) that schedules the
// inspection of every completed job of the space, in minutes; 0 or absent is off.
const SpaceInspectInterval = "inspectIntervalMinutes"

// ScheduleStore is what the inspection schedule lists: every org's spaces and their
// completed jobs.
type ScheduleStore interface {
	ListOrgs(ctx context.Context) ([]*store.Org, error)
	ListSpaces(ctx context.Context, orgID string) ([]*store.Space, error)
	ListJobs(ctx context.Context, p *store.ListJobsParams) (*store.JobPage, error)
}

// ScheduleActor is who the audit log names for scheduled inspections.
const ScheduleActor = "system:inspector"

// InspectInterval reads a space's inspection interval from its config (0: off).
func InspectInterval(sp *store.Space) time.Duration {
	var cfg map[string]json.RawMessage
	if json.Unmarshal(sp.Config, &cfg) != nil {
		return 0
	}
	var minutes int
	if json.Unmarshal(cfg[SpaceInspectInterval], &minutes) != nil || minutes <= 0 {
		return 0
	}
	return time.Duration(minutes) * time.Minute
}

// CheckInspectInterval refuses a space config whose inspection interval is not a whole
// number of minutes between 0 and a week.
func CheckInspectInterval(config json.RawMessage) error {
	var cfg map[string]json.RawMessage
	if len(config) == 0 || json.Unmarshal(config, &cfg) != nil {
		return nil // the config's own shape is checked where spaces are made
	}
	raw, ok := cfg[SpaceInspectInterval]
	if !ok {
		return nil
	}
	var minutes int
	if json.Unmarshal(raw, &minutes) != nil || minutes < 0 || minutes > 7*24*60 {
		return &Refusal{Reason: Invalid, Detail: "bad " + SpaceInspectInterval,
			Fields: []validation.FieldError{{Field: "config." + SpaceInspectInterval, Rule: "range",
				Message: "a whole number of minutes from 0 (off) to 10080 (a week)"}}}
	}
	return nil
}

// InspectDue inspects, once, every completed job of every space with an interval whose
// next inspection is due at now. Each job is claimed first with a conditional write of its
// next-inspect time, so that of several replicas running this at once one inspects it per
// interval. It returns how many jobs it inspected; one job's failure (an unreachable cloud,
// a family without an inspector) is logged and does not stop the others.
func (s *Inspections) InspectDue(ctx context.Context, st ScheduleStore) (int, error) {
	orgs, err := st.ListOrgs(ctx)
	if err != nil {
		return 0, err
	}
	done := 0
	for _, o := range orgs {
		spaces, err := st.ListSpaces(ctx, o.ID)
		if err != nil {
			return done, err
		}
		for _, sp := range spaces {
			every := InspectInterval(sp)
			if every <= 0 {
				continue
			}
			n, err := s.inspectSpace(ctx, st, sp, every)
			done += n
			if err != nil {
				return done, err
			}
		}
	}
	return done, nil
}

func (s *Inspections) inspectSpace(ctx context.Context, st ScheduleStore, sp *store.Space, every time.Duration) (int, error) {
	done := 0
	p := &store.ListJobsParams{OrgID: sp.OrgID, SpaceID: sp.ID, Status: job.StatusCompleted, Limit: 200}
	for {
		page, err := st.ListJobs(ctx, p)
		if err != nil {
			return done, err
		}
		for _, j := range page.Jobs {
			if j.Kind == job.KindRemediation {
				continue
			}
			if _, err := s.inspector(ctx, j); err != nil {
				continue // a family that cannot be inspected is not claimed at every round
			}
			now := s.Jobs.Now()
			won, err := s.Ledger.ClaimInspection(ctx, j.OrgID, j.ID, now, now.Add(every))
			if err != nil {
				return done, err
			}
			if !won {
				continue
			}
			if _, err := s.inspect(ctx, Caller{OrgID: j.OrgID, Actor: ScheduleActor}, j); err != nil {
				var rf *Refusal
				if !errors.As(err, &rf) {
					s.Jobs.log().Warn("scheduled inspection failed", "job_id", j.ID, "error", err)
				}
				continue
			}
			done++
		}
		if page.Next == "" {
			return done, nil
		}
		p.After = page.Next
	}
}

// RunSchedule runs InspectDue every tick until ctx ends.
func (s *Inspections) RunSchedule(ctx context.Context, st ScheduleStore, tick time.Duration) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		if _, err := s.InspectDue(ctx, st); err != nil && ctx.Err() == nil {
			s.Jobs.log().Warn("inspection schedule", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
