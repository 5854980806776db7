// Package storetest is the conformance suite every store.Store implementation passes. Each
// implementation's test calls Run with a constructor that returns a fresh, empty store.
package storetest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/groundworkhq/groundwork/internal/audit"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/store"
)

// NewStore returns an empty store for one test.
type NewStore func(t *testing.T) store.Store

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func newJob(org, space string, status job.Status, next time.Time) *job.Job {
	return &job.Job{
		ID: "job_" + ulid.Make().String(), OrgID: org, SpaceID: space, Kind: job.KindProvisioning,
		Family: job.FamilyDatastore, Provider: "local", Mode: job.ModeCreate,
		Config: json.RawMessage(`{"engine":"postgres"}`), Infra: json.RawMessage(`{}`),
		Steps:  []job.StepRecord{{Name: "a", Status: job.StepPending}, {Name: "b", Status: job.StepPending}},
		Status: status, Phase: job.PhaseApply, LeaseTTL: time.Minute, NextRunAt: next,
	}
}

func mustCreate(t *testing.T, s store.Store, j *job.Job) *job.Job {
	t.Helper()
	out, err := s.CreateJob(context.Background(), &store.CreateJobParams{Job: j, Now: t0})
	if err != nil {
		t.Fatalf("CreateJob: %v", err)
	}
	return out
}

// Run runs the whole suite.
func Run(t *testing.T, newStore NewStore) {
	tests := map[string]func(t *testing.T, s store.Store){
		"CreateGetRoundTrip":       testCreateGet,
		"OrgIsolation":             testOrgIsolation,
		"ListFiltersAndCursor":     testList,
		"UpdateOptimistic":         testUpdate,
		"ClaimOnlyDue":             testClaimDue,
		"ClaimExpiredLease":        testClaimExpired,
		"ClaimBatchLimit":          testClaimLimit,
		"ConcurrentClaimsDisjoint": testConcurrentClaims,
		"CheckpointFencing":        testCheckpointFencing,
		"ConcurrentCheckpoints":    testConcurrentCheckpoints,
		"PruneOnlyJobsThatAreOver": testPrune,
		"CheckpointThenEnd":        testCheckpointThenEnd,
		"RenewLease":               testRenew,
		"UpdateDoesNotTouchLease":  testUpdateKeepsLease,
		"SpacesAndAccounts":        testSpaces,
		"WakeupOnQueue":            testWakeup,
		"CountJobs":                testCount,
		"ClaimUsesDatabaseClock":   testClaimDatabaseClock,
		"LeaseReportsDBClock":      testLeaseDatabaseClock,
		"SecretOwners":             testSecretOwners,
		"EndedJobOwners":           testEndedJobOwners,
		"OldestDue":                testOldestDue,
		"RemediationTimeline":      testRemediationTimeline,
		"Inspections":              testInspections,
		"JobRevisions":             testJobRevisions,
	}
	for name, fn := range accessTests {
		tests[name] = fn
	}
	for name, fn := range datastoreTests {
		tests[name] = fn
	}
	for name, fn := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, newStore(t))
		})
	}
}

