package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/jobs"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/store/sqlstore"
)

// fakeInspector reports drift, the same on every call, and counts its calls.
type fakeInspector struct {
	drift []job.Drift
	err   error
	calls atomic.Int64
}

func (f *fakeInspector) Inspect(ctx context.Context, j *job.Job) ([]job.Drift, error) {
	f.calls.Add(1)
	return f.drift, f.err
}

// inspections is the service over st with in as the inspector of the test family (and no
// other family).
func inspections(t *testing.T, st *sqlstore.Store, in jobs.Inspector, now func() time.Time) *jobs.Inspections {
	t.Helper()
	reg, err := pipeline.NewRegistry(&testfamily.Pipeline{N: 2})
	if err != nil {
		t.Fatal(err)
	}
	svc := &jobs.Service{Store: st, Pipelines: reg, Now: now}
	return &jobs.Inspections{Jobs: svc, Ledger: st, Inspectors: func(ctx context.Context, j *job.Job) (jobs.Inspector, bool, error) {
		return in, j.Family == testfamily.Family, nil
	}}
}

var sgDrift = job.Drift{Resource: job.ResourceRef{Type: "security-group", ID: "sg-1"}, Field: "ingress",
	Applied: []string{"tcp 80 from 0.0.0.0/0"}, Actual: []string{"tcp 22 from 0.0.0.0/0", "tcp 80 from 0.0.0.0/0"}, Step: "step2"}

func TestInspect(t *testing.T) {
	t.Parallel()
	st := world(t)
	clock := func() time.Time { return t0.Add(time.Hour) }
	in := &fakeInspector{drift: []job.Drift{sgDrift}}
	svc := inspections(t, st, in, clock)
	c := jobs.Caller{OrgID: "org_a", Actor: "dev@example.com"}
	ctx := t.Context()

	tests := map[string]struct {
		seed   func(j *job.Job)
		org    string
		reason jobs.Reason
		err    error
		msg    string
	}{
		"a completed job is inspected":    {seed: done},
		"a running job is refused":        {seed: func(j *job.Job) { j.Status = job.StatusRunning }, reason: jobs.Conflict},
		"a family without an inspector":   {seed: func(j *job.Job) { done(j); j.Family = job.FamilyNetwork }, reason: jobs.Invalid, msg: "inspection is not supported for network on local"},
		"another org's job is not found":  {seed: done, org: "org_b", err: store.ErrNotFound},
		"a remediation is not a job here": {seed: func(j *job.Job) { done(j); j.Kind = job.KindRemediation }, err: store.ErrNotFound},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			j := seed(t, st, "job_"+name, tc.seed)
			caller := c
			if tc.org != "" {
				caller.OrgID = tc.org
			}
			got, err := svc.Inspect(ctx, caller, j.ID)
			var rf *jobs.Refusal
			switch {
			case tc.err != nil:
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			case tc.reason != 0 || tc.msg != "":
				if !errors.As(err, &rf) || rf.Reason != tc.reason || (tc.msg != "" && (rf.Detail != tc.msg || len(rf.Fields) != 1 || rf.Fields[0].Message != tc.msg)) {
					t.Fatalf("err = %#v, want reason %d %q", err, tc.reason, tc.msg)
				}
				if _, err := svc.Latest(ctx, "org_a", j.ID); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("a refused inspection was recorded: %v", err)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if len(got.Drift) != 1 || !got.InspectedAt.Equal(clock()) {
				t.Fatalf("inspection = %+v", got)
			}
			last, err := svc.Latest(ctx, "org_a", j.ID)
			if err != nil || len(last.Drift) != 1 || last.Drift[0].Field != "ingress" {
				t.Fatalf("latest = %+v, %v", last, err)
			}
			if _, err := svc.Latest(ctx, "org_b", j.ID); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("another org reads the drift: %v", err)
			}
			entries, _, err := st.ListAudit(ctx, &store.AuditFilter{OrgID: "org_a", Action: "provisioning-job.inspect", ResourceID: j.ID})
			if err != nil || len(entries) != 1 || entries[0].Actor != "dev@example.com" {
				t.Fatalf("audit = %+v, %v", entries, err)
			}
			var meta struct{ DriftCount int }
			if err := json.Unmarshal(entries[0].Metadata, &meta); err != nil || meta.DriftCount != 1 {
				t.Fatalf("audit metadata %s: %v", entries[0].Metadata, err)
			}
		})
	}
}

func TestInspectCloudErrorRecordsNothing(t *testing.T) {
	t.Parallel()
	st := world(t)
	boom := errors.New("cloud unreachable")
	svc := inspections(t, st, &fakeInspector{err: boom}, func() time.Time { return t0 })
	j := seed(t, st, "job_err", done)
	if _, err := svc.Inspect(t.Context(), jobs.Caller{OrgID: "org_a", Actor: "x"}, j.ID); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the cloud's", err)
	}
	if _, err := svc.Latest(t.Context(), "org_a", j.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a failed inspection was recorded: %v", err)
	}
}

