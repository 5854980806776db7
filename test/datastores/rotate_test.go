package datastores

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/job"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/provider/local/localtest"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/store/sqlite"
	"github.com/groundworkhq/groundwork/internal/testenv/childserver"
)

// rotationView is the part of a job answer a rotation is judged on.
type rotationView struct {
	ID      string       `json:"id"`
	Status  string       `json:"status"`
	Failure *job.Failure `json:"failure"`
	Infra   struct {
		Rotation    *dspipe.RotationState `json:"rotation"`
		Connection  *datastore.Endpoint   `json:"connection"`
		Credentials *struct {
			SecretRef string `json:"secretRef"`
		} `json:"credentials"`
	} `json:"infra"`
}

func (s *server) rotationJob(t *testing.T, id string) rotationView {
	t.Helper()
	var j rotationView
	s.must(t, http.StatusOK, "GET", "/api/provisioning-jobs/"+id, nil, &j)
	return j
}

// rotate asks for a rotation and waits for the job to complete it.
func (s *server) rotate(t *testing.T, jobID string, body map[string]string) rotationView {
	t.Helper()
	var j rotationView
	s.must(t, http.StatusAccepted, "POST", "/api/provisioning-jobs/"+jobID+"/rotate-credentials", body, &j)
	if j.Status != string(job.StatusQueued) {
		t.Fatalf("rotation answered a %s job, want queued", j.Status)
	}
	s.waitJob(t, jobID, "completed")
	return s.rotationJob(t, jobID)
}

// Credential rotation through the real server, for each job store and engine: the admin
// credential, then a database owner's named by its connection. After each, the old password is
// refused by the server, the new one works, every connection holding the credential holds the
// new reference, the old reference is gone from the secret store, and one audit entry records
// the request. Bad requests are refused naming the field. Nothing the server wrote, logged or
// answered holds a password.
func TestRotate(t *testing.T) {
	t.Parallel()
	requireEngines(t)
	onEachStore(t, func(t *testing.T, e *env, s *server, spaceID string) {
		t.Run("engines", func(t *testing.T) {
			for _, eng := range datastore.Engines {
				t.Run(string(eng), func(t *testing.T) {
					t.Parallel()
					rotateLifecycle(t, s, spaceID, eng)
				})
			}
		})
	})
}

