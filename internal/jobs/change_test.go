package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/audit"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/jobs"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/secrets/secretstest"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// seed stores a job of family test (two steps) as shaped by edit.
func seed(t *testing.T, st store.Store, id string, edit func(j *job.Job)) *job.Job {
	t.Helper()
	j := (&testfamily.Pipeline{N: 2}).NewJob(id, t0)
	j.OrgID, j.SpaceID = "org_a", "spc_a"
	if edit != nil {
		edit(j)
	}
	out, err := st.CreateJob(t.Context(), &store.CreateJobParams{Job: j, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func done(j *job.Job) {
	j.Status = job.StatusCompleted
	for i := range j.Steps {
		j.Steps[i].Status = job.StepDone
	}
}

// vmOps plans every VM operation and resize as a config naming it and one pending step.
type vmOps struct{}

func (vmOps) PlanVMOp(j *job.Job, op string) (json.RawMessage, []job.StepRecord, error) {
	if op == "detach_lb" {
		return nil, nil, validation.New("vmOp", "loadBalancer", "the pool has no load balancer")
	}
	return json.RawMessage(`{"vmOp":"` + op + `"}`), []job.StepRecord{{Name: "finalize", Status: job.StepPending}}, nil
}

func (vmOps) PlanResize(j *job.Job, min, max, desired *int32) (json.RawMessage, []job.StepRecord, error) {
	return json.RawMessage(`{"resized":true}`), []job.StepRecord{{Name: "finalize", Status: job.StepPending}}, nil
}

func ptr[T any](v T) *T { return &v }

func TestPatch(t *testing.T) {
	t.Parallel()
	st := world(t)
	reg, err := pipeline.NewRegistry(&testfamily.Pipeline{N: 2})
	if err != nil {
		t.Fatal(err)
	}
	svc := &jobs.Service{Store: st, Pipelines: reg, VMOps: vmOps{}, Now: func() time.Time { return t0.Add(time.Hour) }}
	noOps := &jobs.Service{Store: st, Pipelines: reg, Now: func() time.Time { return t0.Add(time.Hour) }}
	pool := func(j *job.Job) { j.Family = job.FamilyVMPool; done(j) }
	cases := []struct {
		name   string
		svc    *jobs.Service
		seed   func(j *job.Job)
		patch  func(j *job.Job) jobs.Patch
		reason jobs.Reason
		fields []string               // the refused fields, with their rules
		err    error                  // the error errors.Is must find; nil with reason 0 and no fields: applied
		check  func(j *job.Job) error // what an applied patch left
	}{
		{name: "rename at the version read",
			patch: func(j *job.Job) jobs.Patch { return jobs.Patch{Version: &j.Version, Name: ptr("web")} },
			check: func(j *job.Job) error {
				if j.Name != "web" {
					return errors.New("not renamed")
				}
				return nil
			}},
		{name: "rename unconditionally", patch: func(*job.Job) jobs.Patch { return jobs.Patch{Name: ptr("api")} },
			check: func(j *job.Job) error {
				if j.Name != "api" {
					return errors.New("not renamed")
				}
				return nil
			}},
		{name: "stale version", patch: func(j *job.Job) jobs.Patch { return jobs.Patch{Version: ptr(j.Version - 1), Name: ptr("web")} },
			reason: jobs.Conflict, err: store.ErrVersionConflict},
		{name: "name too long", patch: func(*job.Job) jobs.Patch { return jobs.Patch{Name: ptr(strings.Repeat("n", 201))} },
			reason: jobs.Invalid, fields: []string{"name/maxLength"}},
		{name: "promote a queued job", patch: func(*job.Job) jobs.Patch { return jobs.Patch{Status: ptr(job.StatusQueued)} },
			reason: jobs.Conflict, fields: []string{"status/transition"}},
		{name: "promote a draft", seed: func(j *job.Job) { j.Status = job.StatusDraft },
			patch: func(*job.Job) jobs.Patch { return jobs.Patch{Status: ptr(job.StatusQueued)} },
			check: func(j *job.Job) error {
				if j.Status != job.StatusQueued {
					return errors.New("not queued")
				}
				return nil
			}},
		{name: "promote a draft on a read-only account", seed: func(j *job.Job) { j.Status, j.SpaceID = job.StatusDraft, "spc_ro" },
			patch:  func(*job.Job) jobs.Patch { return jobs.Patch{Status: ptr(job.StatusQueued)} },
			reason: jobs.Forbidden, fields: []string{"spaceID/permissionLevel"}},
		{name: "vmOp on another family", seed: done, patch: func(*job.Job) jobs.Patch { return jobs.Patch{VMOp: ptr("attach_lb")} },
			reason: jobs.Invalid, fields: []string{"vmOp/kind"}},
		{name: "unknown vmOp", seed: pool, patch: func(*job.Job) jobs.Patch { return jobs.Patch{VMOp: ptr("reboot")} },
			reason: jobs.Invalid, fields: []string{"vmOp/enum"}},
		{name: "vmOp on a pool not completed", seed: func(j *job.Job) { j.Family = job.FamilyVMPool },
			patch:  func(*job.Job) jobs.Patch { return jobs.Patch{VMOp: ptr("attach_lb")} },
			reason: jobs.Conflict},
		{name: "vmOp without VM operations", svc: noOps, seed: pool,
			patch:  func(*job.Job) jobs.Patch { return jobs.Patch{VMOp: ptr("attach_lb")} },
			reason: jobs.Invalid, fields: []string{"vmOp/supported"}},
		{name: "vmOp the pool refuses", seed: pool, patch: func(*job.Job) jobs.Patch { return jobs.Patch{VMOp: ptr("detach_lb")} },
			reason: jobs.Invalid, fields: []string{"vmOp/loadBalancer"}},
		{name: "vmOp", seed: pool, patch: func(*job.Job) jobs.Patch { return jobs.Patch{VMOp: ptr("attach_lb")} },
			check: func(j *job.Job) error {
				if j.Status != job.StatusQueued || string(j.Config) != `{"vmOp":"attach_lb"}` || len(j.Steps) != 1 {
					return errors.New("vmOp not laid out")
				}
				return nil
			}},
		{name: "resize with a vmOp", seed: pool,
			patch:  func(*job.Job) jobs.Patch { return jobs.Patch{VMOp: ptr("attach_lb"), Desired: ptr[int32](3)} },
			reason: jobs.Invalid, fields: []string{"vmOp/exclusive"}},
		{name: "resize another family", seed: done, patch: func(*job.Job) jobs.Patch { return jobs.Patch{Max: ptr[int32](3)} },
			reason: jobs.Invalid, fields: []string{"min/kind"}},
		{name: "resize", seed: pool, patch: func(*job.Job) jobs.Patch { return jobs.Patch{Min: ptr[int32](1)} },
			check: func(j *job.Job) error {
				if j.Status != job.StatusQueued || string(j.Config) != `{"resized":true}` {
					return errors.New("resize not laid out")
				}
				return nil
			}},
		{name: "remediation workflow", seed: func(j *job.Job) { j.Kind = job.KindRemediation },
			patch: func(*job.Job) jobs.Patch { return jobs.Patch{Name: ptr("x")} }, err: store.ErrNotFound},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			j := seed(t, st, "job_p"+string(rune('a'+i)), tc.seed)
			s := svc
			if tc.svc != nil {
				s = tc.svc
			}
			out, err := s.Patch(ctx, jobs.Caller{OrgID: "org_a", Actor: "ann"}, j.ID, tc.patch(j))
			if tc.err != nil && !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if tc.reason != 0 || tc.fields != nil {
				wantRefusal(t, err, tc.reason, tc.fields...)
			}
			if tc.check == nil {
				if err == nil {
					t.Fatal("applied, want refused")
				}
				if now, _ := st.GetJob(ctx, &store.GetJobParams{OrgID: "org_a", ID: j.ID}); now.Version != j.Version {
					t.Fatalf("a refused patch changed the job: version %d → %d", j.Version, now.Version)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out.Version <= j.Version {
				t.Fatalf("version %d after %d", out.Version, j.Version)
			}
			if err := tc.check(out); err != nil {
				t.Fatalf("%v: %+v", err, out)
			}
			entries, _, err := st.ListAudit(ctx, &audit.Filter{OrgID: "org_a", ResourceID: j.ID, Actor: "ann"})
			if err != nil || len(entries) != 1 || !strings.HasPrefix(entries[0].Action, "provisioning-job.") {
				t.Fatalf("audit %v %+v, want one entry by ann", err, entries)
			}
		})
	}
	t.Run("unknown job", func(t *testing.T) {
		t.Parallel()
		if _, err := svc.Patch(t.Context(), jobs.Caller{OrgID: "org_a", Actor: "ann"}, "job_nope", jobs.Patch{Name: ptr("x")}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("err = %v, want store.ErrNotFound", err)
		}
	})
}

func TestRetry(t *testing.T) {
	t.Parallel()
	st := world(t)
	svc := &jobs.Service{Store: st, Now: func() time.Time { return t0.Add(time.Hour) }}
	cases := []struct {
		name   string
		seed   func(j *job.Job)
		refuse bool
		err    error
	}{
		{name: "failed", seed: func(j *job.Job) { j.Status = job.StatusFailed; j.Steps[0].Status = job.StepFailed }},
		{name: "queued", refuse: true},
		{name: "completed", seed: done, refuse: true},
		{name: "remediation workflow", seed: func(j *job.Job) { j.Kind, j.Status = job.KindRemediation, job.StatusFailed }, err: store.ErrNotFound},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			j := seed(t, st, "job_r"+string(rune('a'+i)), tc.seed)
			out, err := svc.Retry(t.Context(), jobs.Caller{OrgID: "org_a", Actor: "ann"}, j.ID)
			switch {
			case tc.err != nil:
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
			case tc.refuse:
				wantRefusal(t, err, jobs.Conflict)
				var te *job.TransitionError
				if !errors.As(err, &te) {
					t.Fatalf("err = %v, want it to name the transition", err)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if out.Status != job.StatusQueued || out.Steps[0].Status != job.StepPending {
					t.Fatalf("retried as %s, step %s", out.Status, out.Steps[0].Status)
				}
			}
		})
	}
}

// forgetter records whose secrets were forgotten.
type forgetter struct {
	mu     sync.Mutex
	owners []secrets.Owner
}

func (f *forgetter) Forget(_ context.Context, o secrets.Owner) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.owners = append(f.owners, o)
	return nil
}

func (f *forgetter) forgot(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, o := range f.owners {
		if o.ID == id {
			return true
		}
	}
	return false
}

func TestCancel(t *testing.T) {
	t.Parallel()
	st := world(t)
	vault := &forgetter{}
	svc := &jobs.Service{Store: st, Secrets: vault, Now: func() time.Time { return t0.Add(time.Hour) }}
	cases := []struct {
		name    string
		seed    func(j *job.Job)
		status  job.Status
		phase   job.Phase
		changed bool // a new version, and an audit entry
		forgets bool
		err     error
	}{
		{name: "nothing done", status: job.StatusCancelled, phase: job.PhaseApply, changed: true, forgets: true},
		// Cancelling needs no more of the cloud account than the job already had.
		{name: "nothing done on a read-only account", seed: func(j *job.Job) { j.SpaceID = "spc_ro" },
			status: job.StatusCancelled, phase: job.PhaseApply, changed: true, forgets: true},
		{name: "completed", seed: done, status: job.StatusQueued, phase: job.PhaseTeardown, changed: true},
		{name: "already cancelled", seed: func(j *job.Job) { j.Status = job.StatusCancelled }, status: job.StatusCancelled,
			phase: job.PhaseApply, forgets: true},
		{name: "remediation workflow", seed: func(j *job.Job) { j.Kind = job.KindRemediation }, err: store.ErrNotFound},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			j := seed(t, st, "job_c"+string(rune('a'+i)), tc.seed)
			out, err := svc.Cancel(ctx, jobs.Caller{OrgID: "org_a", Actor: "ann"}, j.ID)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out.Status != tc.status || out.Phase != tc.phase || (out.Version != j.Version) != tc.changed {
				t.Fatalf("cancelled as %s/%s version %d (was %d)", out.Status, out.Phase, out.Version, j.Version)
			}
			if vault.forgot(j.ID) != tc.forgets {
				t.Fatalf("secrets forgotten: %v, want %v", vault.forgot(j.ID), tc.forgets)
			}
			// The store records an ended job itself, as the engine; the caller's own entry is
			// the one asked about.
			entries, _, err := st.ListAudit(ctx, &audit.Filter{OrgID: "org_a", ResourceID: j.ID, Actor: "ann"})
			if err != nil || (len(entries) == 1) != tc.changed {
				t.Fatalf("audit %v %d entries, want one only for a change", err, len(entries))
			}
		})
	}
}

