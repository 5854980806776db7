package engine

import (
	"context"
	"time"

	"github.com/groundworkhq/groundwork/internal/store"
)

// pruneBatch is how many jobs one prune call removes; a backlog goes in several short ones.
const pruneBatch = 1000

// retain removes, every PruneEvery, the jobs that have been over (cancelled, torn down) for
// longer than Retention, so that the ledger does not grow without bound. Live jobs, completed
// ones (their infrastructure exists) and failed ones (they can be retried) stay; see
// store.Pruner. Every replica may run it: deleting a row twice is harmless.
func (e *Engine) retain(ctx context.Context, p store.Pruner) {
	every := e.cfg.PruneEvery
	if every <= 0 {
		every = min(max(e.cfg.Retention/10, time.Minute), time.Hour)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		before := e.cfg.Now().Add(-e.cfg.Retention)
		total := 0
		for ctx.Err() == nil {
			n, err := p.PruneJobs(ctx, &store.PruneJobsParams{Before: before, Limit: pruneBatch})
			if err != nil {
				if ctx.Err() == nil {
					e.log.Warn("pruning old jobs failed; trying again next time", "error", err)
				}
				break
			}
			total += n
			if n < pruneBatch {
				break
			}
		}
		if total > 0 {
			e.log.Info("pruned jobs that were over", "count", total, "older_than", before)
		}
	}
}