func rotateLifecycle(t *testing.T, s *server, spaceID string, eng datastore.Engine) {
	ctx := context.Background()
	jobID := s.createJob(t, spaceID, eng)
	s.waitJob(t, jobID, "completed")
	base := "/api/provisioning-jobs/" + jobID

	var ops, ops2, app, app2 connectionView
	s.must(t, http.StatusCreated, "POST", base+"/connections", map[string]string{"name": "ops"}, &ops)
	s.must(t, http.StatusCreated, "POST", base+"/connections", nil, &ops2)
	var db databaseView
	s.must(t, http.StatusCreated, "POST", base+"/databases", map[string]string{"name": "checkout", "owner": "checkout_app"}, &db)
	s.must(t, http.StatusCreated, "POST", base+"/databases/"+db.ID+"/connections", map[string]string{"name": "app"}, &app)
	s.must(t, http.StatusCreated, "POST", base+"/databases/"+db.ID+"/connections", nil, &app2)
	oldAdmin := ops.Connection
	oldAdminPW := s.reveal(t, oldAdmin.SecretRef)
	admin := datastore.Conn{Engine: eng, Host: oldAdmin.Host, Port: oldAdmin.Port, User: oldAdmin.User}

	// Bad requests name the field and change nothing.
	for _, bad := range []struct {
		body  map[string]string
		field string
	}{
		{map[string]string{}, "target"},
		{map[string]string{"target": "root"}, "target"},
		{map[string]string{"target": "admin", "connection": "ops"}, "connection"},
		{map[string]string{"connection": "nope"}, "connection"},
		{map[string]string{"target": "admin", "adminPassword": "mine"}, "adminPassword"},
	} {
		r := s.call(t, "POST", base+"/rotate-credentials", bad.body)
		if r.Status != http.StatusBadRequest || firstField(r) != bad.field {
			t.Errorf("rotate %v: %d %s, want 400 naming %s", bad.body, r.Status, r.Raw, bad.field)
		}
	}
	if j := s.rotationJob(t, jobID); j.Status != "completed" || j.Infra.Rotation != nil {
		t.Fatalf("refused requests changed the job: %+v", j)
	}

	// The admin credential.
	j := s.rotate(t, jobID, map[string]string{"target": "admin"})
	st := j.Infra.Rotation
	if st == nil || !st.Retired || st.OldRef != oldAdmin.SecretRef || st.NewRef == oldAdmin.SecretRef || st.Repointed != 2 ||
		j.Infra.Connection.SecretRef != st.NewRef || j.Infra.Credentials.SecretRef != st.NewRef {
		t.Fatalf("after the admin rotation the job records %+v (endpoint %+v), want both job-scoped connections moved and the old version retired", st, j.Infra.Connection)
	}
	for _, c := range []connectionView{ops, ops2} {
		var now connectionView
		s.must(t, http.StatusOK, "GET", base+"/connections/"+c.ID, nil, &now)
		if now.Connection.SecretRef != st.NewRef {
			t.Errorf("connection %s holds %s after the rotation, want %s", c.ID, now.Connection.SecretRef, st.NewRef)
		}
	}
	newAdminPW := s.reveal(t, st.NewRef)
	if newAdminPW == oldAdminPW {
		t.Fatal("the rotation kept the password")
	}
	withOld, withNew := admin, admin
	withOld.Password, withNew.Password = oldAdminPW, newAdminPW
	if err := datastore.Check(ctx, withOld); err == nil || !datastore.IsAuthFailure(err) {
		t.Errorf("the old admin password after the rotation: %v, want refused", err)
	}
	if err := datastore.Check(ctx, withNew); err != nil {
		t.Errorf("the new admin password: %v", err)
	}
	if r := s.call(t, "POST", "/api/secrets/reveal", map[string]string{"ref": oldAdmin.SecretRef}); r.Status != http.StatusNotFound {
		t.Errorf("reveal of the retired admin version: %d %s", r.Status, r.Raw)
	}
	// The service now logs in with the new version: a database is made and dropped.
	var other databaseView
	s.must(t, http.StatusCreated, "POST", base+"/databases", map[string]string{"name": "reports", "owner": "reports_app"}, &other)
	s.must(t, http.StatusNoContent, "DELETE", base+"/databases/"+other.ID, nil, nil)

	// The owner of checkout, named through its connection's name.
	oldOwnerRef := app.Connection.SecretRef
	oldOwnerPW := s.reveal(t, oldOwnerRef)
	j = s.rotate(t, jobID, map[string]string{"connection": "app"})
	st = j.Infra.Rotation
	if st == nil || !st.Retired || st.Target != dspipe.RotateDatabase || st.DatabaseID != db.ID || st.OldRef != oldOwnerRef || st.Repointed != 3 {
		t.Fatalf("after the owner rotation the job records %+v, want the database and its two connections moved", st)
	}
	var nowDB databaseView
	s.must(t, http.StatusOK, "GET", base+"/databases/"+db.ID, nil, &nowDB)
	if nowDB.Connection.SecretRef != st.NewRef {
		t.Errorf("the database holds %s, want %s", nowDB.Connection.SecretRef, st.NewRef)
	}
	for _, c := range []connectionView{app, app2} {
		var now connectionView
		s.must(t, http.StatusOK, "GET", base+"/databases/"+db.ID+"/connections/"+c.ID, nil, &now)
		if now.Connection.SecretRef != st.NewRef {
			t.Errorf("connection %s holds %s after the rotation, want %s", c.ID, now.Connection.SecretRef, st.NewRef)
		}
	}
	owner := datastore.Conn{Engine: eng, Host: app.Connection.Host, Port: app.Connection.Port, User: "checkout_app", Database: "checkout"}
	owner.Password = oldOwnerPW
	if err := datastore.Check(ctx, owner); err == nil || !datastore.IsAuthFailure(err) {
		t.Errorf("the owner's old password after the rotation: %v, want refused", err)
	}
	owner.Password = s.reveal(t, st.NewRef)
	if err := localtest.WriteRead(ctx, owner); err != nil {
		t.Errorf("write and read with the owner's new password: %v", err)
	}
	if err := datastore.Check(ctx, withNew); err != nil {
		t.Errorf("the admin's password after the owner's rotation: %v", err)
	}

	var audits auditPage
	s.must(t, http.StatusOK, "GET", "/api/audit-logs?action=datastore.rotate_credentials&resourceID="+jobID, nil, &audits)
	if audits.Total != 2 {
		t.Errorf("%d audit entries for two rotations, want 2", audits.Total)
	}

	s.must(t, http.StatusAccepted, "DELETE", base, nil, nil)
	s.waitJob(t, jobID, "deleted")
}

