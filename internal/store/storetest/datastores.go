package storetest

import (
	"context"
	"testing"

	"github.com/groundworkhq/groundwork/internal/store"
)

// datastoreTests are the conformance cases of the datastore records.
var datastoreTests = map[string]func(t *testing.T, s store.Store){
	"RepointDatastoreSecret": testRepointDatastoreSecret,
}

// A rotation moves every database and connection of one job from the old reference to the new
// one, endpoint and lookup column alike; other references and other jobs are left alone, and a
// second run changes nothing.
func testRepointDatastoreSecret(t *testing.T, s store.Store) {
	ctx := context.Background()
	st, ok := s.(interface {
		store.DatastoreRecords
		store.DatastoreJobs
		store.DatastoreSecretRefs
	})
	if !ok {
		t.Fatalf("%T does not keep datastore records", s)
	}
	const oldRef, newRef, otherRef = "local:sec_old", "local:sec_new", "local:sec_other"
	ep := func(ref string) store.DatastoreEndpoint {
		return store.DatastoreEndpoint{Engine: store.EnginePostgres, Host: "127.0.0.1", Port: 5432, User: "app", Database: "shop", SecretRef: ref}
	}
	for _, d := range []store.DatastoreDatabase{
		{ID: "db_1", JobID: "job_a", Name: "shop", Owner: "app", Status: store.DatabaseStatusReady, Endpoint: ep(oldRef), CreatedAt: t0, UpdatedAt: t0},
		{ID: "db_2", JobID: "job_a", Name: "blog", Owner: "blog", Status: store.DatabaseStatusReady, Endpoint: ep(otherRef), CreatedAt: t0, UpdatedAt: t0},
		{ID: "db_3", JobID: "job_b", Name: "shop", Owner: "app", Status: store.DatabaseStatusReady, Endpoint: ep(oldRef), CreatedAt: t0, UpdatedAt: t0},
	} {
		if _, _, err := st.InsertDatabase(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []store.DatastoreConnection{
		{ID: "conn_1", JobID: "job_a", DatabaseID: "db_1", Endpoint: ep(oldRef), CreatedAt: t0},
		{ID: "conn_2", JobID: "job_a", DatabaseID: "db_1", Name: "ops", Endpoint: ep(oldRef), CreatedAt: t0},
		{ID: "conn_3", JobID: "job_a", DatabaseID: "db_2", Endpoint: ep(otherRef), CreatedAt: t0},
		{ID: "conn_4", JobID: "job_b", DatabaseID: "db_3", Endpoint: ep(oldRef), CreatedAt: t0},
	} {
		if err := st.InsertConnection(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	n, err := st.RepointDatastoreSecret(ctx, "job_a", oldRef, newRef)
	if err != nil || n != 3 {
		t.Fatalf("RepointDatastoreSecret = %d, %v; want 3 records", n, err)
	}
	if n, err := st.RepointDatastoreSecret(ctx, "job_a", oldRef, newRef); err != nil || n != 0 {
		t.Fatalf("a second run = %d, %v; want nothing changed", n, err)
	}
	want := map[string]string{"db_1": newRef, "db_2": otherRef, "conn_1": newRef, "conn_2": newRef, "conn_3": otherRef}
	for id, ref := range want {
		var got store.DatastoreEndpoint
		if id[:3] == "db_" {
			d, err := st.GetDatabase(ctx, "job_a", id)
			if err != nil {
				t.Fatal(err)
			}
			got = d.Endpoint
		} else {
			c, err := st.GetConnection(ctx, "job_a", id)
			if err != nil {
				t.Fatal(err)
			}
			got = c.Endpoint
		}
		if got.SecretRef != ref || got.User != "app" || got.Port != 5432 {
			t.Errorf("%s endpoint = %+v, want the same with secretRef %s", id, got, ref)
		}
	}
	if c, err := st.GetConnection(ctx, "job_b", "conn_4"); err != nil || c.Endpoint.SecretRef != oldRef {
		t.Errorf("another job's connection = %+v, %v; want it left on the old reference", c.Endpoint, err)
	}
	// The lookup column moved with the endpoint: reveal finds the job by the new reference,
	// and only the other job by the old one.
	if j, err := st.SecretJob(ctx, newRef); err != nil || j != "job_a" {
		t.Errorf("SecretJob(new) = %q, %v", j, err)
	}
	if j, err := st.SecretJob(ctx, oldRef); err != nil || j != "job_b" {
		t.Errorf("SecretJob(old) = %q, %v; want only job_b left on it", j, err)
	}
	if _, err := st.RepointDatastoreSecret(ctx, "job_a", newRef, newRef); err == nil {
		t.Error("repointing a reference onto itself was accepted")
	}
}
