package attack

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/datastore"
)

// Finding 1: an adopt request naming another organisation's secret by reference must not make
// the server read it, send it to a host of the caller's choosing, or delete it on cancel.
func TestAdoptCannotNameAnotherOrgsSecret(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, w *world) {
		const secret = "victim-secret-access-key-1"
		accID, ref := w.victimAccount(t, secret)
		// The host the attacker wants the password sent to; it counts who dials it.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		var dialled atomic.Int32
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				dialled.Add(1)
				_ = c.Close()
			}
		}()
		port := ln.Addr().(*net.TCPAddr).Port
		var sp struct {
			ID string `json:"id"`
		}
		w.must(t, w.editorB, "POST", "/api/spaces", `{"name":"loot","provider":"local","region":"local"}`, 201).Decode(t, &sp)
		for name, stolen := range map[string]string{
			"local reference":         ref,
			"secrets manager ARN":     "arn:aws:secretsmanager:eu-west-1:000000000000:secret:job_01HZZZZZZZZZZZZZZZZZZZZZZZ/admin-AbCdEf",
			"with a password as well": ref,
		} {
			cfg := map[string]any{"engine": "postgres", "host": "127.0.0.1", "port": port, "adminUser": "postgres", "adminSecretRef": stolen}
			if strings.HasPrefix(name, "with") {
				cfg["adminPassword"] = "decoy-password-1"
			}
			body, _ := json.Marshal(map[string]any{"spaceID": sp.ID, "kind": "datastore", "mode": "adopt", "config": cfg})
			w.refused(t, w.editorB, "POST", "/api/provisioning-jobs", string(body), 400, "config.adminSecretRef")
		}
		if n := w.listLen(t, w.editorB, "/api/provisioning-jobs"); n != 0 {
			t.Errorf("the attacker's org has %d jobs; a refused request must store none", n)
		}
		// Reveal by reference is also another org's secret: 404 (the attacker holds no reveal
		// right, so their admin tries).
		w.refused(t, w.adminB, "POST", "/api/secrets/reveal", `{"ref":"`+ref+`"}`, 404, "ref")
		w.accountSecretIntact(t, w.orgOf(t, w.adminA), accID, ref, secret)
		if n := dialled.Load(); n != 0 {
			t.Errorf("the attacker's host was dialled %d times", n)
		}
	})
}

// Finding 2: a cloud account naming another's secret (credentialsRef) and claiming to manage
// it (config.managedCredentials) must be refused, so deleting it cannot delete the secret.
func TestCloudAccountCannotClaimAnotherSecret(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, w *world) {
		const secret = "victim-secret-access-key-2"
		accID, ref := w.victimAccount(t, secret)
		orgA := w.orgOf(t, w.adminA)
		w.refused(t, w.editorB, "POST", "/api/cloud-accounts", `{"name":"mine","provider":"aws","region":"eu-west-1",
			"authMethod":"static_keys","credentialsRef":"`+ref+`","config":{"managedCredentials":true}}`, 400, "credentialsRef")
		w.refused(t, w.editorB, "POST", "/api/cloud-accounts", `{"name":"mine","provider":"local",
			"config":{"managedCredentials":true}}`, 400, "config.managedCredentials")
		// Even within A, an account may not name another account's secret.
		w.refused(t, w.adminA, "POST", "/api/cloud-accounts", `{"name":"twin","provider":"aws","region":"eu-west-1",
			"authMethod":"static_keys","credentialsRef":"`+ref+`"}`, 400, "credentialsRef")
		if n := w.listLen(t, w.editorB, "/api/cloud-accounts"); n != 0 {
			t.Errorf("the attacker's org has %d cloud accounts", n)
		}
		w.refused(t, w.editorB, "DELETE", "/api/cloud-accounts/"+accID, "", 404, "")
		w.accountSecretIntact(t, orgA, accID, ref, secret)
	})
}