func testCreateGet(t *testing.T, s store.Store) {
	ctx := context.Background()
	in := newJob("org1", "spc1", job.StatusQueued, t0)
	in.Tags = map[string]string{"team": "payments"}
	in.Name = "db"
	created := mustCreate(t, s, in)
	if created.Version != 1 || !created.CreatedAt.Equal(t0) {
		t.Fatalf("created = version %d at %v", created.Version, created.CreatedAt)
	}
	got, err := s.GetJob(ctx, &store.GetJobParams{OrgID: "org1", ID: in.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got.Family != job.FamilyDatastore || got.Status != job.StatusQueued || got.Tags["team"] != "payments" ||
		len(got.Steps) != 2 || got.Steps[1].Name != "b" || got.LeaseTTL != time.Minute || !got.NextRunAt.Equal(t0) {
		t.Fatalf("round trip lost data: %+v", got)
	}
	var cfg map[string]string
	if err := json.Unmarshal(got.Config, &cfg); err != nil || cfg["engine"] != "postgres" {
		t.Fatalf("config = %s (%v)", got.Config, err)
	}
	if _, err := s.GetJob(ctx, &store.GetJobParams{OrgID: "org1", ID: "job_missing"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing job: %v", err)
	}
}

func testOrgIsolation(t *testing.T, s store.Store) {
	ctx := context.Background()
	j := mustCreate(t, s, newJob("org1", "spc1", job.StatusQueued, t0))
	if _, err := s.GetJob(ctx, &store.GetJobParams{OrgID: "org2", ID: j.ID}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other org sees job: %v", err)
	}
	page, err := s.ListJobs(ctx, &store.ListJobsParams{OrgID: "org2"})
	if err != nil || len(page.Jobs) != 0 {
		t.Fatalf("other org lists %d jobs (%v)", len(page.Jobs), err)
	}
	name := "x"
	if _, err := s.UpdateJob(ctx, &store.UpdateJobParams{OrgID: "org2", ID: j.ID, Version: j.Version, Name: &name, Now: t0}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other org updates job: %v", err)
	}
}

func testList(t *testing.T, s store.Store) {
	ctx := context.Background()
	var ids []string
	for i := 0; i < 7; i++ {
		st := job.StatusQueued
		if i%2 == 1 {
			st = job.StatusDraft
		}
		sp := "spc1"
		if i == 6 {
			sp = "spc2"
		}
		ids = append(ids, mustCreate(t, s, newJob("org1", sp, st, t0)).ID)
	}
	seen := map[string]bool{}
	after := ""
	pages := 0
	for {
		page, err := s.ListJobs(ctx, &store.ListJobsParams{OrgID: "org1", Limit: 3, After: after})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, j := range page.Jobs {
			if seen[j.ID] {
				t.Fatalf("job %s on two pages", j.ID)
			}
			seen[j.ID] = true
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	if len(seen) != 7 || pages != 3 {
		t.Fatalf("paged %d jobs in %d pages, want 7 in 3", len(seen), pages)
	}
	drafts, _ := s.ListJobs(ctx, &store.ListJobsParams{OrgID: "org1", Status: job.StatusDraft})
	if len(drafts.Jobs) != 3 {
		t.Fatalf("status filter: %d drafts, want 3", len(drafts.Jobs))
	}
	sp2, _ := s.ListJobs(ctx, &store.ListJobsParams{OrgID: "org1", SpaceID: "spc2"})
	if len(sp2.Jobs) != 1 || sp2.Jobs[0].ID != ids[6] {
		t.Fatalf("space filter: %v", sp2.Jobs)
	}
	kinds, _ := s.ListJobs(ctx, &store.ListJobsParams{OrgID: "org1", Family: job.FamilyNetwork})
	if len(kinds.Jobs) != 0 {
		t.Fatalf("family filter: %d network jobs", len(kinds.Jobs))
	}
}

func testUpdate(t *testing.T, s store.Store) {
	ctx := context.Background()
	j := mustCreate(t, s, newJob("org1", "spc1", job.StatusDraft, t0))
	name := "renamed"
	queued := job.StatusQueued
	up, err := s.UpdateJob(ctx, &store.UpdateJobParams{OrgID: "org1", ID: j.ID, Version: j.Version, Name: &name,
		Status: &queued, Tags: map[string]string{"a": "b"}, Now: t0.Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if up.Version != j.Version+1 || up.Name != "renamed" || up.Status != job.StatusQueued || up.Tags["a"] != "b" ||
		!up.UpdatedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("update: %+v", up)
	}
	if _, err := s.UpdateJob(ctx, &store.UpdateJobParams{OrgID: "org1", ID: j.ID, Version: j.Version, Name: &name, Now: t0}); !errors.Is(err, store.ErrVersionConflict) {
		t.Fatalf("stale version: %v", err)
	}
	f := &job.Failure{Class: job.ClassSystem, Message: "x"}
	up2, err := s.UpdateJob(ctx, &store.UpdateJobParams{OrgID: "org1", ID: j.ID, Version: up.Version, Failure: f, Now: t0})
	if err != nil || up2.Failure == nil || up2.Failure.Message != "x" {
		t.Fatalf("set failure: %v %+v", err, up2)
	}
	up3, err := s.UpdateJob(ctx, &store.UpdateJobParams{OrgID: "org1", ID: j.ID, Version: up2.Version, ClearFailure: true, Now: t0})
	if err != nil || up3.Failure != nil {
		t.Fatalf("clear failure: %v %+v", err, up3)
	}
}

func testClaimDue(t *testing.T, s store.Store) {
	ctx := context.Background()
	due := mustCreate(t, s, newJob("org1", "spc1", job.StatusQueued, t0))
	mustCreate(t, s, newJob("org1", "spc1", job.StatusQueued, t0.Add(time.Hour)))
	mustCreate(t, s, newJob("org1", "spc1", job.StatusDraft, t0))
	mustCreate(t, s, newJob("org1", "spc1", job.StatusFailed, t0))
	got, err := s.ClaimJobs(ctx, &store.ClaimJobsParams{Owner: "w1", Now: t0, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != due.ID {
		t.Fatalf("claimed %d jobs, want only the due one", len(got))
	}
	c := got[0]
	if c.Status != job.StatusRunning || c.LeaseOwner != "w1" || c.LeaseToken != 1 || c.LeaseExpiresAt == nil ||
		!c.LeaseExpiresAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("claimed job lease: %+v", c)
	}
	again := claim(t, s, store.ClaimJobsParams{Owner: "w2", Now: t0.Add(30 * time.Second), Limit: 10})
	if len(again) != 0 {
		t.Fatalf("a held lease was claimed again")
	}
}

func testClaimExpired(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreate(t, s, newJob("org1", "spc1", job.StatusQueued, t0))
	first := claim(t, s, store.ClaimJobsParams{Owner: "w1", Now: t0, Limit: 1})
	if len(first) != 1 {
		t.Fatal("no claim")
	}
	second, err := s.ClaimJobs(ctx, &store.ClaimJobsParams{Owner: "w2", Now: t0.Add(61 * time.Second), Limit: 1})
	if err != nil || len(second) != 1 {
		t.Fatalf("expired lease not reclaimed: %v", err)
	}
	if second[0].LeaseToken <= first[0].LeaseToken || second[0].LeaseOwner != "w2" {
		t.Fatalf("fencing token not bumped: %d -> %d", first[0].LeaseToken, second[0].LeaseToken)
	}
	// The engine counts on this to know that the first holder may have acted on its step.
	if first[0].TakenOver || !second[0].TakenOver {
		t.Fatalf("taken over: first claim %v, second %v; want false, true", first[0].TakenOver, second[0].TakenOver)
	}
	// Released and claimed again, the job is handed over, not taken over.
	if _, err := s.Checkpoint(ctx, &store.CheckpointParams{ID: second[0].ID, LeaseToken: second[0].LeaseToken, Now: t0.Add(62 * time.Second),
		Steps: second[0].Steps, Infra: second[0].Infra, Status: job.StatusQueued, Phase: job.PhaseApply, NextRunAt: t0.Add(62 * time.Second), Release: true}); err != nil {
		t.Fatal(err)
	}
	third := claim(t, s, store.ClaimJobsParams{Owner: "w3", Now: t0.Add(63 * time.Second), Limit: 1})
	if len(third) != 1 || third[0].TakenOver {
		t.Fatalf("a released job's claim: %+v", third)
	}
}

func testClaimLimit(t *testing.T, s store.Store) {
	for i := 0; i < 5; i++ {
		mustCreate(t, s, newJob("org1", "spc1", job.StatusQueued, t0.Add(-time.Duration(i)*time.Second)))
	}
	got := claim(t, s, store.ClaimJobsParams{Owner: "w", Now: t0, Limit: 3})
	if len(got) != 3 {
		t.Fatalf("claimed %d, want 3", len(got))
	}
	rest := claim(t, s, store.ClaimJobsParams{Owner: "w", Now: t0, Limit: 10})
	if len(rest) != 2 {
		t.Fatalf("claimed %d more, want 2", len(rest))
	}
}

func testConcurrentClaims(t *testing.T, s store.Store) {
	ctx := context.Background()
	const n = 60
	for i := 0; i < n; i++ {
		mustCreate(t, s, newJob("org1", "spc1", job.StatusQueued, t0))
	}
	var mu sync.Mutex
	owners := map[string]string{}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			owner := fmt.Sprintf("w%d", w)
			for {
				got, err := s.ClaimJobs(ctx, &store.ClaimJobsParams{Owner: owner, Now: t0, Limit: 4})
				if err != nil {
					errs <- err
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, j := range got {
					if prev, dup := owners[j.ID]; dup {
						errs <- fmt.Errorf("job %s claimed by %s and %s", j.ID, prev, owner)
					}
					owners[j.ID] = owner
				}
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(owners) != n {
		t.Fatalf("claimed %d of %d jobs", len(owners), n)
	}
}

func testCheckpointFencing(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreate(t, s, newJob("org1", "spc1", job.StatusQueued, t0))
	old := claim(t, s, store.ClaimJobsParams{Owner: "w1", Now: t0, Limit: 1})
	cur := claim(t, s, store.ClaimJobsParams{Owner: "w2", Now: t0.Add(2 * time.Minute), Limit: 1})
	if len(old) != 1 || len(cur) != 1 {
		t.Fatal("setup claims failed")
	}
	steps := []job.StepRecord{{Name: "a", Status: job.StepDone, Attempts: 1}, {Name: "b", Status: job.StepPending}}
	_, err := s.Checkpoint(ctx, &store.CheckpointParams{ID: old[0].ID, LeaseToken: old[0].LeaseToken, Now: t0.Add(3 * time.Minute),
		Steps: steps, Infra: json.RawMessage(`{"stale":true}`), Status: job.StatusRunning, Phase: job.PhaseApply})
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("stale token checkpoint: %v", err)
	}
	now := t0.Add(3 * time.Minute)
	got, err := s.Checkpoint(ctx, &store.CheckpointParams{ID: cur[0].ID, LeaseToken: cur[0].LeaseToken, Now: now,
		Steps: steps, Infra: json.RawMessage(`{"vpc":"v-1"}`), Status: job.StatusRunning, Phase: job.PhaseApply})
	if err != nil {
		t.Fatal(err)
	}
	if got.Steps[0].Status != job.StepDone || string(got.Infra) == `{"stale":true}` || !got.LeaseExpiresAt.Equal(now.Add(time.Minute)) {
		t.Fatalf("checkpoint: %+v", got)
	}
	// The answer is the row as written (the store may fill the written columns from the
	// request rather than read them back) and shares nothing the caller may change.
	read, err := s.GetJob(ctx, &store.GetJobParams{OrgID: "org1", ID: cur[0].ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Steps) != len(read.Steps) || got.Steps[1] != read.Steps[1] || got.Steps[0].Name != read.Steps[0].Name ||
		got.Version != read.Version || got.Failure != nil || read.Failure != nil {
		t.Fatalf("checkpoint answered %+v, the row reads %+v", got, read)
	}
	var gotInfra, readInfra map[string]any
	if err := json.Unmarshal(got.Infra, &gotInfra); err != nil || json.Unmarshal(read.Infra, &readInfra) != nil ||
		gotInfra["vpc"] != "v-1" || readInfra["vpc"] != "v-1" {
		t.Fatalf("infra answered %s, the row reads %s", got.Infra, read.Infra)
	}
	got.Steps[0].Name = "changed by the caller"
	if steps[0].Name != "a" {
		t.Fatal("the checkpoint's answer shares its steps with the request")
	}
	later := now.Add(time.Minute)
	rel, err := s.Checkpoint(ctx, &store.CheckpointParams{ID: cur[0].ID, LeaseToken: cur[0].LeaseToken, Now: now,
		Steps: steps, Infra: got.Infra, Status: job.StatusQueued, Phase: job.PhaseApply, NextRunAt: later, Release: true})
	if err != nil || rel.LeaseOwner != "" || rel.LeaseExpiresAt != nil || rel.Status != job.StatusQueued {
		t.Fatalf("release: %v %+v", err, rel)
	}
	if none := claim(t, s, store.ClaimJobsParams{Owner: "w3", Now: now, Limit: 1}); len(none) != 0 {
		t.Fatal("a waiting job was claimed before its next run")
	}
	if due := claim(t, s, store.ClaimJobsParams{Owner: "w3", Now: later, Limit: 1}); len(due) != 1 {
		t.Fatal("a waiting job was not claimed when due")
	}
	if _, err := s.Checkpoint(ctx, &store.CheckpointParams{ID: cur[0].ID, LeaseToken: cur[0].LeaseToken, Now: later,
		Steps: steps, Status: job.StatusCompleted, Phase: job.PhaseApply}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("released token still writes: %v", err)
	}
}

// testConcurrentCheckpoints writes many checkpoints at once, as the engine's workers do, so
// that the store may group them into one commit: each must still be fenced by its own lease
// token, a stale one failing alone while the others commit, a job's end with its audit entry.
func testConcurrentCheckpoints(t *testing.T, s store.Store) {
	ctx := context.Background()
	const n, stolen = 40, 10
	for i := 0; i < n; i++ {
		mustCreate(t, s, newJob("org1", "spc1", job.StatusQueued, t0))
	}
	held := claim(t, s, store.ClaimJobsParams{Owner: "w1", Now: t0, Limit: n})
	taken := claim(t, s, store.ClaimJobsParams{Owner: "w2", Now: t0.Add(2 * time.Minute), Limit: stolen})
	if len(held) != n || len(taken) != stolen {
		t.Fatalf("setup claims: %d, %d", len(held), len(taken))
	}
	// The version each stolen job has under w2's claim: any write w1 landed would move it.
	takenAt := map[string]int64{}
	for _, j := range taken {
		takenAt[j.ID] = j.Version
	}
	now := t0.Add(3 * time.Minute)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, j := range held {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, failure, infra := concurrentCheckpoint(i)
			steps := []job.StepRecord{{Name: "a", Status: job.StepDone, Attempts: 1}, {Name: "b", Status: job.StepDone, Attempts: 1}}
			_, errs[i] = s.Checkpoint(ctx, &store.CheckpointParams{ID: j.ID, LeaseToken: j.LeaseToken, Now: now, Steps: steps,
				Infra: infra, Failure: failure, Status: st, Phase: job.PhaseApply, Release: st != job.StatusRunning})
		}()
	}
	wg.Wait()
	for i, j := range held {
		got, err := s.GetJob(ctx, &store.GetJobParams{ID: j.ID})
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := takenAt[j.ID]; ok {
			if !errors.Is(errs[i], store.ErrLeaseLost) {
				t.Errorf("checkpoint under a taken-over lease: %v", errs[i])
			}
			if got.LeaseOwner != "w2" || got.Status != job.StatusRunning || got.Version != v || got.Failure != nil {
				t.Errorf("a stale checkpoint changed the job: %+v", got)
			}
			continue
		}
		want, failure, infra := concurrentCheckpoint(i)
		if errs[i] != nil || got.Status != want || got.Steps[1].Status != job.StepDone {
			t.Errorf("checkpoint %d: %v, status %s", i, errs[i], got.Status)
		}
		if len(infra) == 0 {
			infra = json.RawMessage(`{}`)
		}
		if !jsonEqual(got.Infra, infra) || !reflect.DeepEqual(got.Failure, failure) {
			t.Errorf("checkpoint %d: infra %s, failure %+v; want %s, %+v", i, got.Infra, got.Failure, infra, failure)
		}
		_, audited, err := s.ListAudit(ctx, &audit.Filter{OrgID: "org1", Action: "provisioning-job.completed", ResourceID: j.ID})
		if err != nil {
			t.Fatal(err)
		}
		if wantAudit := map[bool]int{true: 1, false: 0}[want == job.StatusCompleted]; audited != wantAudit {
			t.Errorf("job %d: %d completion audit entries, want %d", i, audited, wantAudit)
		}
	}
}

// jsonEqual reports whether two JSON documents hold the same value (PostgreSQL's jsonb
// respaces what it stores).
func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// concurrentCheckpoint is what testConcurrentCheckpoints writes for job i: progress, an end,
// a failure, or progress with no infra (stored as an empty object).
func concurrentCheckpoint(i int) (job.Status, *job.Failure, json.RawMessage) {
	switch i % 4 {
	case 0:
		return job.StatusCompleted, nil, json.RawMessage(`{"by":"w1"}`)
	case 1:
		return job.StatusFailed, &job.Failure{Class: job.ClassUserAction, Code: "QuotaExceeded", Message: "quota", Step: "b"},
			json.RawMessage(`{"by":"w1"}`)
	case 2:
		return job.StatusRunning, nil, json.RawMessage(`{"by":"w1"}`)
	default:
		return job.StatusRunning, nil, nil
	}
}

// testPrune removes old cancelled and deleted jobs and nothing else: not a recent one, and
// never a completed, failed, queued or running job, however old.
func testPrune(t *testing.T, s store.Store) {
	ctx := context.Background()
	pr, ok := s.(store.Pruner)
	if !ok {
		t.Fatal("the store cannot prune")
	}
	old, recent := t0, t0.Add(48*time.Hour)
	ids := map[job.Status][2]string{}
	for _, st := range []job.Status{job.StatusCancelled, job.StatusDeleted, job.StatusCompleted, job.StatusFailed, job.StatusQueued} {
		var pair [2]string
		for k, at := range []time.Time{old, recent} {
			j := newJob("org1", "spc1", st, at)
			if _, err := s.CreateJob(ctx, &store.CreateJobParams{Job: j, Now: at}); err != nil {
				t.Fatal(err)
			}
			pair[k] = j.ID
		}
		ids[st] = pair
	}
	// Revisions and an inspection of an old deleted job and of an old completed one: the
	// first go with their job, the second stay.
	revs, _ := s.(store.JobRevisions)
	ins, _ := s.(store.Inspections)
	if revs == nil || ins == nil {
		t.Fatal("the store keeps no revisions or inspections")
	}
	for _, st := range []job.Status{job.StatusDeleted, job.StatusCompleted} {
		id := ids[st][0]
		if err := revs.AddRevision(ctx, store.JobRevision{OrgID: "org1", JobID: id, Number: 1, Config: []byte(`{}`), Infra: []byte(`{}`),
			Status: store.RevisionApplied, Reason: "create", CreatedAt: old}); err != nil {
			t.Fatal(err)
		}
		if err := ins.RecordInspection(ctx, &job.Inspection{JobID: id, OrgID: "org1", SpaceID: "spc1", InspectedAt: old}); err != nil {
			t.Fatal(err)
		}
	}
	mustCreate(t, s, newJob("org1", "spc1", job.StatusQueued, old))
	running := claim(t, s, store.ClaimJobsParams{Owner: "w1", Now: old, Limit: 1})
	if len(running) != 1 {
		t.Fatal("setup claim failed")
	}
	// Limit 1 twice, then once more to find nothing left: the limit bounds each call.
	for i, want := range []int{1, 1, 0} {
		n, err := pr.PruneJobs(ctx, &store.PruneJobsParams{Before: t0.Add(time.Hour), Limit: 1})
		if err != nil || n != want {
			t.Fatalf("prune call %d: %d, %v (want %d)", i, n, err, want)
		}
	}
	gone := func(id string) bool {
		_, err := s.GetJob(ctx, &store.GetJobParams{ID: id})
		return errors.Is(err, store.ErrNotFound)
	}
	for st, pair := range ids {
		over := st == job.StatusCancelled || st == job.StatusDeleted
		if gone(pair[0]) != over {
			t.Errorf("old %s job: pruned %v, want %v", st, gone(pair[0]), over)
		}
		if gone(pair[1]) {
			t.Errorf("recent %s job was pruned", st)
		}
	}
	if gone(running[0].ID) {
		t.Error("a running job was pruned")
	}
	for st, want := range map[job.Status]int{job.StatusDeleted: 0, job.StatusCompleted: 1} {
		id := ids[st][0]
		if got, err := revs.ListRevisions(ctx, "org1", id); err != nil || len(got) != want {
			t.Errorf("revisions of the old %s job after pruning: %d, %v; want %d", st, len(got), err, want)
		}
		_, err := ins.GetInspection(ctx, "org1", id)
		if kept := err == nil; kept != (want == 1) {
			t.Errorf("inspection of the old %s job after pruning: kept %v (%v)", st, kept, err)
		}
	}
}

// testCheckpointThenEnd writes a job's last result and its end together: both land with the
// end's audit entry; a requested cancel stops the end (the result still lands); a stale lease
// stops both. Several pairs at once exercise the group commit.
func testCheckpointThenEnd(t *testing.T, s store.Store) {
	ctx := context.Background()
	f, ok := s.(store.Finisher)
	if !ok {
		t.Fatal("the store cannot write a result and an end together")
	}
	const n = 12
	for i := 0; i < n; i++ {
		mustCreate(t, s, newJob("org1", "spc1", job.StatusQueued, t0))
	}
	held := claim(t, s, store.ClaimJobsParams{Owner: "w1", Now: t0, Limit: n})
	if len(held) != n {
		t.Fatalf("claimed %d", len(held))
	}
	// Job 0 is cancelled meanwhile; job 1 is written with a stale token (as by a worker whose
	// lease was taken over).
	yes := true
	if _, err := s.UpdateJob(ctx, &store.UpdateJobParams{OrgID: "org1", ID: held[0].ID, Version: held[0].Version, Now: t0, CancelRequested: &yes}); err != nil {
		t.Fatal(err)
	}
	held[1].LeaseToken--
	now := t0.Add(30 * time.Second)
	steps := []job.StepRecord{{Name: "a", Status: job.StepDone, Attempts: 1}, {Name: "b", Status: job.StepDone, Attempts: 1}}
	type result struct {
		written, ended *job.Job
		err            error
	}
	res := make([]result, n)
	var wg sync.WaitGroup
	for i, j := range held {
		wg.Add(1)
		go func() {
			defer wg.Done()
			first := &store.CheckpointParams{ID: j.ID, LeaseToken: j.LeaseToken, Now: now, Steps: steps, Infra: json.RawMessage(`{}`),
				Status: job.StatusRunning, Phase: job.PhaseApply, NextRunAt: now}
			end := *first
			end.Status, end.Release = job.StatusCompleted, true
			res[i].written, res[i].ended, res[i].err = f.CheckpointThenEnd(ctx, first, &end)
		}()
	}
	wg.Wait()
	for i, j := range held {
		got, err := s.GetJob(ctx, &store.GetJobParams{ID: j.ID})
		if err != nil {
			t.Fatal(err)
		}
		_, audited, err := s.ListAudit(ctx, &audit.Filter{OrgID: "org1", Action: "provisioning-job.completed", ResourceID: j.ID})
		if err != nil {
			t.Fatal(err)
		}
		r := res[i]
		switch {
		case i == 0: // cancelled meanwhile: the result lands, the end does not
			if r.err != nil || r.written == nil || r.ended != nil || got.Status != job.StatusRunning || got.Steps[1].Status != job.StepDone || !got.CancelRequested || audited != 0 {
				t.Errorf("cancelled job: %v %+v %+v, audited %d", r.err, r.ended, got, audited)
			}
		case i == 1: // stale token: nothing lands
			if !errors.Is(r.err, store.ErrLeaseLost) || got.Status != job.StatusRunning || audited != 0 {
				t.Errorf("taken-over job: %v %+v, audited %d", r.err, got, audited)
			}
		default:
			if r.err != nil || r.written == nil || r.written.Status != job.StatusRunning || r.ended == nil ||
				got.Status != job.StatusCompleted || got.Version != r.written.Version+1 || audited != 1 {
				t.Errorf("job %d: %v, %+v, audited %d", i, r.err, got, audited)
			}
		}
	}
}

func testRenew(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreate(t, s, newJob("org1", "spc1", job.StatusQueued, t0))
	c := claim(t, s, store.ClaimJobsParams{Owner: "w1", Now: t0, Limit: 1})
	exp, err := s.RenewLease(ctx, &store.RenewLeaseParams{ID: c[0].ID, LeaseToken: c[0].LeaseToken, Now: t0.Add(50 * time.Second)})
	if err != nil || !exp.Equal(t0.Add(110*time.Second)) {
		t.Fatalf("renew: %v %v", exp, err)
	}
	if got := claim(t, s, store.ClaimJobsParams{Owner: "w2", Now: t0.Add(100 * time.Second), Limit: 1}); len(got) != 0 {
		t.Fatal("renewed lease was taken")
	}
	if _, err := s.RenewLease(ctx, &store.RenewLeaseParams{ID: c[0].ID, LeaseToken: c[0].LeaseToken + 7, Now: t0}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("renew with wrong token: %v", err)
	}
}

func testUpdateKeepsLease(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreate(t, s, newJob("org1", "spc1", job.StatusQueued, t0))
	c := claim(t, s, store.ClaimJobsParams{Owner: "w1", Now: t0, Limit: 1})
	yes := true
	up, err := s.UpdateJob(ctx, &store.UpdateJobParams{OrgID: "org1", ID: c[0].ID, Version: c[0].Version, CancelRequested: &yes, Now: t0})
	if err != nil || !up.CancelRequested || up.LeaseToken != c[0].LeaseToken || up.LeaseOwner != "w1" {
		t.Fatalf("cancel request: %v %+v", err, up)
	}
	cp, err := s.Checkpoint(ctx, &store.CheckpointParams{ID: c[0].ID, LeaseToken: c[0].LeaseToken, Now: t0,
		Steps: c[0].Steps, Status: job.StatusRunning, Phase: job.PhaseApply})
	if err != nil || !cp.CancelRequested {
		t.Fatalf("checkpoint lost the cancel request: %v %+v", err, cp)
	}
}

func testSpaces(t *testing.T, s store.Store) {
	ctx := context.Background()
	acc := &store.CloudAccount{ID: "acc_1", OrgID: "org1", Name: "prod", Provider: "aws", Region: "eu-west-1",
		AuthMethod: "default", PermissionLevel: "read_write", CreatedAt: t0}
	if err := s.CreateCloudAccount(ctx, acc); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetCloudAccount(ctx, "org1", "acc_1"); err != nil || got.Region != "eu-west-1" {
		t.Fatalf("get account: %v %+v", err, got)
	}
	if _, err := s.GetCloudAccount(ctx, "org2", "acc_1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other org account: %v", err)
	}
	sp := &store.Space{ID: "spc_1", OrgID: "org1", Name: "dev", Provider: "local", Region: "local",
		SpaceType: "kubernetes", Status: "ready", CreatedAt: t0}
	if err := s.CreateSpace(ctx, sp); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListSpaces(ctx, "org1")
	if err != nil || len(list) != 1 || list[0].Name != "dev" {
		t.Fatalf("list spaces: %v %v", err, list)
	}
	if other, _ := s.ListSpaces(ctx, "org2"); len(other) != 0 {
		t.Fatal("other org lists spaces")
	}
	j := mustCreate(t, s, newJob("org1", "spc_1", job.StatusQueued, t0))
	if err := s.DeleteSpace(ctx, "org1", "spc_1"); !errors.Is(err, store.ErrInUse) {
		t.Fatalf("delete space in use: %v", err)
	}
	cancelled := job.StatusCancelled
	if _, err := s.UpdateJob(ctx, &store.UpdateJobParams{OrgID: "org1", ID: j.ID, Version: j.Version, Status: &cancelled, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSpace(ctx, "org2", "spc_1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other org deletes space: %v", err)
	}
	if err := s.DeleteSpace(ctx, "org1", "spc_1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSpace(ctx, "org1", "spc_1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted space: %v", err)
	}
}

func testWakeup(t *testing.T, s store.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := s.Wakeups(ctx)
	mustCreate(t, s, newJob("org1", "spc1", job.StatusQueued, t0))
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("no wake-up after a queued job was created")
	}
}

func testCount(t *testing.T, s store.Store) {
	mustCreate(t, s, newJob("org1", "spc1", job.StatusQueued, t0))
	mustCreate(t, s, newJob("org1", "spc1", job.StatusQueued, t0))
	mustCreate(t, s, newJob("org1", "spc1", job.StatusDraft, t0))
	got, err := s.CountJobs(context.Background())
	if err != nil || got[job.StatusQueued] != 2 || got[job.StatusDraft] != 1 {
		t.Fatalf("count: %v %v", got, err)
	}
}

// WakeAcross checks that a job created through store a wakes a subscriber of store b (two
// replicas sharing one database).
func WakeAcross(t *testing.T, a, b store.Store) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := b.Wakeups(ctx)
	deadline := time.After(10 * time.Second)
	// The listener may still be connecting; keep creating until one notification lands.
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		mustCreate(t, a, newJob("org1", "spc1", job.StatusQueued, t0))
		select {
		case <-ch:
			return
		case <-tick.C:
		case <-deadline:
			t.Fatal("replica b never woke")
		}
	}
}

func claim(t *testing.T, s store.Store, p store.ClaimJobsParams) []*job.Job {
	t.Helper()
	got, err := s.ClaimJobs(context.Background(), &p)
	if err != nil {
		t.Fatalf("ClaimJobs: %v", err)
	}
	return got
}

// A replica whose clock runs two minutes fast never takes over a lease that is still live by
// the database's clock, however expired it looks by its own; once the database's clock passes
// the lease, it does.
func testClaimDatabaseClock(t *testing.T, s store.Store) {
	j := newJob("org1", "spc1", job.StatusQueued, time.Now())
	j.LeaseTTL = 500 * time.Millisecond
	mustCreate(t, s, j)
	held := claim(t, s, store.ClaimJobsParams{Owner: "w1", Now: time.Now(), Limit: 1})
	if len(held) != 1 {
		t.Fatal("no claim")
	}
	exp := *held[0].LeaseExpiresAt
	fast := func() time.Time { return time.Now().Add(2 * time.Minute) }
	tries := 0
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := claim(t, s, store.ClaimJobsParams{Owner: "fast", Now: fast(), Limit: 1})
		after := time.Now()
		tries++
		if len(got) == 1 {
			// The database compared in whole milliseconds at some instant before after; a claim
			// then means its clock had passed exp, so after must have too.
			if !after.After(exp) {
				t.Fatalf("claimed at %s, before the lease expired at %s by the database's clock",
					after.Format(time.StampMilli), exp.Format(time.StampMilli))
			}
			if got[0].LeaseToken <= held[0].LeaseToken || got[0].LeaseOwner != "fast" {
				t.Fatalf("take-over did not bump the fencing token: %d -> %d", held[0].LeaseToken, got[0].LeaseToken)
			}
			break
		}
		if after.After(deadline) {
			t.Fatalf("the fast replica never took over the expired lease (%d tries)", tries)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if tries < 2 {
		t.Fatal("the first claim already took the lease over; the test proved nothing")
	}
}

// Claims and lease-keeping checkpoints report the database's clock, read in the same
// statement: a replica whose clock lags writes a lease that is shorter by the database's clock
// than by its own, and DBNow is how its worker finds out.
func testLeaseDatabaseClock(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreate(t, s, newJob("org1", "spc1", job.StatusQueued, t0))
	before := time.Now().Truncate(time.Millisecond)
	slow := time.Now().Add(-2 * time.Minute)
	c := claim(t, s, store.ClaimJobsParams{Owner: "slow", Now: slow, Limit: 1})
	after := time.Now()
	if len(c) != 1 {
		t.Fatal("no claim")
	}
	if c[0].DBNow.Before(before) || c[0].DBNow.After(after) {
		t.Fatalf("claim DBNow = %s, want the database's clock between %s and %s", c[0].DBNow, before, after)
	}
	if left := c[0].LeaseExpiresAt.Sub(c[0].DBNow); left > -59*time.Second || left < -61*time.Second {
		t.Fatalf("a one-minute lease written two minutes slow has %s left by the database's clock, want about -1m", left)
	}
	// By the database's clock that lease is over, so a replica with a true clock takes it.
	cur := claim(t, s, store.ClaimJobsParams{Owner: "true", Now: time.Now(), Limit: 1})
	if len(cur) != 1 || cur[0].LeaseToken <= c[0].LeaseToken {
		t.Fatalf("a lease expired by the database's clock was not taken over: %d claims", len(cur))
	}
	before = time.Now().Truncate(time.Millisecond)
	cp, err := s.Checkpoint(ctx, &store.CheckpointParams{ID: cur[0].ID, LeaseToken: cur[0].LeaseToken, Now: time.Now(),
		Steps: cur[0].Steps, Status: job.StatusRunning, Phase: job.PhaseApply})
	if err != nil {
		t.Fatal(err)
	}
	if cp.DBNow.Before(before) || cp.DBNow.After(time.Now()) {
		t.Fatalf("checkpoint DBNow = %s, want the database's clock", cp.DBNow)
	}
	rel, err := s.Checkpoint(ctx, &store.CheckpointParams{ID: cur[0].ID, LeaseToken: cur[0].LeaseToken, Now: time.Now(),
		Steps: cur[0].Steps, Status: job.StatusQueued, Phase: job.PhaseApply, NextRunAt: t0, Release: true})
	if err != nil || !rel.DBNow.IsZero() {
		t.Fatalf("released job: %v, DBNow %s", err, rel.DBNow)
	}
}

// testOldestDue checks the queue-lag source: the earliest next_run_at among queued jobs that
// are due, and nothing when none is.
func testOldestDue(t *testing.T, s store.Store) {
	ctx := context.Background()
	q, ok := s.(interface {
		OldestDue(ctx context.Context, now time.Time) (time.Time, bool, error)
	})
	if !ok {
		t.Fatalf("store %T cannot say how long the queue waits", s)
	}
	if _, ok, err := q.OldestDue(ctx, t0); err != nil || ok {
		t.Fatalf("empty ledger: due=%v, %v", ok, err)
	}
	mustCreate(t, s, newJob("org1", "spc1", job.StatusQueued, t0.Add(time.Minute)))      // not due yet
	mustCreate(t, s, newJob("org1", "spc1", job.StatusRunning, t0.Add(-time.Hour)))      // not waiting
	mustCreate(t, s, newJob("org1", "spc1", job.StatusAwaitingUser, t0.Add(-time.Hour))) // waits on a person
	if _, ok, err := q.OldestDue(ctx, t0); err != nil || ok {
		t.Fatalf("nothing queued and due: due=%v, %v", ok, err)
	}
	mustCreate(t, s, newJob("org2", "spc1", job.StatusQueued, t0.Add(-30*time.Second)))
	mustCreate(t, s, newJob("org1", "spc1", job.StatusQueued, t0.Add(-10*time.Second)))
	got, ok, err := q.OldestDue(ctx, t0)
	if err != nil || !ok || !got.Equal(t0.Add(-30*time.Second)) {
		t.Fatalf("oldest due = %v, %v, %v; want %v", got, ok, err, t0.Add(-30*time.Second))
	}
}

// KeepsIdle checks that db keeps n connections open once n have been in use together. A pool
// that closes what it cannot keep idle pays a new connection (on PostgreSQL a server process
// and a login) for each query beyond its idle count under concurrent load.
func KeepsIdle(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	ctx := context.Background()
	conns := make([]*sql.Conn, n)
	for i := range conns {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatalf("connection %d: %v", i+1, err)
		}
		if err := c.PingContext(ctx); err != nil {
			t.Fatalf("ping %d: %v", i+1, err)
		}
		conns[i] = c
	}
	for _, c := range conns {
		c.Close()
	}
	st := db.Stats()
	if st.MaxIdleClosed != 0 || st.Idle < n {
		t.Fatalf("after %d connections in use together: %d idle, %d closed for want of idle room", n, st.Idle, st.MaxIdleClosed)
	}
}
