// Package localtest holds test helpers for code that runs local datastore servers.
package localtest

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/provider/local"
)

// RequireEngine skips the test when e's server binaries are missing, and fails it in CI
// (CI=true), where scripts/setup.d/20-datastores.sh installs them.
func RequireEngine(t *testing.T, e datastore.Engine) {
	t.Helper()
	p, err := local.New(local.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Installed(context.Background(), e); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s server not installed in CI: %v", e, err)
		}
		t.Skipf("%s server not installed: %v", e, err)
	}
}

// DataDir returns a temporary data dir that the postgres account can reach when the test runs
// as root (t.TempDir's parents are 0700).
func DataDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	if os.Geteuid() == 0 {
		for _, p := range []string{d, filepath.Dir(d)} {
			if err := os.Chmod(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	return d
}

// WaitReady polls Ready until the server answers, failing after a minute.
func WaitReady(t *testing.T, p *local.Provider, jobID, pw string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ok, err := p.Ready(context.Background(), jobID, pw)
		// A transient answer is waited out, as the engine retries it: on a loaded machine a
		// server just started may not yet be found as running.
		if err != nil && fault.ClassOf(err) != job.ClassTransient {
			t.Fatalf("Ready: %v", err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("server of %s not ready after a minute (last: %v)", jobID, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitGone polls until pid no longer runs (or is a zombie).
func WaitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for Alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still alive", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Alive reports whether pid runs and is not a zombie.
func Alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z'
}

// AssertNotOnDisk fails when any file under dir holds one of the values.
func AssertNotOnDisk(t *testing.T, dir string, values ...string) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		for _, v := range values {
			if v != "" && bytes.Contains(b, []byte(v)) {
				t.Errorf("%s holds a secret value in clear", p)
			}
		}
		return nil
	})
}

// StartServer starts a server for e in a fresh data dir and waits until it is ready; it is
// deleted when the test ends.
func StartServer(t *testing.T, e datastore.Engine) (local.Server, string) {
	t.Helper()
	RequireEngine(t, e)
	p, err := local.New(local.Options{DataDir: DataDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	pw := datastore.GeneratePassword()
	s, err := p.Ensure(context.Background(), local.ServerSpec{JobID: "job_test", Engine: e, AdminPassword: pw})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Delete(context.Background(), "job_test") })
	WaitReady(t, p, "job_test", pw)
	return s, pw
}

// WriteRead connects as c, writes a value and reads it back, returning the first error.
// For redis the key is "<c.Database>:greeting", inside the ACL user's allowed prefix.
func WriteRead(ctx context.Context, c datastore.Conn) error {
	switch c.Engine {
	case datastore.EnginePostgres:
		cfg, err := pgx.ParseConfig("")
		if err != nil {
			return err
		}
		cfg.Host, cfg.Port, cfg.User, cfg.Password, cfg.Database = c.Host, uint16(c.Port), c.User, c.Password, c.Database
		cfg.TLSConfig, cfg.Fallbacks = nil, nil
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return err
		}
		defer func() { _ = conn.Close(ctx) }()
		if _, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS greeting (v text)"); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, "INSERT INTO greeting VALUES ($1)", "hello"); err != nil {
			return err
		}
		var v string
		return conn.QueryRow(ctx, "SELECT v FROM greeting LIMIT 1").Scan(&v)
	case datastore.EngineMySQL:
		cfg := mysql.NewConfig()
		cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = c.User, c.Password, "tcp", net.JoinHostPort(c.Host, strconv.Itoa(c.Port)), c.Database
		connector, err := mysql.NewConnector(cfg)
		if err != nil {
			return err
		}
		db := sql.OpenDB(connector)
		defer func() { _ = db.Close() }()
		if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS greeting (v text)"); err != nil {
			return err
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO greeting VALUES (?)", "hello"); err != nil {
			return err
		}
		var v string
		return db.QueryRowContext(ctx, "SELECT v FROM greeting LIMIT 1").Scan(&v)
	case datastore.EngineRedis:
		rc := redis.NewClient(&redis.Options{Addr: net.JoinHostPort(c.Host, strconv.Itoa(c.Port)), Username: c.User, Password: c.Password, MaxRetries: -1, DisableIdentity: true})
		defer func() { _ = rc.Close() }()
		key := c.Database + ":greeting"
		if err := rc.Set(ctx, key, "hello", 0).Err(); err != nil {
			return err
		}
		return rc.Get(ctx, key).Err()
	}
	return fmt.Errorf("unknown engine %q", c.Engine)
}