// healthyRemote answers a provisioner's healthz, counting every other call it gets.
func healthyRemote(t *testing.T, calls *atomic.Int32) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			_, _ = w.Write([]byte(`{"status":"ok"}`))
			return
		}
		calls.Add(1)
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Finding 3: an Editor of another organisation can neither remove A's provisioner nor take
// A's pair: registrations belong to an organisation, and registering/removing is Admin's.
func TestProvisionerRegistryIsPerOrganisation(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, w *world) {
		var victimCalls, attackerCalls atomic.Int32
		victimURL, attackerURL := healthyRemote(t, &victimCalls), healthyRemote(t, &attackerCalls)
		pair := catalog.PairBucket
		reg := func(url string) string {
			return fmt.Sprintf(`{"name":"buckets","url":%q,"pairs":[{"kind":%q,"type":%q}]}`, url, pair.Kind, pair.Type)
		}
		var p struct {
			ID string `json:"id"`
		}
		w.must(t, w.adminA, "POST", "/api/provisioners", reg(victimURL), 201).Decode(t, &p)

		w.refused(t, w.editorB, "DELETE", "/api/provisioners/"+p.ID, "", 403, "")
		w.refused(t, w.adminB, "DELETE", "/api/provisioners/"+p.ID, "", 404, "")
		w.refused(t, w.adminB, "GET", "/api/provisioners/"+p.ID, "", 404, "")
		w.refused(t, w.editorB, "POST", "/api/provisioners", reg(attackerURL), 403, "")
		// B's admin may hold the same pair in B: it serves B's jobs only.
		w.must(t, w.adminB, "POST", "/api/provisioners", reg(attackerURL), 201)

		var got struct {
			URL string `json:"url"`
		}
		w.must(t, w.adminA, "GET", "/api/provisioners/"+p.ID, "", 200).Decode(t, &got)
		if got.URL != victimURL {
			t.Errorf("A's provisioner now points at %s", got.URL)
		}
		var list struct {
			Data []struct {
				ID, URL string
				Pairs   []catalog.Pair
			} `json:"data"`
		}
		w.must(t, w.adminA, "GET", "/api/provisioners", "", 200).Decode(t, &list)
		for _, x := range list.Data {
			for _, xp := range x.Pairs {
				if xp == pair && x.ID != p.ID {
					t.Errorf("A sees %s held by %s (%s)", pair, x.ID, x.URL)
				}
			}
		}
		// A's job on the pair is planned against A's provisioner, never B's.
		var sp struct {
			ID string `json:"id"`
		}
		w.must(t, w.adminA, "POST", "/api/spaces", `{"name":"s","provider":"local","region":"local"}`, 201).Decode(t, &sp)
		w.must(t, w.adminA, "POST", "/api/provisioning-jobs", `{"spaceID":"`+sp.ID+`","kind":"`+pair.String()+`","config":{"description":"b1"}}`, 201)
		if n := attackerCalls.Load(); n != 0 {
			t.Errorf("the attacker's provisioner got %d calls for A's job", n)
		}
	})
}

// Issue 20: a provisioner whose jobs are live is not removed unless forced.
func TestProvisionerWithLiveJobsIsNotRemoved(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, w *world) {
		var calls atomic.Int32
		url := healthyRemote(t, &calls)
		pair := catalog.PairBucket
		var p struct {
			ID string `json:"id"`
		}
		w.must(t, w.adminA, "POST", "/api/provisioners",
			fmt.Sprintf(`{"name":"buckets","url":%q,"pairs":[{"kind":%q,"type":%q}]}`, url, pair.Kind, pair.Type), 201).Decode(t, &p)
		var sp, j struct {
			ID string `json:"id"`
		}
		w.must(t, w.adminA, "POST", "/api/spaces", `{"name":"s","provider":"local","region":"local"}`, 201).Decode(t, &sp)
		w.must(t, w.adminA, "POST", "/api/provisioning-jobs", `{"spaceID":"`+sp.ID+`","kind":"`+pair.String()+`","draft":true,"config":{"description":"b1"}}`, 201).Decode(t, &j)
		r := w.call(t, w.adminA, "DELETE", "/api/provisioners/"+p.ID, "")
		if r.Status != 409 || !strings.Contains(string(r.Raw), j.ID) {
			t.Fatalf("remove with a live job: %d %s; want 409 naming %s", r.Status, r.Raw, j.ID)
		}
		w.must(t, w.adminA, "GET", "/api/provisioners/"+p.ID, "", 200)
		w.refused(t, w.adminA, "DELETE", "/api/provisioners/"+p.ID+"?force=maybe", "", 400, "force")
		w.must(t, w.adminA, "DELETE", "/api/provisioners/"+p.ID+"?force=true", "", 204)
		w.refused(t, w.adminA, "GET", "/api/provisioners/"+p.ID, "", 404, "")
	})
}