// An adopted datastore's admin password is the customer's: they change it on the server and
// give Groundwork the new one. A wrong one fails the rotation at its login, changing nothing
// (the old password keeps working through the job); the right one replaces the stored
// reference everywhere, and the old version is deleted.
func TestRotateAdopted(t *testing.T) {
	t.Parallel()
	requireEngines(t)
	e := newEnv(t, "")
	s := e.start("")
	spaceID := s.space(t)
	for _, eng := range datastore.Engines {
		t.Run(string(eng), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			own, oldPW := localtest.StartServer(t, eng)
			e.remember(oldPW)
			j := s.adoptJob(t, spaceID, own, oldPW)
			if got := s.waitSettled(t, j.ID); got.Status != "completed" {
				t.Fatalf("adopted job %s: %+v", got.Status, got.Failure)
			}
			base := "/api/provisioning-jobs/" + j.ID
			var ops connectionView
			s.must(t, http.StatusCreated, "POST", base+"/connections", map[string]string{"name": "ops"}, &ops)
			oldRef := ops.Connection.SecretRef

			if r := s.call(t, "POST", base+"/rotate-credentials", map[string]string{"target": "admin"}); r.Status != http.StatusBadRequest || firstField(r) != "adminPassword" {
				t.Errorf("rotation of an adopted admin without a password: %d %s, want 400 naming adminPassword", r.Status, r.Raw)
			}

			newPW := datastore.GeneratePassword()
			e.remember(newPW)
			if err := datastore.SetOwnPassword(ctx, own.Admin(oldPW), newPW); err != nil {
				t.Fatal(err)
			}
			wrong := datastore.GeneratePassword()
			e.remember(wrong)
			s.must(t, http.StatusAccepted, "POST", base+"/rotate-credentials", map[string]string{"target": "admin", "adminPassword": wrong}, nil)
			f := s.waitSettled(t, j.ID)
			if f.Status != "failed" || f.Failure == nil || f.Failure.Code != "AuthFailed" || f.Failure.Step != dspipe.StepRotatePassword {
				t.Fatalf("rotation to a wrong password: %s %+v, want failed with AuthFailed at %s", f.Status, f.Failure, dspipe.StepRotatePassword)
			}
			if got := s.rotationJob(t, j.ID); got.Infra.Connection.SecretRef != oldRef {
				t.Fatalf("a failed rotation moved the admin endpoint to %s", got.Infra.Connection.SecretRef)
			}

			rj := s.rotate(t, j.ID, map[string]string{"target": "admin", "adminPassword": newPW})
			st := rj.Infra.Rotation
			if st == nil || !st.Retired || st.OldRef != oldRef || rj.Infra.Connection.SecretRef != st.NewRef || st.Repointed != 1 {
				t.Fatalf("after the rotation the job records %+v (endpoint %+v)", st, rj.Infra.Connection)
			}
			var now connectionView
			s.must(t, http.StatusOK, "GET", base+"/connections/"+ops.ID, nil, &now)
			if now.Connection.SecretRef != st.NewRef || s.reveal(t, st.NewRef) != newPW {
				t.Errorf("the connection holds %s, want %s holding the given password", now.Connection.SecretRef, st.NewRef)
			}
			if r := s.call(t, "POST", "/api/secrets/reveal", map[string]string{"ref": oldRef}); r.Status != http.StatusNotFound {
				t.Errorf("reveal of the replaced version: %d %s", r.Status, r.Raw)
			}
			// Groundwork logs in with the new one: a database is made.
			s.must(t, http.StatusCreated, "POST", base+"/databases", map[string]string{"name": "checkout", "owner": "checkout_app"}, nil)
			s.must(t, http.StatusAccepted, "DELETE", base, nil, nil)
			s.waitJob(t, j.ID, "deleted")
		})
	}
	t.Cleanup(func() {
		s.stop()
		e.scan(t)
	})
}