func TestReconcile(t *testing.T) {
	t.Parallel()
	st := world(t)
	ctx := t.Context()
	c := jobs.Caller{OrgID: "org_a", Actor: "dev@example.com"}
	now := func() time.Time { return t0.Add(time.Hour) }
	drifted := inspections(t, st, &fakeInspector{drift: []job.Drift{sgDrift, sgDrift}}, now)
	clean := inspections(t, st, &fakeInspector{}, now)

	j := seed(t, st, "job_never", done)
	var rf *jobs.Refusal
	if _, err := drifted.Reconcile(ctx, c, j.ID); !errors.As(err, &rf) || rf.Reason != jobs.Conflict {
		t.Fatalf("reconcile before inspect: %v", err)
	}
	if _, err := clean.Inspect(ctx, c, j.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := clean.Reconcile(ctx, c, j.ID); !errors.As(err, &rf) || rf.Reason != jobs.Conflict {
		t.Fatalf("reconcile with no drift: %v", err)
	}
	if _, err := drifted.Reconcile(ctx, jobs.Caller{OrgID: "org_b", Actor: "x"}, j.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another org reconciles: %v", err)
	}

	if _, err := drifted.Inspect(ctx, c, j.ID); err != nil {
		t.Fatal(err)
	}
	before, _ := drifted.Jobs.Get(ctx, "org_a", j.ID)
	out, err := drifted.Reconcile(ctx, c, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Only the step that owns the drifted resource runs again; the config is as it was.
	if out.Status != job.StatusQueued || out.Steps[0].Status != job.StepDone || out.Steps[1].Status != job.StepPending ||
		string(out.Config) != string(before.Config) || out.Version != before.Version+1 || !out.NextRunAt.Equal(now()) {
		t.Fatalf("reconciled job = %+v", out)
	}
	entries, _, err := st.ListAudit(ctx, &store.AuditFilter{OrgID: "org_a", Action: "provisioning-job.reconcile", ResourceID: j.ID})
	if err != nil || len(entries) != 1 {
		t.Fatalf("audit = %+v, %v", entries, err)
	}
	// A queued job is not reconciled again until it completes.
	if _, err := drifted.Reconcile(ctx, c, j.ID); !errors.As(err, &rf) || rf.Reason != jobs.Conflict {
		t.Fatalf("reconcile of a queued job: %v", err)
	}
}

func TestInspectDueOncePerIntervalAcrossReplicas(t *testing.T) {
	t.Parallel()
	st := world(t)
	ctx := t.Context()
	if err := st.CreateSpace(ctx, &store.Space{ID: "spc_sched", OrgID: "org_a", Name: "sched", Provider: "local", Region: "local",
		SpaceType: "kubernetes", Status: "ready", Config: json.RawMessage(`{"inspectIntervalMinutes":10}`), CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"job_s1", "job_s2", "job_s3"} {
		seed(t, st, id, func(j *job.Job) { done(j); j.SpaceID = "spc_sched" })
	}
	seed(t, st, "job_s_running", func(j *job.Job) { j.SpaceID = "spc_sched"; j.Status = job.StatusRunning })
	seed(t, st, "job_off", done) // spc_a has no interval

	var clock atomic.Int64
	clock.Store(t0.UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	in := &fakeInspector{drift: []job.Drift{sgDrift}}
	replicas := []*jobs.Inspections{inspections(t, st, in, now), inspections(t, st, in, now), inspections(t, st, in, now)}
	round := func() int64 {
		t.Helper()
		before := in.calls.Load()
		var wg sync.WaitGroup
		for _, r := range replicas {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := r.InspectDue(ctx, st); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		return in.calls.Load() - before
	}
	if n := round(); n != 3 {
		t.Fatalf("first round inspected %d times, want 3 (each completed job of the space once)", n)
	}
	clock.Add(int64(5 * time.Minute))
	if n := round(); n != 0 {
		t.Fatalf("inspected %d times before the interval passed", n)
	}
	clock.Add(int64(5 * time.Minute))
	if n := round(); n != 3 {
		t.Fatalf("second interval inspected %d times, want 3", n)
	}
	last, err := replicas[0].Latest(ctx, "org_a", "job_s1")
	if err != nil || !last.InspectedAt.Equal(now()) {
		t.Fatalf("latest = %+v, %v", last, err)
	}
	entries, _, err := st.ListAudit(ctx, &store.AuditFilter{OrgID: "org_a", Action: "provisioning-job.inspect", Actor: jobs.ScheduleActor})
	if err != nil || len(entries) != 6 {
		t.Fatalf("%d scheduled audit entries, want 6: %v", len(entries), err)
	}
}

func TestInspectIntervalSetting(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		config string
		every  time.Duration
		bad    bool
	}{
		"absent":     {config: `{}`},
		"off":        {config: `{"inspectIntervalMinutes":0}`},
		"ten":        {config: `{"inspectIntervalMinutes":10}`, every: 10 * time.Minute},
		"negative":   {config: `{"inspectIntervalMinutes":-1}`, bad: true},
		"fraction":   {config: `{"inspectIntervalMinutes":1.5}`, bad: true},
		"text":       {config: `{"inspectIntervalMinutes":"10"}`, bad: true},
		"over limit": {config: `{"inspectIntervalMinutes":10081}`, bad: true, every: 10081 * time.Minute},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := jobs.CheckInspectInterval(json.RawMessage(tc.config))
			var rf *jobs.Refusal
			if tc.bad != (err != nil) || (err != nil && (!errors.As(err, &rf) || rf.Fields[0].Field != "config.inspectIntervalMinutes")) {
				t.Fatalf("check = %v, want refused %v", err, tc.bad)
			}
			if got := jobs.InspectInterval(&store.Space{Config: json.RawMessage(tc.config)}); got != tc.every {
				t.Fatalf("interval = %v, want %v", got, tc.every)
			}
		})
	}
}