// Create stores an admitted job with the audit entry of its creation; a refused one leaves
// neither.
func TestCreate(t *testing.T) {
	t.Parallel()
	st := world(t)
	reg, err := pipeline.NewRegistry(&testfamily.Pipeline{N: 2})
	if err != nil {
		t.Fatal(err)
	}
	svc := &jobs.Service{Store: st, Pipelines: reg, Now: func() time.Time { return t0 }}
	ann := jobs.Caller{OrgID: "org_a", Actor: "ann"}
	for _, tc := range []struct {
		name    string
		req     jobs.Request
		refused bool
	}{
		{name: "admitted", req: jobs.Request{SpaceID: "spc_a", Kind: "test", Name: "made"}},
		{name: "read-only account", req: jobs.Request{SpaceID: "spc_ro", Kind: "test", Name: "refused-ro"}, refused: true},
		{name: "unknown kind", req: jobs.Request{SpaceID: "spc_a", Kind: "nope", Name: "refused-kind"}, refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			j, err := svc.Create(ctx, ann, tc.req, nil)
			if tc.refused {
				var rf *jobs.Refusal
				if !errors.As(err, &rf) || j != nil {
					t.Fatalf("Create = %v, %v; want a refusal", j, err)
				}
				page, err := st.ListJobs(ctx, &store.ListJobsParams{OrgID: "org_a"})
				if err != nil {
					t.Fatal(err)
				}
				for _, stored := range page.Jobs {
					if stored.Name == tc.req.Name {
						t.Fatalf("a refused job was stored: %+v", stored)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := st.GetJob(ctx, &store.GetJobParams{OrgID: "org_a", ID: j.ID})
			if err != nil || got.Name != "made" || len(got.Steps) != 2 {
				t.Fatalf("stored job = %+v, %v", got, err)
			}
			entries, _, err := st.ListAudit(ctx, &audit.Filter{OrgID: "org_a", ResourceID: j.ID, Actor: "ann"})
			if err != nil || len(entries) != 1 || entries[0].Action != "provisioning-job.create" {
				t.Fatalf("audit of the create = %+v, %v; want one provisioning-job.create by ann", entries, err)
			}
		})
	}
}

// storingPipeline keeps a secret for the job while validating it, as the datastore pipeline
// does with an adopted server's password, and remembers for which jobs.
type storingPipeline struct {
	*testfamily.Pipeline
	vault *secrets.Vault
	mu    sync.Mutex
	jobs  []*job.Job
}

func (p *storingPipeline) Validate(ctx context.Context, j *job.Job) error {
	p.mu.Lock()
	p.jobs = append(p.jobs, j)
	p.mu.Unlock()
	_, err := p.vault.For(secrets.JobOwner(j.OrgID, j.ID)).Put(ctx, "admin-password-"+j.ID, "s3cret")
	return err
}

// What validation keeps for a job stays only with a stored job: a plan, or a create refused
// after validation, leaves no secret behind.
func TestSecretsOfJobsNotStoredAreForgotten(t *testing.T) {
	t.Parallel()
	st := world(t)
	local, err := secrets.OpenLocal(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	ledger := secretstest.NewLedger()
	vault := secrets.NewVault(local, ledger)
	pl := &storingPipeline{Pipeline: &testfamily.Pipeline{N: 2}, vault: vault}
	reg, err := pipeline.NewRegistry(pl)
	if err != nil {
		t.Fatal(err)
	}
	svc := &jobs.Service{Store: st, Pipelines: reg, Secrets: vault, Now: func() time.Time { return t0 }}
	ann := jobs.Caller{OrgID: "org_a", Actor: "ann"}
	for _, tc := range []struct {
		name string
		run  func() error
		kept int
	}{
		{"a plan", func() error {
			_, err := svc.Admit(t.Context(), "org_a", jobs.Request{SpaceID: "spc_ro", Kind: "test", PlanOnly: true}, nil)
			return err
		}, 0},
		{"a create refused on a read-only account", func() error {
			if _, err := svc.Create(t.Context(), ann, jobs.Request{SpaceID: "spc_ro", Kind: "test"}, nil); err == nil {
				return errors.New("admitted")
			}
			return nil
		}, 0},
		{"a stored job", func() error {
			_, err := svc.Create(t.Context(), ann, jobs.Request{SpaceID: "spc_a", Kind: "test"}, nil)
			return err
		}, 1},
	} {
		pl.mu.Lock()
		pl.jobs = nil
		pl.mu.Unlock()
		if err := tc.run(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		pl.mu.Lock()
		validated := pl.jobs
		pl.mu.Unlock()
		if len(validated) != 1 {
			t.Fatalf("%s: validated %d jobs, want 1", tc.name, len(validated))
		}
		j := validated[0]
		refs, err := ledger.SecretsOwnedBy(t.Context(), secrets.JobOwner(j.OrgID, j.ID))
		if err != nil || len(refs) != tc.kept {
			t.Errorf("%s: %d secrets kept (%v), want %d", tc.name, len(refs), err, tc.kept)
		}
	}
}
