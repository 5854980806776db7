package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/metrics"
)

type ledger struct {
	counts map[job.Status]int
	due    time.Time
	err    error
}

func (l ledger) CountJobs(context.Context) (map[job.Status]int, error) { return l.counts, l.err }

func (l ledger) OldestDue(context.Context, time.Time) (time.Time, bool, error) {
	return l.due, !l.due.IsZero(), l.err
}

// Every status is reported, zero when the ledger has none, so that a dashboard's series
// do not vanish; a ledger that cannot be read reports nothing rather than zeros.
func TestJobsByStatus(t *testing.T) {
	t.Parallel()
	var want strings.Builder
	want.WriteString("# HELP groundwork_jobs Jobs in the ledger by status.\n# TYPE groundwork_jobs gauge\n")
	for _, s := range job.Statuses {
		n := 0
		if s == job.StatusRunning {
			n = 3
		}
		fmt.Fprintf(&want, "groundwork_jobs{status=%q} %d\n", s, n)
	}
	c := metrics.JobsByStatus(ledger{counts: map[job.Status]int{job.StatusRunning: 3}})
	if err := testutil.CollectAndCompare(c, strings.NewReader(want.String()), "groundwork_jobs"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(metrics.JobsByStatus(ledger{err: errors.New("down")})); n != 0 {
		t.Fatalf("%d series from a ledger that cannot be read, want 0", n)
	}
}

func TestQueueLag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		due      time.Time
		min, max float64
	}{
		{"no due job", time.Time{}, 0, 0},
		{"due a minute ago", time.Now().Add(-time.Minute), 60, 120},
		{"due in the future", time.Now().Add(time.Hour), 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if lag := testutil.ToFloat64(metrics.QueueLag(ledger{due: tc.due})); lag < tc.min || lag > tc.max {
				t.Fatalf("lag %v, want %v..%v", lag, tc.min, tc.max)
			}
		})
	}
}
