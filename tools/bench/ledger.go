package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
	"github.com/groundworkhq/groundwork/internal/store"
)

// LedgerPoint is claim and list latency with a given number of finished jobs in the ledger.
type LedgerPoint struct {
	Rows       int     `json:"finishedRows"`
	ClaimP50ms float64 `json:"claimP50ms"`
	ClaimP99ms float64 `json:"claimP99ms"`
	ListP50ms  float64 `json:"listPageP50ms"`
	ListP99ms  float64 `json:"listPageP99ms"`
	// Set on the last point: retention pruned the half of the rows that were over.
	Pruned   int     `json:"pruned,omitempty"`
	PruneMs  float64 `json:"pruneMs,omitempty"`
	LiveKept bool    `json:"liveKept,omitempty"`
}

const ledgerSamples = 200

// ledger grows the ledger to each size in rows (ascending) with finished jobs (half
// completed, half torn down), and at each size times claims (one due job among the finished
// ones) and first pages of the org's newest jobs. At the last size it prunes the torn-down
// half as retention would and checks the live and completed jobs are all still there.
func (g *gwRunner) ledger(ctx context.Context, rows []int, progress func(int)) ([]LedgerPoint, error) {
	if err := g.clear(ctx); err != nil {
		return nil, err
	}
	rows = append([]int(nil), rows...)
	sort.Ints(rows)
	p := &testfamily.Pipeline{N: 1}
	old := time.Now().Add(-30 * 24 * time.Hour)
	have := 0
	var out []LedgerPoint
	for _, n := range rows {
		for _, st := range []job.Status{job.StatusCompleted, job.StatusDeleted} {
			if add := (n - have) / 2; add > 0 {
				if err := g.seed(ctx, p.NewJob(newID(), old), add, st, old, time.Second); err != nil {
					return nil, err
				}
			}
		}
		have = n
		progress(n)
		if g.dialect == "postgres" {
			// A bulk load this size outruns autovacuum's statistics for a while; a server in
			// service has them refreshed after every tenth of the table changes.
			if _, err := g.s.DB().ExecContext(ctx, `ANALYZE provisioning_jobs`); err != nil {
				return nil, err
			}
		}
		// Each sample claims one due job among the finished ones and lets it go again.
		due := p.NewJob(newID(), time.Now())
		if _, err := g.s.CreateJob(ctx, &store.CreateJobParams{Job: due, Now: time.Now()}); err != nil {
			return nil, err
		}
		var claims, lists []time.Duration
		for i := 0; i < ledgerSamples; i++ {
			now := time.Now()
			t0 := time.Now()
			got, err := g.s.ClaimJobs(ctx, &store.ClaimJobsParams{Owner: "bench-ledger", Now: now, Limit: 1})
			claims = append(claims, time.Since(t0))
			if err != nil || len(got) != 1 {
				return nil, fmt.Errorf("ledger claim: %d jobs, %v", len(got), err)
			}
			j := got[0]
			if _, err := g.s.Checkpoint(ctx, &store.CheckpointParams{ID: j.ID, LeaseToken: j.LeaseToken, Now: now, Steps: j.Steps,
				Infra: j.Infra, Status: job.StatusQueued, Phase: j.Phase, NextRunAt: now, Release: true}); err != nil {
				return nil, err
			}
			t0 = time.Now()
			page, err := g.s.ListJobs(ctx, &store.ListJobsParams{OrgID: due.OrgID, Limit: 50})
			lists = append(lists, time.Since(t0))
			if err != nil || len(page.Jobs) != 50 {
				return nil, fmt.Errorf("ledger list: %v", err)
			}
		}
		if _, err := g.s.DB().ExecContext(ctx, `DELETE FROM provisioning_jobs WHERE id = $1`, due.ID); err != nil {
			return nil, err
		}
		c, l := newLatency(claims), newLatency(lists)
		out = append(out, LedgerPoint{Rows: n, ClaimP50ms: c.P50ms, ClaimP99ms: c.P99ms, ListP50ms: l.P50ms, ListP99ms: l.P99ms})
	}
	pr, ok := g.s.(store.Pruner)
	if !ok || len(out) == 0 {
		return out, nil
	}
	live := p.NewJob(newID(), time.Now().Add(time.Hour))
	if _, err := g.s.CreateJob(ctx, &store.CreateJobParams{Job: live, Now: old}); err != nil {
		return nil, err
	}
	last := &out[len(out)-1]
	t0 := time.Now()
	for {
		n, err := pr.PruneJobs(ctx, &store.PruneJobsParams{Before: time.Now().Add(-24 * time.Hour), Limit: 1000})
		if err != nil {
			return nil, err
		}
		last.Pruned += n
		if n < 1000 {
			break
		}
	}
	last.PruneMs = msOf(time.Since(t0))
	counts, err := g.s.CountJobs(ctx)
	if err != nil {
		return nil, err
	}
	last.LiveKept = counts[job.StatusQueued] == 1 && counts[job.StatusCompleted] == have/2 && counts[job.StatusDeleted] == 0
	return out, nil
}
