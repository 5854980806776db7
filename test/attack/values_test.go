package attack

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/testenv/kubeenv"
)

// Finding 7: a component value the catalog marks secret (grafana.adminPassword) is kept in the
// secret store, owned by the job: a Viewer, the job, its event stream, /metrics and the job
// store never show it, and teardown deletes it.
func TestSecretComponentValuesStayOutOfTheJob(t *testing.T) {
	t.Parallel()
	kube := kubeenv.Start(t)
	onEachStore(t, func(t *testing.T, w *world) {
		const password = "GrafanaAdmin-7c1e5b93d2"
		orgA := w.orgOf(t, w.adminA)
		viewer := w.userToken(t, w.adminA, "viewer@a.example.com", "role_viewer")
		body, _ := json.Marshal(map[string]any{"name": "k", "cluster": map[string]any{"endpoint": kube.Host, "caData": string(kube.CA), "token": kube.Token}})
		var sp struct {
			ID string `json:"id"`
		}
		w.must(t, w.adminA, "POST", "/api/spaces/register-cluster", string(body), 201).Decode(t, &sp)
		var j struct {
			ID     string `json:"id"`
			Status string `json:"status"`
			Config struct {
				SecretValues map[string]string `json:"secretValues"`
			} `json:"config"`
		}
		created := w.must(t, w.adminA, "POST", "/api/provisioning-jobs/install-component", fmt.Sprintf(
			`{"spaceID":%q,"componentID":"kube-prometheus-stack","values":{"grafana.adminPassword":%q}}`, sp.ID, password), 201)
		created.Decode(t, &j)
		ref := j.Config.SecretValues["grafana.adminPassword"]
		if !secrets.IsRef(ref) || strings.Contains(string(created.Raw), password) {
			t.Fatalf("install answer %s: want the value replaced by a reference", created.Raw)
		}
		// A reference in the request is refused: it would name someone else's secret.
		w.refused(t, w.adminA, "POST", "/api/provisioning-jobs", fmt.Sprintf(
			`{"spaceID":%q,"kind":"component","config":{"componentID":"kube-prometheus-stack","secretValues":{"grafana.adminPassword":%q}}}`, sp.ID, ref), 400, "")
		owner := w.vault.For(secrets.JobOwner(orgA, j.ID))
		if v, err := owner.Get(context.Background(), ref); err != nil || v != password {
			t.Fatalf("the job's own secret value: %q, %v", v, err)
		}
		seen := []string{string(created.Raw)}
		for _, tok := range []string{viewer, w.adminA} {
			seen = append(seen, string(w.must(t, tok, "GET", "/api/provisioning-jobs/"+j.ID, "", 200).Raw))
		}
		// Tear it down once validate has run (its undo deletes the values; the chart cannot be
		// fetched here, so the job is cancelled wherever it got to), then read the settled job's
		// event stream.
		waitFor(t, 2*time.Minute, "the validate step to run", func() bool {
			var st struct {
				Steps []struct {
					Status string `json:"status"`
				} `json:"steps"`
			}
			w.must(t, w.adminA, "GET", "/api/provisioning-jobs/"+j.ID, "", 200).Decode(t, &st)
			return len(st.Steps) > 0 && st.Steps[0].Status == "done"
		})
		w.must(t, w.adminA, "DELETE", "/api/provisioning-jobs/"+j.ID, "", 202)
		waitFor(t, 2*time.Minute, "the job to settle", func() bool {
			w.must(t, w.adminA, "GET", "/api/provisioning-jobs/"+j.ID, "", 200).Decode(t, &j)
			return j.Status == "cancelled" || j.Status == "deleted"
		})
		seen = append(seen, string(w.must(t, viewer, "GET", "/api/provisioning-jobs/"+j.ID+"/events", "", 200).Raw))
		seen = append(seen, string(w.must(t, w.adminA, "GET", "/api/audit-logs?limit=200", "", 200).Raw))
		for _, s := range seen {
			if strings.Contains(s, password) {
				t.Errorf("an answer shows the secret value: %.300s", s)
			}
		}
		metrics := w.call(t, "", "GET", "/metrics", "")
		if strings.Contains(string(metrics.Raw), password) {
			t.Error("/metrics shows the secret value")
		}
		scanStore(t, w, password)
		scanFor(t, w.dataDir, password)
		if _, err := owner.Get(context.Background(), ref); !errors.Is(err, secrets.ErrNotFound) {
			t.Errorf("the value outlives its job: %v", err)
		}
	})
}