// Finding 5: team:update on one team is not a way to add the organisation's other spaces to
// it (which would widen every grant scoped to the team).
func TestTeamUpdateCannotWidenItsSpaces(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, w *world) {
		var s1, s2, team, role struct {
			ID string `json:"id"`
		}
		w.must(t, w.adminA, "POST", "/api/spaces", `{"name":"s1","provider":"local","region":"local"}`, 201).Decode(t, &s1)
		w.must(t, w.adminA, "POST", "/api/spaces", `{"name":"s2","provider":"local","region":"local"}`, 201).Decode(t, &s2)
		w.must(t, w.adminA, "POST", "/api/teams", `{"name":"t","spaceIDs":["`+s1.ID+`"]}`, 201).Decode(t, &team)
		w.must(t, w.adminA, "POST", "/api/roles", `{"name":"team-keeper","policies":["team:view","team:update","space:view"]}`, 201).Decode(t, &role)
		tok := w.userToken(t, w.adminA, "keeper@a.example.com", "")
		w.must(t, w.adminA, "POST", "/api/role-assignments", `{"email":"keeper@a.example.com","roleID":"`+role.ID+`","scope":"team:`+team.ID+`"}`, 201)

		w.refused(t, tok, "PATCH", "/api/teams/"+team.ID, `{"spaceIDs":["`+s1.ID+`","`+s2.ID+`"]}`, 403, "spaceIDs[1]")
		var got struct {
			SpaceIDs []string `json:"spaceIDs"`
		}
		w.must(t, w.adminA, "GET", "/api/teams/"+team.ID, "", 200).Decode(t, &got)
		if len(got.SpaceIDs) != 1 || got.SpaceIDs[0] != s1.ID {
			t.Errorf("team spaces are now %v", got.SpaceIDs)
		}
		// Renaming, or keeping the spaces it has, is still the keeper's to do.
		w.must(t, tok, "PATCH", "/api/teams/"+team.ID, `{"name":"renamed","spaceIDs":["`+s1.ID+`"]}`, 200)
		// The org's admin may add any space.
		w.must(t, w.adminA, "PATCH", "/api/teams/"+team.ID, `{"spaceIDs":["`+s1.ID+`","`+s2.ID+`"]}`, 200)
	})
}

