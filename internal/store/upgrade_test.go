package store_test

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/protocol"
	"github.com/groundworkhq/groundwork/internal/remediation"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/store/postgres"
	"github.com/groundworkhq/groundwork/internal/store/sqlite"
	"github.com/groundworkhq/groundwork/internal/store/sqlstore"
	"github.com/groundworkhq/groundwork/internal/testenv/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// fullStore is what the upgrade fixtures write and read through: the job store plus the
// provisioner and datastore records.
type fullStore interface {
	store.Store
	DB() *sql.DB
	InsertProvisioner(ctx context.Context, p protocol.Provisioner) error
	GetProvisioner(ctx context.Context, orgID, id string) (protocol.Provisioner, error)
	RecordSecretOwner(ctx context.Context, ref string, o secrets.Owner, now time.Time) error
	SecretOwner(ctx context.Context, ref string) (secrets.Owner, error)
	InsertDatabase(ctx context.Context, d datastore.Database) (datastore.Database, bool, error)
	GetDatabase(ctx context.Context, jobID, id string) (datastore.Database, error)
	store.Pruner
	remediation.Timeline
	store.Inspections
	store.JobRevisions
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fixture writes, at the schema version that introduced its tables, the rows a release of
// that version held, and reads them back after the upgrade. Every migration needs one: a
// migration that changes existing tables must write its rows here with the SQL of its own
// release (the current store's statements may name columns that did not exist yet).
type fixture struct {
	write func(t *testing.T, s fullStore, at int) // at: the schema version the rows are written at
	check func(t *testing.T, s fullStore)
}

var fixtures = map[int]fixture{
	1: {
		write: func(t *testing.T, s fullStore, _ int) {
			ctx := context.Background()
			must(t, s.CreateSpace(ctx, &store.Space{ID: "spc_up", OrgID: "org_up", Name: "dev", Provider: "local", Region: "local",
				SpaceType: "kubernetes", Status: "ready", CreatedAt: t0}))
			j := &job.Job{ID: "job_up", OrgID: "org_up", SpaceID: "spc_up", Kind: job.KindProvisioning, Family: job.FamilyDatastore,
				Provider: "local", Mode: job.ModeCreate, Config: []byte(`{"engine":"postgres"}`), Infra: []byte(`{"host":"h"}`),
				Steps:  []job.StepRecord{{Name: "a", Status: job.StepDone, Attempts: 1}, {Name: "b", Status: job.StepWaiting}},
				Status: job.StatusQueued, Phase: job.PhaseApply, LeaseTTL: time.Minute, NextRunAt: t0}
			if _, err := s.CreateJob(ctx, &store.CreateJobParams{Job: j, Now: t0}); err != nil {
				t.Fatal(err)
			}
		},
		check: func(t *testing.T, s fullStore) {
			ctx := context.Background()
			sp, err := s.GetSpace(ctx, "org_up", "spc_up")
			if err != nil || sp.Name != "dev" || sp.SpaceType != "kubernetes" {
				t.Errorf("space after upgrade: %+v %v", sp, err)
			}
			j, err := s.GetJob(ctx, &store.GetJobParams{OrgID: "org_up", ID: "job_up"})
			if err != nil || j.Status != job.StatusQueued || len(j.Steps) != 2 || j.Steps[1].Status != job.StepWaiting ||
				strings.ReplaceAll(string(j.Config), " ", "") != `{"engine":"postgres"}` || !j.NextRunAt.Equal(t0) {
				t.Errorf("job after upgrade: %+v %v", j, err)
			}
			// The upgraded job is still due work for the engine. (jsonb spaces JSON out, hence the
			// ReplaceAll above.)
			claimed, err := s.ClaimJobs(ctx, &store.ClaimJobsParams{Owner: "upgrade-test", Now: t0.Add(time.Second), Limit: 10})
			if err != nil || len(claimed) != 1 || claimed[0].ID != "job_up" {
				t.Errorf("claim after upgrade: %d jobs, %v", len(claimed), err)
			}
		},
	},
	2: {
		write: func(t *testing.T, s fullStore, _ int) {
			ctx := context.Background()
			must(t, s.CreateOrg(ctx, &store.Org{ID: "org_up", Name: "Upgraded", CreatedAt: t0}))
			must(t, s.CreateUser(ctx, &store.User{OrgID: "org_up", Email: "ops@example.com", Name: "Ops", CreatedAt: t0}))
		},
		check: func(t *testing.T, s fullStore) {
			ctx := context.Background()
			if o, err := s.GetOrg(ctx, "org_up"); err != nil || o.Name != "Upgraded" {
				t.Errorf("org after upgrade: %+v %v", o, err)
			}
			if u, err := s.GetUser(ctx, "org_up", "ops@example.com"); err != nil || u.Name != "Ops" {
				t.Errorf("user after upgrade: %+v %v", u, err)
			}
		},
	},
	5: {
		// Migration 7 changed these tables (registrations belong to an organisation): below it the
		// rows are written with schema 5's own SQL, as a server of that release wrote them.
		write: func(t *testing.T, s fullStore, at int) {
			ctx := context.Background()
			if at >= 7 {
				must(t, s.InsertProvisioner(ctx, protocol.Provisioner{ID: "prv_up", OrgID: "org_default", Name: "remote", URL: "http://p.example",
					Pairs: []catalog.Pair{{Kind: catalog.Category("service"), Type: "queue"}}, CreatedAt: t0}))
				return
			}
			_, err := s.DB().ExecContext(ctx, `INSERT INTO provisioners (id, name, url, created_at) VALUES ('prv_up', 'remote', 'http://p.example', $1)`, t0.UnixMilli())
			must(t, err)
			_, err = s.DB().ExecContext(ctx, `INSERT INTO provisioner_pairs (kind, type, provisioner_id, position) VALUES ('service', 'queue', 'prv_up', 0)`)
			must(t, err)
		},
		check: func(t *testing.T, s fullStore) {
			// Install-wide registrations made before schema 7 went to the first organisation.
			p, err := s.GetProvisioner(context.Background(), "org_default", "prv_up")
			if err != nil || p.URL != "http://p.example" || len(p.Pairs) != 1 || p.Pairs[0] != (catalog.Pair{Kind: catalog.Category("service"), Type: "queue"}) {
				t.Errorf("provisioner after upgrade: %+v %v", p, err)
			}
		},
	},
	6: {
		write: func(t *testing.T, s fullStore, _ int) {
			_, _, err := s.InsertDatabase(context.Background(), datastore.Database{ID: "db_up", JobID: "job_up", Name: "app", Owner: "app",
				Status: "ready", Endpoint: datastore.Endpoint{Engine: "postgres", Host: "h", Port: 5432, User: "app", SecretRef: "local:sec_x"},
				CreatedAt: t0, UpdatedAt: t0})
			must(t, err)
		},
		check: func(t *testing.T, s fullStore) {
			d, err := s.GetDatabase(context.Background(), "job_up", "db_up")
			if err != nil || d.Owner != "app" || d.Endpoint.SecretRef != "local:sec_x" {
				t.Errorf("database record after upgrade: %+v %v", d, err)
			}
		},
	},
	10: {
		// The retention index: a job that is over, written at 10, is pruned after the upgrade;
		// the live job written at 1 stays.
		write: func(t *testing.T, s fullStore, _ int) {
			j := &job.Job{ID: "job_over", OrgID: "org_up", SpaceID: "spc_up", Kind: job.KindProvisioning, Family: job.FamilyDatastore,
				Provider: "local", Mode: job.ModeCreate, Config: []byte(`{}`), Infra: []byte(`{}`), Steps: []job.StepRecord{},
				Status: job.StatusCancelled, Phase: job.PhaseApply, LeaseTTL: time.Minute, NextRunAt: t0}
			if _, err := s.CreateJob(context.Background(), &store.CreateJobParams{Job: j, Now: t0}); err != nil {
				t.Fatal(err)
			}
		},
		check: func(t *testing.T, s fullStore) {
			ctx := context.Background()
			n, err := s.PruneJobs(ctx, &store.PruneJobsParams{Before: t0.Add(time.Hour), Limit: 100})
			if err != nil || n != 1 {
				t.Errorf("prune after upgrade: %d, %v", n, err)
			}
			if _, err := s.GetJob(ctx, &store.GetJobParams{ID: "job_up"}); err != nil {
				t.Errorf("a live job was pruned: %v", err)
			}
		},
	},
	14: {
		// PostgreSQL's claim indexes became partial (SQLite has no migration 14: without
		// statistics its planner preferred another index to a partial one and sorted every
		// queued job per claim): a job queued at 14 is still found and claimed when due (later
		// than any claim of an earlier fixture's check), and the indexes hold only their
		// status's rows.
		write: func(t *testing.T, s fullStore, _ int) {
			j := &job.Job{ID: "job_later", OrgID: "org_up", SpaceID: "spc_up", Kind: job.KindProvisioning, Family: job.FamilyDatastore,
				Provider: "local", Mode: job.ModeCreate, Config: []byte(`{}`), Infra: []byte(`{}`),
				Steps:  []job.StepRecord{{Name: "a", Status: job.StepPending}},
				Status: job.StatusQueued, Phase: job.PhaseApply, LeaseTTL: time.Minute, NextRunAt: t0.Add(100 * time.Hour)}
			if _, err := s.CreateJob(context.Background(), &store.CreateJobParams{Job: j, Now: t0}); err != nil {
				t.Fatal(err)
			}
		},
		check: func(t *testing.T, s fullStore) {
			ctx := context.Background()
			c, err := s.ClaimJobs(ctx, &store.ClaimJobsParams{Owner: "new", Now: t0.Add(100 * time.Hour), Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, j := range c {
				found = found || j.ID == "job_later" && !j.TakenOver
			}
			if !found {
				t.Errorf("the job queued before the upgrade was not claimed when due: %d others", len(c))
			}
			var n int
			err = s.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_indexes WHERE tablename = 'provisioning_jobs'
				AND indexname IN ('provisioning_jobs_due', 'provisioning_jobs_lease', 'provisioning_jobs_ended') AND indexdef LIKE '%WHERE%'`).Scan(&n)
			if err != nil || n != 3 {
				t.Errorf("partial claim indexes after the upgrade: %d, %v", n, err)
			}
		},
	},
	13: {
		// claimed_from: a job whose lease was granted at 13 and then expired is taken over after
		// the upgrade, and the claim says so. Its lease is long enough that the claim in
		// fixture 1's check, a second after t0, does not take it.
		write: func(t *testing.T, s fullStore, _ int) {
			ctx := context.Background()
			j := &job.Job{ID: "job_taken", OrgID: "org_up", SpaceID: "spc_up", Kind: job.KindProvisioning, Family: job.FamilyDatastore,
				Provider: "local", Mode: job.ModeCreate, Config: []byte(`{}`), Infra: []byte(`{}`),
				Steps:  []job.StepRecord{{Name: "a", Status: job.StepPending}},
				Status: job.StatusQueued, Phase: job.PhaseApply, LeaseTTL: 24 * time.Hour, NextRunAt: t0.Add(-time.Hour)}
			if _, err := s.CreateJob(ctx, &store.CreateJobParams{Job: j, Now: t0.Add(-time.Hour)}); err != nil {
				t.Fatal(err)
			}
			c, err := s.ClaimJobs(ctx, &store.ClaimJobsParams{Owner: "old", Now: t0.Add(-time.Hour), Limit: 1})
			if err != nil || len(c) != 1 || c[0].ID != "job_taken" || c[0].TakenOver {
				t.Fatalf("claim before the upgrade: %+v %v", c, err)
			}
		},
		check: func(t *testing.T, s fullStore) {
			c, err := s.ClaimJobs(context.Background(), &store.ClaimJobsParams{Owner: "new", Now: t0.Add(48 * time.Hour), Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range c {
				if j.ID == "job_taken" {
					if !j.TakenOver {
						t.Errorf("a lease that expired before the upgrade was taken over without saying so")
					}
					return
				}
			}
			t.Errorf("the job whose lease expired was not claimed after the upgrade: %d others", len(c))
		},
	},
	12: {
		// The drift ledger: an inspection of the live job written at 12 reads back, and its
		// claim, not yet due, is kept.
		write: func(t *testing.T, s fullStore, _ int) {
			ctx := context.Background()
			ok, err := s.ClaimInspection(ctx, "org_up", "job_up", t0, t0.Add(time.Hour))
			if err != nil || !ok {
				t.Fatalf("claim: %v %v", ok, err)
			}
			must(t, s.RecordInspection(ctx, &job.Inspection{JobID: "job_up", OrgID: "org_up", SpaceID: "spc_up", InspectedAt: t0,
				Drift: []job.Drift{{Resource: job.ResourceRef{Type: "vpc", ID: "vpc-1"}, Field: "enableDnsHostnames", Applied: true, Actual: false}}}))
		},
		check: func(t *testing.T, s fullStore) {
			ctx := context.Background()
			in, err := s.GetInspection(ctx, "org_up", "job_up")
			if err != nil || len(in.Drift) != 1 || in.Drift[0].Field != "enableDnsHostnames" || !in.InspectedAt.Equal(t0) {
				t.Errorf("inspection after upgrade: %+v %v", in, err)
			}
			if ok, err := s.ClaimInspection(ctx, "org_up", "job_up", t0.Add(time.Minute), t0.Add(2*time.Hour)); err != nil || ok {
				t.Errorf("a claim not yet due was taken after upgrade: %v %v", ok, err)
			}
		},
	},
	11: {
		// A config revision written at 11 reads back after the upgrade, and its number is
		// still taken.
		write: func(t *testing.T, s fullStore, _ int) {
			must(t, s.AddRevision(context.Background(), store.JobRevision{OrgID: "org_up", JobID: "job_up", Number: 1,
				Config: []byte(`{"engine":"postgres"}`), Infra: []byte(`{"host":"h"}`), Status: store.RevisionApplied, Reason: "create", CreatedAt: t0}))
		},
		check: func(t *testing.T, s fullStore) {
			ctx := context.Background()
			revs, err := s.ListRevisions(ctx, "org_up", "job_up")
			if err != nil || len(revs) != 1 || revs[0].Status != store.RevisionApplied || string(revs[0].Config) != `{"engine":"postgres"}` || !revs[0].CreatedAt.Equal(t0) {
				t.Errorf("revisions after upgrade: %+v %v", revs, err)
			}
			if err := s.AddRevision(ctx, store.JobRevision{OrgID: "org_up", JobID: "job_up", Number: 1, Config: []byte(`{}`), Infra: []byte(`{}`),
				Status: store.RevisionApplying, Reason: "update", CreatedAt: t0}); !errors.Is(err, store.ErrVersionConflict) {
				t.Errorf("revision 1 added again after upgrade: %v", err)
			}
		},
	},
	7: {
		write: func(t *testing.T, s fullStore, _ int) {
			must(t, s.RecordSecretOwner(context.Background(), "local:sec_owned", secrets.JobOwner("org_up", "job_up"), t0))
		},
		check: func(t *testing.T, s fullStore) {
			if o, err := s.SecretOwner(context.Background(), "local:sec_owned"); err != nil || o != secrets.JobOwner("org_up", "job_up") {
				t.Errorf("secret owner after upgrade: %+v %v", o, err)
			}
		},
	},
	9: {
		write: func(t *testing.T, s fullStore, _ int) {
			ctx := context.Background()
			_, err := s.AppendEvent(ctx, remediation.Event{OrgID: "org_up", JobID: "job_up", StepID: "stp_up", StepName: "approval",
				EventType: remediation.EventApproved, Actor: "ops@example.com", Reason: "window", CreatedAt: t0})
			must(t, err)
			must(t, s.RecordDelivery(ctx, remediation.Delivery{OrgID: "org_up", JobID: "job_up", StepID: "stp_up",
				Kind: "approval_required", Channel: "webhook", Status: "delivered", Attempts: 3, UpdatedAt: t0}))
		},
		check: func(t *testing.T, s fullStore) {
			ctx := context.Background()
			evs, err := s.ListEvents(ctx, "org_up", "job_up")
			if err != nil || len(evs) != 1 || evs[0].Actor != "ops@example.com" || evs[0].Reason != "window" || !evs[0].CreatedAt.Equal(t0) {
				t.Errorf("remediation timeline after upgrade: %+v %v", evs, err)
			}
			// The upgraded timeline still refuses a second event of the same kind for the step.
			if added, err := s.AppendEvent(ctx, remediation.Event{OrgID: "org_up", JobID: "job_up", StepID: "stp_up", StepName: "approval",
				EventType: remediation.EventApproved, Actor: "x", CreatedAt: t0}); err != nil || added {
				t.Errorf("duplicate event after upgrade: added=%v %v", added, err)
			}
			if ok, err := s.Delivered(ctx, "job_up", "stp_up", "approval_required", "webhook"); err != nil || !ok {
				t.Errorf("delivery after upgrade: %v %v", ok, err)
			}
		},
	},
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func versions(t *testing.T, migrations fs.FS) []int {
	t.Helper()
	names, err := fs.Glob(migrations, "*.sql")
	must(t, err)
	var out []int
	for _, n := range names {
		v := sqlstore.Version(n)
		if _, ok := fixtures[v]; !ok {
			t.Errorf("migration %s has no upgrade fixture: add rows for it to fixtures", n)
		}
		out = append(out, v)
	}
	return out
}

type backend struct {
	migrations fs.FS
	// open returns the store at schema version upTo (0: latest) on the database named by loc.
	open  func(t *testing.T, loc string, upTo int) (fullStore, error)
	fresh func(t *testing.T) string
}

var backends = map[string]backend{
	"sqlite": {
		migrations: sqlite.Migrations(),
		open: func(t *testing.T, loc string, upTo int) (fullStore, error) {
			return sqlite.OpenAt(context.Background(), loc, upTo)
		},
		fresh: func(t *testing.T) string { return filepath.Join(t.TempDir(), "gw.db") },
	},
	"postgres": {
		migrations: postgres.Migrations(),
		open: func(t *testing.T, loc string, upTo int) (fullStore, error) {
			return postgres.OpenAt(context.Background(), loc, slog.New(slog.DiscardHandler), upTo)
		},
		fresh: func(t *testing.T) string { return pgtest.NewDatabase(t) },
	},
}

// From the database each earlier schema version left, with that version's rows in it, the
// current migrations upgrade to the latest schema and every row reads back through the store.
func TestUpgradeFromEverySchemaVersion(t *testing.T) {
	t.Parallel()
	for name, b := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, k := range versions(t, b.migrations) {
				loc := b.fresh(t)
				old, err := b.open(t, loc, k)
				must(t, err)
				for v := 1; v <= k; v++ {
					if f, ok := fixtures[v]; ok {
						f.write(t, old, k)
					}
				}
				must(t, old.Close())
				cur, err := b.open(t, loc, 0)
				if err != nil {
					t.Fatalf("upgrade from schema version %d: %v", k, err)
				}
				for v := 1; v <= k; v++ {
					if f, ok := fixtures[v]; ok {
						t.Run("from"+strconv.Itoa(k)+"/rows"+strconv.Itoa(v), func(t *testing.T) { f.check(t, cur) })
					}
				}
				must(t, cur.Close())
			}
		})
	}
}

// A binary refuses a database a newer binary has migrated, naming both schema versions, and
// leaves it untouched.
func TestRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	for name, b := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			loc := b.fresh(t)
			s, err := b.open(t, loc, 0)
			must(t, err)
			latest, err := sqlstore.Latest(b.migrations)
			must(t, err)
			db := s.(interface{ DB() *sql.DB }).DB()
			_, err = db.ExecContext(context.Background(), `INSERT INTO schema_migrations (name, applied_at) VALUES ('9999_future.sql', 0)`)
			must(t, err)
			must(t, s.Close())

			_, err = b.open(t, loc, 0)
			var tooNew *sqlstore.SchemaTooNewError
			if !errors.As(err, &tooNew) || tooNew.Database != 9999 || tooNew.Binary != latest {
				t.Fatalf("open of a newer schema: err = %v", err)
			}
			if msg := err.Error(); !strings.Contains(msg, "9999") || !strings.Contains(msg, "version "+strconv.Itoa(latest)) {
				t.Errorf("message does not name both versions: %s", msg)
			}
		})
	}
}
