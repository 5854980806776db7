package datastore_test

import (
	"context"
	"testing"

	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/provider/local/localtest"
)

// SetOwnPassword on each engine's admin login: afterwards the old password is refused, the new
// one works, and running it again with the new password (a re-run after a crash) is harmless.
func TestSetOwnPassword(t *testing.T) {
	t.Parallel()
	for _, e := range datastore.Engines {
		t.Run(string(e), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			srv, oldPW := localtest.StartServer(t, e)
			newPW := datastore.GeneratePassword()
			if err := datastore.SetOwnPassword(ctx, srv.Admin(oldPW), newPW); err != nil {
				t.Fatalf("SetOwnPassword: %v", err)
			}
			if err := datastore.Check(ctx, srv.Admin(oldPW)); err == nil || !datastore.IsAuthFailure(err) {
				t.Fatalf("the old password after the change: %v, want an auth failure", err)
			}
			if err := datastore.SetOwnPassword(ctx, srv.Admin(newPW), newPW); err != nil {
				t.Fatalf("SetOwnPassword again: %v", err)
			}
			if err := datastore.Check(ctx, srv.Admin(newPW)); err != nil {
				t.Fatalf("the new password: %v", err)
			}
			if err := datastore.SetOwnPassword(ctx, srv.Admin(newPW), "bad'pw"); err == nil {
				t.Fatal("a password outside the checked alphabet was sent to the server")
			}
		})
	}
}