// Finding 4: a database request may not name the server's admin login or any login that
// Groundwork did not create, which would reset its password (Groundwork would lose its own
// admin login).
func TestDatabaseOwnerCannotTakeOverALogin(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, w *world) {
		var sp, j struct {
			ID string `json:"id"`
		}
		w.must(t, w.adminA, "POST", "/api/spaces", `{"name":"db","provider":"local","region":"local"}`, 201).Decode(t, &sp)
		w.must(t, w.adminA, "POST", "/api/provisioning-jobs", `{"spaceID":"`+sp.ID+`","kind":"datastore","config":{"engine":"postgres"}}`, 201).Decode(t, &j)
		var jr struct {
			Status string          `json:"status"`
			Infra  json.RawMessage `json:"infra"`
		}
		waitFor(t, 3*time.Minute, "the datastore job to complete", func() bool {
			w.must(t, w.adminA, "GET", "/api/provisioning-jobs/"+j.ID, "", 200).Decode(t, &jr)
			if jr.Status == "failed" || jr.Status == "cancelled" {
				t.Fatalf("datastore job %s", jr.Status)
			}
			return jr.Status == "completed"
		})
		var infra map[string]json.RawMessage
		_ = json.Unmarshal(jr.Infra, &infra)
		var ep datastore.Endpoint
		if err := json.Unmarshal(infra[datastore.InfraConnectionKey], &ep); err != nil || ep.User == "" {
			t.Fatalf("job records no admin endpoint: %s", jr.Infra)
		}
		base := "/api/provisioning-jobs/" + j.ID + "/databases"
		w.refused(t, w.adminA, "POST", base, `{"name":"grab","owner":"`+ep.User+`"}`, 400, "owner")
		w.refused(t, w.adminA, "POST", base, `{"name":"grab2","owner":"postgres"}`, 400, "owner")
		if n := w.listLen(t, w.adminA, base); n != 0 {
			t.Errorf("%d database records after refused requests", n)
		}
		// Groundwork's admin login still works with the password it keeps.
		var conn datastore.Connection
		w.must(t, w.adminA, "POST", "/api/provisioning-jobs/"+j.ID+"/connections", "", 201).Decode(t, &conn)
		var rv struct {
			Value string `json:"value"`
		}
		w.must(t, w.adminA, "POST", "/api/secrets/reveal", `{"ref":"`+conn.Endpoint.SecretRef+`"}`, 200).Decode(t, &rv)
		admin := datastore.Conn{Engine: ep.Engine, Host: ep.Host, Port: ep.Port, User: ep.User, Password: rv.Value}
		if err := datastore.Check(context.Background(), admin); err != nil {
			t.Errorf("Groundwork's admin login no longer works: %v", err)
		}

		// Logins that exist on the server but that Groundwork did not create: an application's,
		// and the admin of the same server adopted as a second job.
		const legacyPW, dbaPW = "LegacyPassword0123456789", "DbaPassword0123456789AB"
		pgExec(t, admin, "CREATE ROLE legacy_app LOGIN PASSWORD '"+legacyPW+"'")
		pgExec(t, admin, "CREATE ROLE dba_admin LOGIN SUPERUSER PASSWORD '"+dbaPW+"'")
		w.refused(t, w.adminA, "POST", base, `{"name":"grab3","owner":"legacy_app"}`, 400, "owner")
		var adopted struct {
			ID string `json:"id"`
		}
		w.must(t, w.adminA, "POST", "/api/provisioning-jobs", fmt.Sprintf(`{"spaceID":%q,"kind":"datastore","mode":"adopt",
			"config":{"engine":"postgres","host":%q,"port":%d,"adminUser":"dba_admin","adminPassword":%q}}`, sp.ID, ep.Host, ep.Port, dbaPW), 201).Decode(t, &adopted)
		waitFor(t, 3*time.Minute, "the adopt job to complete", func() bool {
			w.must(t, w.adminA, "GET", "/api/provisioning-jobs/"+adopted.ID, "", 200).Decode(t, &jr)
			if jr.Status == "failed" {
				t.Fatalf("adopt job failed: %s", jr.Infra)
			}
			return jr.Status == "completed"
		})
		w.refused(t, w.adminA, "POST", "/api/provisioning-jobs/"+adopted.ID+"/databases", `{"name":"grab4","owner":"dba_admin"}`, 400, "owner")
		w.refused(t, w.adminA, "POST", "/api/provisioning-jobs/"+adopted.ID+"/databases", `{"name":"grab5","owner":"legacy_app"}`, 400, "owner")
		legacy := datastore.Conn{Engine: ep.Engine, Host: ep.Host, Port: ep.Port, User: "legacy_app", Password: legacyPW}
		if err := datastore.Check(context.Background(), legacy); err != nil {
			t.Errorf("the application's login no longer works: %v", err)
		}
		dba := datastore.Conn{Engine: ep.Engine, Host: ep.Host, Port: ep.Port, User: "dba_admin", Password: dbaPW}
		if err := datastore.Check(context.Background(), dba); err != nil {
			t.Errorf("the adopted server's admin login no longer works: %v", err)
		} else if !pgSuper(t, dba) {
			t.Error("the adopted server's admin lost its attributes")
		}
		// A new owner is still fine, and the same request again answers the same database.
		w.must(t, w.adminA, "POST", base, `{"name":"app","owner":"app_owner"}`, 201)
		w.must(t, w.adminA, "POST", base, `{"name":"app","owner":"app_owner"}`, 200)
		w.must(t, w.adminA, "DELETE", "/api/provisioning-jobs/"+j.ID, "", 202)
		waitFor(t, 3*time.Minute, "the datastore job to be deleted", func() bool {
			w.must(t, w.adminA, "GET", "/api/provisioning-jobs/"+j.ID, "", 200).Decode(t, &jr)
			return jr.Status == "deleted"
		})
	})
}

func pgConnect(t *testing.T, c datastore.Conn) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Host, cfg.Port, cfg.User, cfg.Password, cfg.Database = c.Host, uint16(c.Port), c.User, c.Password, "postgres"
	cfg.TLSConfig, cfg.Fallbacks = nil, nil
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("connect as %s: %v", c.User, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func pgExec(t *testing.T, c datastore.Conn, q string) {
	t.Helper()
	if _, err := pgConnect(t, c).Exec(context.Background(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func pgSuper(t *testing.T, c datastore.Conn) bool {
	t.Helper()
	var super bool
	if err := pgConnect(t, c).QueryRow(context.Background(), "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super); err != nil {
		t.Fatal(err)
	}
	return super
}