// SIGKILL of Groundwork after rotate_password changed each server's admin password and before
// the step's checkpoint. While it is down, exactly one password works on each server, and it
// is the one behind the new reference the job records; the old one is refused. Restarted, the
// server finishes every rotation: the job's endpoint and every connection hold the new
// reference, and the old version is gone.
func TestRotateCrash(t *testing.T) {
	t.Parallel()
	requireEngines(t)
	e := newEnv(t, "")
	markers := filepath.Join(e.dir, "markers")
	s := e.start("rotate_password")
	spaceID := s.space(t)
	ids := map[datastore.Engine]string{}
	before := map[datastore.Engine]connectionView{}
	oldPW := map[datastore.Engine]string{}
	for _, eng := range datastore.Engines {
		ids[eng] = s.createJob(t, spaceID, eng)
	}
	for eng, id := range ids {
		s.waitJob(t, id, "completed")
		var c connectionView
		s.must(t, http.StatusCreated, "POST", "/api/provisioning-jobs/"+id+"/connections", map[string]string{"name": "ops"}, &c)
		before[eng], oldPW[eng] = c, s.reveal(t, c.Connection.SecretRef)
	}
	for _, id := range ids {
		s.must(t, http.StatusAccepted, "POST", "/api/provisioning-jobs/"+id+"/rotate-credentials", map[string]string{"target": "admin"}, nil)
	}
	// Armed only now: until then rotate_password holds, so that no crash cuts a request short.
	if err := os.WriteFile(filepath.Join(markers, childserver.Armed), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	// Every job crashes the server once, at its own rotate_password; between crashes the
	// server is down and its stores are read directly. The marker is taken away before each
	// restart and put back once the server listens: a job claimed at once would otherwise
	// crash it before it answers.
	armed := filepath.Join(markers, childserver.Armed)
	inspected := map[string]bool{}
	deadline := time.Now().Add(3 * time.Minute)
	for len(inspected) < len(ids) {
		select {
		case <-s.proc.Done():
		case <-time.After(time.Until(deadline)):
			t.Fatalf("the server did not crash at rotate_password for every job; crashed for %v", inspected)
		}
		for eng, id := range ids {
			if n, _ := filepath.Glob(filepath.Join(markers, id+"."+dspipe.StepRotatePassword+".*.crash")); len(n) > 0 && !inspected[id] {
				inspected[id] = true
				e.assertOnePassword(t, eng, id, before[eng].Connection, oldPW[eng])
			}
		}
		if err := os.Remove(armed); err != nil {
			t.Fatal(err)
		}
		s = e.start("rotate_password")
		if err := os.WriteFile(armed, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for eng, id := range ids {
		s.waitJob(t, id, "completed")
		j := s.rotationJob(t, id)
		st := j.Infra.Rotation
		if st == nil || !st.Retired || j.Infra.Connection.SecretRef != st.NewRef || st.OldRef != before[eng].Connection.SecretRef {
			t.Fatalf("%s: after the restart the job records %+v (endpoint %+v)", eng, st, j.Infra.Connection)
		}
		var c connectionView
		s.must(t, http.StatusOK, "GET", "/api/provisioning-jobs/"+id+"/connections/"+before[eng].ID, nil, &c)
		if c.Connection.SecretRef != st.NewRef {
			t.Errorf("%s: the connection holds %s after the restart, want %s", eng, c.Connection.SecretRef, st.NewRef)
		}
		admin := datastore.Conn{Engine: eng, Host: c.Connection.Host, Port: c.Connection.Port, User: c.Connection.User, Password: s.reveal(t, st.NewRef)}
		if err := datastore.Check(context.Background(), admin); err != nil {
			t.Errorf("%s: the new admin password after the restart: %v", eng, err)
		}
		if r := s.call(t, "POST", "/api/secrets/reveal", map[string]string{"ref": st.OldRef}); r.Status != http.StatusNotFound {
			t.Errorf("%s: reveal of the retired version: %d %s", eng, r.Status, r.Raw)
		}
		s.must(t, http.StatusAccepted, "DELETE", "/api/provisioning-jobs/"+id, nil, nil)
		s.waitJob(t, id, "deleted")
	}
	s.stop()
	e.scan(t)
}

// assertOnePassword reads the stopped server's job store and secret store: the job records a
// rotation whose new reference holds the one password the datastore takes.
func (e *env) assertOnePassword(t *testing.T, eng datastore.Engine, jobID string, ep datastore.Endpoint, oldPW string) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(e.dataDir, "groundwork.db"))
	if err != nil {
		t.Fatal(err)
	}
	j, err := st.GetJob(ctx, &store.GetJobParams{ID: jobID})
	_ = st.Close()
	if err != nil {
		t.Fatal(err)
	}
	rot, ok, err := dspipe.RotationStateOf(j)
	if err != nil || !ok || rot.NewRef == "" || rot.OldRef != ep.SecretRef || rot.Changed {
		t.Fatalf("%s: the crashed job records rotation %+v (%v), want the new version recorded and the change not yet", eng, rot, err)
	}
	sec, err := secrets.OpenLocal(e.dataDir, "")
	if err != nil {
		t.Fatal(err)
	}
	newPW, err := sec.Get(ctx, rot.NewRef)
	if err != nil {
		t.Fatalf("%s: the new version %s: %v", eng, rot.NewRef, err)
	}
	e.remember(newPW)
	c := datastore.Conn{Engine: eng, Host: ep.Host, Port: ep.Port, User: ep.User, Password: oldPW}
	if err := datastore.Check(ctx, c); err == nil || !datastore.IsAuthFailure(err) {
		t.Errorf("%s: the old password while the server is down: %v, want refused", eng, err)
	}
	c.Password = newPW
	if err := datastore.Check(ctx, c); err != nil {
		t.Errorf("%s: the password behind the job's new reference: %v", eng, err)
	}
}
