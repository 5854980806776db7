// Package storetest is the conformance suite every store.Store implementation passes. Each
// implementation's test calls Run with a constructor that returns a fresh, empty store.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

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
		"RenewLease":               testRenew,
		"UpdateDoesNotTouchLease":  testUpdateKeepsLease,
		"SpacesAndAccounts":        testSpaces,
		"WakeupOnQueue":            testWakeup,
		"CountJobs":                testCount,
	}
	for name, fn := range accessTests {
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