// scanStore fails the test when needle is in any text column of the job store's tables that
// hold what users sent (jobs, audit entries, spaces, accounts).
func scanStore(t *testing.T, w *world, needle string) {
	t.Helper()
	db, ok := w.st.(interface{ DB() *sql.DB })
	if !ok {
		t.Fatalf("store %T gives no database handle", w.st)
	}
	for _, q := range []string{
		"SELECT CAST(config AS TEXT) || CAST(infra AS TEXT) || CAST(steps AS TEXT) FROM provisioning_jobs",
		"SELECT CAST(metadata AS TEXT) FROM audit_logs",
		"SELECT COALESCE(CAST(config AS TEXT), '') FROM spaces",
	} {
		rows, err := db.DB().QueryContext(context.Background(), q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		for rows.Next() {
			var s sql.NullString
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(s.String, needle) {
				t.Errorf("the job store holds the secret value (%s)", q)
			}
		}
		_ = rows.Close()
	}
}

// A job cancelled before any step ran leaves none of the secrets stored for it at admission.
func TestCancelledBeforeRunningLeavesNoSecrets(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, w *world) {
		orgA := w.orgOf(t, w.adminA)
		var sp struct {
			ID string `json:"id"`
		}
		w.must(t, w.adminA, "POST", "/api/spaces", `{"name":"s","provider":"local","region":"local"}`, 201).Decode(t, &sp)
		var j struct {
			ID     string `json:"id"`
			Status string `json:"status"`
			Config struct {
				AdminSecretRef string `json:"adminSecretRef"`
			} `json:"config"`
		}
		w.must(t, w.adminA, "POST", "/api/provisioning-jobs", `{"spaceID":"`+sp.ID+`","kind":"datastore","mode":"adopt","draft":true,
			"config":{"engine":"redis","host":"127.0.0.1","port":6399,"adminPassword":"adopted-password-1"}}`, 201).Decode(t, &j)
		owner := w.vault.For(secrets.JobOwner(orgA, j.ID))
		if v, err := owner.Get(context.Background(), j.Config.AdminSecretRef); err != nil || v != "adopted-password-1" {
			t.Fatalf("the draft's password: %q, %v", v, err)
		}
		w.must(t, w.adminA, "DELETE", "/api/provisioning-jobs/"+j.ID, "", 202).Decode(t, &j)
		if j.Status != "cancelled" {
			t.Fatalf("status %s after cancelling a draft", j.Status)
		}
		if _, err := owner.Get(context.Background(), j.Config.AdminSecretRef); !errors.Is(err, secrets.ErrNotFound) {
			t.Errorf("the cancelled draft's password is still stored: %v", err)
		}
	})
}

// A job that ends with its admission secrets still stored (the engine ended it cancelled while
// its first step ran, so neither an undo nor the API's cancel deleted them) has them swept.
func TestEndedJobSecretsAreSwept(t *testing.T) {
	t.Parallel()
	onEachStoreWith(t, app.Options{SecretSweepEvery: 50 * time.Millisecond}, func(t *testing.T, w *world) {
		orgA := w.orgOf(t, w.adminA)
		var sp struct {
			ID string `json:"id"`
		}
		w.must(t, w.adminA, "POST", "/api/spaces", `{"name":"s","provider":"local","region":"local"}`, 201).Decode(t, &sp)
		stored := func(password string) (id, ref string) {
			var j struct {
				ID     string `json:"id"`
				Config struct {
					AdminSecretRef string `json:"adminSecretRef"`
				} `json:"config"`
			}
			w.must(t, w.adminA, "POST", "/api/provisioning-jobs", `{"spaceID":"`+sp.ID+`","kind":"datastore","mode":"adopt","draft":true,
				"config":{"engine":"redis","host":"127.0.0.1","port":6399,"adminPassword":"`+password+`"}}`, 201).Decode(t, &j)
			return j.ID, j.Config.AdminSecretRef
		}
		endedID, endedRef := stored("adopted-password-ended")
		liveID, liveRef := stored("adopted-password-live")
		// The engine's end of the job, written as the engine writes it: to the store, not
		// through the API's cancel.
		ctx := context.Background()
		ended, err := w.st.GetJob(ctx, &store.GetJobParams{OrgID: orgA, ID: endedID})
		if err != nil {
			t.Fatal(err)
		}
		cancelled := job.StatusCancelled
		if _, err := w.st.UpdateJob(ctx, &store.UpdateJobParams{OrgID: orgA, ID: endedID, Version: ended.Version, Now: time.Now(), Status: &cancelled}); err != nil {
			t.Fatal(err)
		}
		endedOwner := w.vault.For(secrets.JobOwner(orgA, endedID))
		waitFor(t, time.Minute, "the ended job's secret to be swept", func() bool {
			_, err := endedOwner.Get(ctx, endedRef)
			return errors.Is(err, secrets.ErrNotFound)
		})
		if v, err := w.vault.For(secrets.JobOwner(orgA, liveID)).Get(ctx, liveRef); err != nil || v != "adopted-password-live" {
			t.Errorf("a live job's secret was swept too: %q, %v", v, err)
		}
	})
}
