package datastore_test

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/provider/local/localtest"
)

// memRecords stands in for the job store's databases/connections tables, which the store
// package owns; it keeps the contract ds.Records documents ((JobID, Name) unique).
type memRecords struct {
	mu    sync.Mutex
	dbs   map[string]ds.Database
	conns map[string]ds.Connection
	// failStatus makes the next UpdateDatabaseStatus fail, as a crash right after the SQL.
	failStatus bool
}

func newMemRecords() *memRecords {
	return &memRecords{dbs: map[string]ds.Database{}, conns: map[string]ds.Connection{}}
}

func (m *memRecords) InsertDatabase(_ context.Context, d ds.Database) (ds.Database, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.dbs {
		if e.JobID == d.JobID && e.Name == d.Name {
			return e, false, nil
		}
	}
	m.dbs[d.ID] = d
	return d, true, nil
}

// UnsettledDatabaseJobs lists the jobs with a database still creating or deleting.
func (m *memRecords) UnsettledDatabaseJobs(context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, d := range m.dbs {
		if (d.Status == ds.StatusCreating || d.Status == ds.StatusDeleting) && !seen[d.JobID] {
			seen[d.JobID] = true
			out = append(out, d.JobID)
		}
	}
	return out, nil
}

func (m *memRecords) GetDatabase(_ context.Context, jobID, id string) (ds.Database, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.dbs[id]
	if !ok || d.JobID != jobID {
		return ds.Database{}, ds.ErrNotFound
	}
	return d, nil
}

