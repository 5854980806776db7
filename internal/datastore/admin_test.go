package datastore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/provider/local/localtest"
)

var hostile = map[string]string{
	"injection": `x"; DROP DATABASE postgres; --`,
	"backtick":  "x`; DROP DATABASE mysql; --",
	"long":      strings.Repeat("a", 200),
	"unicode":   "café_ünï",
	"glob":      "a*",
	"reserved":  "postgres",
	"upper":     "Checkout",
	"empty":     "",
}

func TestValidateName(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		engine   datastore.Engine
		field    string
		name     string
		wantRule string
	}{
		"ok":                 {datastore.EnginePostgres, "name", "checkout", ""},
		"ok digits":          {datastore.EngineMySQL, "name", "orders_2", ""},
		"pg max 63":          {datastore.EnginePostgres, "name", strings.Repeat("a", 63), ""},
		"pg 64":              {datastore.EnginePostgres, "name", strings.Repeat("a", 64), datastore.RuleMaxLength},
		"mysql owner 33":     {datastore.EngineMySQL, "owner", strings.Repeat("a", 33), datastore.RuleMaxLength},
		"leading digit":      {datastore.EngineRedis, "name", "1abc", datastore.RulePattern},
		"leading underscore": {datastore.EngineRedis, "name", "_abc", datastore.RulePattern},
		"pg_ prefix":         {datastore.EnginePostgres, "owner", "pg_monitor", datastore.RuleReserved},
		"root":               {datastore.EngineMySQL, "owner", "root", datastore.RuleReserved},
		"default":            {datastore.EngineRedis, "owner", "default", datastore.RuleReserved},
		"information_schema": {datastore.EngineMySQL, "name", "information_schema", datastore.RuleReserved},
		"injection":          {datastore.EnginePostgres, "name", hostile["injection"], datastore.RulePattern},
		"200 chars":          {datastore.EngineMySQL, "name", hostile["long"], datastore.RuleMaxLength},
		"unicode":            {datastore.EnginePostgres, "owner", hostile["unicode"], datastore.RulePattern},
		"empty":              {datastore.EnginePostgres, "owner", "", datastore.RuleRequired},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := datastore.ValidateName(tc.engine, tc.field, tc.name)
			if tc.wantRule == "" {
				if err != nil {
					t.Fatalf("ValidateName(%q) = %v, want ok", tc.name, err)
				}
				return
			}
			var fe *datastore.FieldError
			if !errors.As(err, &fe) || fe.Rule != tc.wantRule || fe.Field != tc.field {
				t.Fatalf("ValidateName(%q) = %#v, want field %s rule %s", tc.name, err, tc.field, tc.wantRule)
			}
		})
	}
}

func TestCreateDropDatabase(t *testing.T) {
	t.Parallel()
	for _, e := range datastore.Engines {
		t.Run(string(e), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			srv, adminPW := localtest.StartServer(t, e)
			admin := srv.Admin(adminPW)
			pw := datastore.GeneratePassword()
			user := datastore.Conn{Engine: e, Host: srv.Host, Port: srv.Port, User: "checkout_app", Password: pw, Database: "checkout"}

			// Re-running is harmless, and a re-run with a new password makes that one current.
			if err := datastore.CreateDatabase(ctx, admin, "checkout", "checkout_app", datastore.GeneratePassword()); err != nil {
				t.Fatalf("CreateDatabase: %v", err)
			}
			for range 2 {
				if err := datastore.CreateDatabase(ctx, admin, "checkout", "checkout_app", pw); err != nil {
					t.Fatalf("CreateDatabase again: %v", err)
				}
			}
			if err := localtest.WriteRead(ctx, user); err != nil {
				t.Fatalf("owner cannot write and read: %v", err)
			}
			if e == datastore.EngineRedis {
				// The ACL user is confined to its prefix.
				other := user
				other.Database = "payments"
				if err := localtest.WriteRead(ctx, other); err == nil || !strings.Contains(err.Error(), "NOPERM") {
					t.Fatalf("write outside the prefix = %v, want NOPERM", err)
				}
			}

			// Hostile names are refused before anything reaches the server.
			for hname, bad := range hostile {
				for _, args := range [][2]string{{bad, "hostile_app"}, {"hostile_db", bad}} {
					err := datastore.CreateDatabase(ctx, admin, args[0], args[1], pw)
					var fe *datastore.FieldError
					if !errors.As(err, &fe) || fault.ClassOf(err) != job.ClassUserAction {
						t.Fatalf("%s: CreateDatabase(%q, %q) = %v, want a field error", hname, args[0], args[1], err)
					}
				}
			}
			if err := localtest.WriteRead(ctx, datastore.Conn{Engine: e, Host: srv.Host, Port: srv.Port, User: "hostile_app", Password: pw, Database: "hostile_db"}); err == nil {
				t.Fatal("a refused request created a working user")
			}

			for range 2 {
				if err := datastore.DropDatabase(ctx, admin, "checkout", "checkout_app"); err != nil {
					t.Fatalf("DropDatabase: %v", err)
				}
			}
			err := datastore.Check(ctx, user)
			if !datastore.IsAuthFailure(err) {
				t.Fatalf("owner connects after drop: %v", err)
			}
			if err := datastore.Check(ctx, admin); err != nil {
				t.Fatalf("admin broken after drop: %v", err)
			}
		})
	}
}