func (m *memRecords) ListDatabases(_ context.Context, jobID string) ([]ds.Database, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []ds.Database
	for _, d := range m.dbs {
		if d.JobID == jobID {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (m *memRecords) UpdateDatabaseStatus(_ context.Context, jobID, id, status string, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failStatus {
		m.failStatus = false
		return errors.New("crash")
	}
	d, ok := m.dbs[id]
	if !ok || d.JobID != jobID {
		return ds.ErrNotFound
	}
	d.Status, d.UpdatedAt = status, now
	m.dbs[id] = d
	return nil
}

func (m *memRecords) DeleteDatabase(_ context.Context, jobID, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d, ok := m.dbs[id]; !ok || d.JobID != jobID {
		return ds.ErrNotFound
	}
	delete(m.dbs, id)
	return nil
}

func (m *memRecords) InsertConnection(_ context.Context, c ds.Connection) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.conns[c.ID] = c
	return nil
}

func (m *memRecords) GetConnection(_ context.Context, jobID, id string) (ds.Connection, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.conns[id]
	if !ok || c.JobID != jobID {
		return ds.Connection{}, ds.ErrNotFound
	}
	return c, nil
}

func (m *memRecords) ListConnections(_ context.Context, jobID, databaseID string) ([]ds.Connection, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []ds.Connection
	for _, c := range m.conns {
		if c.JobID == jobID && c.DatabaseID == databaseID {
			out = append(out, c)
		}
	}
	return out, nil
}

func (m *memRecords) DeleteConnection(_ context.Context, jobID, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.conns[id]; !ok || c.JobID != jobID {
		return ds.ErrNotFound
	}
	delete(m.conns, id)
	return nil
}

type jobsByID map[string]*job.Job

func (m jobsByID) GetJob(_ context.Context, id string) (*job.Job, error) {
	j, ok := m[id]
	if !ok {
		return nil, ds.ErrNotFound
	}
	return j, nil
}

func TestDatabasesAndConnections(t *testing.T) {
	t.Parallel()
	for _, e := range ds.Engines {
		t.Run(string(e), func(t *testing.T) {
			t.Parallel()
			localtest.RequireEngine(t, e)
			ctx := context.Background()
			b := setup(t, localtest.DataDir(t), nil)
			j := newJob("job_db_"+string(e), job.ModeCreate, map[string]any{"engine": e})
			t.Cleanup(func() { _ = b.prov.Delete(context.Background(), j.ID) })
			recs := newMemRecords()
			svc := ds.NewService(jobsByID{j.ID: j}, recs, b.vault, nil, b.logger)

			j.Status = job.StatusRunning
			if _, err := svc.CreateDatabase(ctx, ds.CreateDatabaseParams{JobID: j.ID, Name: "checkout", Owner: "checkout_app"}); !errors.Is(err, ds.ErrNotReady) {
				t.Fatalf("create on a job that is not completed = %v, want ErrNotReady", err)
			}
			b.apply(t, j)
			j.Status = job.StatusCompleted

			// Hostile names: a field error, nothing recorded, nothing stored.
			for _, bad := range []ds.CreateDatabaseParams{
				{Name: `x"; DROP DATABASE postgres; --`, Owner: "a_app"},
				{Name: strings.Repeat("d", 200), Owner: "a_app"},
				{Name: "ok_db", Owner: "ünïcødé"},
			} {
				bad.JobID = j.ID
				if _, err := svc.CreateDatabase(ctx, bad); !ds.IsFieldError(err) {
					t.Fatalf("CreateDatabase(%q, %q) = %v, want a field error", bad.Name, bad.Owner, err)
				}
			}
			if dbs, _ := recs.ListDatabases(ctx, j.ID); len(dbs) != 0 {
				t.Fatalf("hostile requests left records: %v", dbs)
			}

			// A crash between the SQL and the status update; a re-sent request and Reconcile
			// finish it, with one record and one working owner.
			recs.failStatus = true
			if _, err := svc.CreateDatabase(ctx, ds.CreateDatabaseParams{JobID: j.ID, Name: "checkout", Owner: "checkout_app"}); err == nil {
				t.Fatal("want the simulated crash")
			}
			// What a server start runs: every unsettled job, until none is left.
			if ids, _ := recs.UnsettledDatabaseJobs(ctx); len(ids) != 1 {
				t.Fatalf("unsettled jobs after the crash = %v, want this one", ids)
			}
			svc.ReconcileAll(ctx, recs)
			if ids, _ := recs.UnsettledDatabaseJobs(ctx); len(ids) != 0 {
				t.Fatalf("unsettled jobs after ReconcileAll = %v", ids)
			}
			db, err := svc.CreateDatabase(ctx, ds.CreateDatabaseParams{JobID: j.ID, Name: "checkout", Owner: "checkout_app"})
			if err != nil {
				t.Fatalf("CreateDatabase: %v", err)
			}
			dbs, _ := svc.ListDatabases(ctx, j.ID)
			if len(dbs) != 1 || dbs[0].ID != db.ID || db.Status != ds.StatusReady {
				t.Fatalf("databases = %+v, want one ready %s", dbs, db.ID)
			}
			if _, err := svc.CreateDatabase(ctx, ds.CreateDatabaseParams{JobID: j.ID, Name: "other", Owner: "checkout_app"}); !ds.IsFieldError(err) {
				t.Fatalf("second database for one owner = %v, want a field error", err)
			}

			// A database-scoped connection; "reveal" its secret and use it.
			conn, err := svc.CreateConnection(ctx, ds.CreateConnectionParams{JobID: j.ID, DatabaseID: db.ID})
			if err != nil {
				t.Fatal(err)
			}
			answer, _ := json.Marshal(conn)
			pw, err := b.secrets.Get(ctx, conn.Endpoint.SecretRef)
			if err != nil {
				t.Fatalf("reveal: %v", err)
			}
			if strings.Contains(string(answer), pw) {
				t.Fatalf("a connection answer carries the password: %s", answer)
			}
			user := ds.Conn{Engine: e, Host: conn.Endpoint.Host, Port: conn.Endpoint.Port, User: conn.Endpoint.User, Password: pw, Database: conn.Endpoint.Database}
			if user.User != "checkout_app" || user.Database != "checkout" {
				t.Fatalf("connection endpoint = %+v", conn.Endpoint)
			}
			if err := localtest.WriteRead(ctx, user); err != nil {
				t.Fatalf("owner write+read: %v", err)
			}
			jobConn, err := svc.CreateConnection(ctx, ds.CreateConnectionParams{JobID: j.ID})
			if err != nil {
				t.Fatal(err)
			}
			if jc, _ := svc.ListConnections(ctx, j.ID, ""); len(jc) != 1 || jc[0].ID != jobConn.ID {
				t.Fatalf("job-scoped connections = %+v", jc)
			}
			if _, err := svc.GetConnection(ctx, j.ID, "", conn.ID); !errors.Is(err, ds.ErrNotFound) {
				t.Fatalf("database-scoped connection read as job-scoped: %v", err)
			}

			// Deleting a connection keeps the user.
			if err := svc.DeleteConnection(ctx, j.ID, db.ID, conn.ID); err != nil {
				t.Fatal(err)
			}
			if err := ds.Check(ctx, user); err != nil {
				t.Fatalf("user gone with its connection: %v", err)
			}

			// Deleting the database drops the user; its secret goes too.
			if err := svc.DeleteDatabase(ctx, j.ID, db.ID); err != nil {
				t.Fatalf("DeleteDatabase: %v", err)
			}
			if err := ds.Check(ctx, user); !ds.IsAuthFailure(err) {
				t.Fatalf("owner connects after delete: %v", err)
			}
			if _, err := svc.GetDatabase(ctx, j.ID, db.ID); !errors.Is(err, ds.ErrNotFound) {
				t.Fatalf("record survives delete: %v", err)
			}
			if strings.Contains(b.logs.String(), pw) {
				t.Fatal("logs hold the owner password")
			}
			b.teardown(t, j)
		})
	}
}
