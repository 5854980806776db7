// Package pgtest gives tests a real PostgreSQL: the server named by GROUNDWORK_TEST_POSTGRES_URL
// (the test command starts one), or else a throwaway server it starts from the machine's
// PostgreSQL binaries. Each call to NewDatabase creates a fresh database, so tests in parallel
// never see each other's rows.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
)

// EnvURL names the environment variable holding an admin URL of a running server.
const EnvURL = "GROUNDWORK_TEST_POSTGRES_URL"

// Server is a PostgreSQL server a test package uses.
type Server struct {
	AdminURL string
	stop     func()
}

var (
	once   sync.Once
	shared *Server
	errSrv error
)

// Shared returns the package's server, starting one on first use. A missing PostgreSQL skips
// the test, except under CI=true, where it fails: CI must have installed it.
func Shared(t testing.TB) *Server {
	t.Helper()
	once.Do(func() { shared, errSrv = start() })
	if errSrv != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL is required under CI: %v", errSrv)
		}
		t.Skipf("PostgreSQL not available: %v", errSrv)
	}
	return shared
}

// Stop stops a server this package started (call from TestMain after m.Run).
func Stop() {
	if shared != nil && shared.stop != nil {
		shared.stop()
	}
}

// NewDatabase creates an empty database for one test, dropped when the test ends, and returns
// its URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	srv := Shared(t)
	name := "gwtest_" + randHex(6)
	admin, err := sql.Open("pgx", srv.AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(`CREATE DATABASE ` + name); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		a, err := sql.Open("pgx", srv.AdminURL)
		if err != nil {
			return
		}
		defer a.Close()
		_, _ = a.Exec(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`)
	})
	u, err := url.Parse(srv.AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func start() (*Server, error) {
	if u := os.Getenv(EnvURL); u != "" {
		return &Server{AdminURL: u}, nil
	}
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "gw-pg-")
	if err != nil {
		return nil, err
	}
	cred, err := unprivileged(dir)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	srv := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-h", "127.0.0.1",
		"-k", dir, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=300")
	srv.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	logf, _ := os.Create(filepath.Join(dir, "postgres.log"))
	srv.Stdout, srv.Stderr = logf, logf
	if err := srv.Start(); err != nil {
		return nil, err
	}
	adminURL := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	stop := func() {
		_ = srv.Process.Signal(syscall.SIGINT)
		_, _ = srv.Process.Wait()
		os.RemoveAll(dir)
	}
	if err := waitReady(adminURL, 30*time.Second); err != nil {
		stop()
		return nil, err
	}
	return &Server{AdminURL: adminURL, stop: stop}, nil
}

// BinDir finds the newest installed PostgreSQL server binaries.
func BinDir() (string, error) {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(matches) == 0 {
		if p, err := exec.LookPath("postgres"); err == nil {
			return filepath.Dir(p), nil
		}
		return "", fmt.Errorf("no PostgreSQL server binaries (install Debian's postgresql package)")
	}
	sort.Slice(matches, func(i, k int) bool { return versionOf(matches[i]) > versionOf(matches[k]) })
	return filepath.Dir(matches[0]), nil
}

func versionOf(p string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(p))))
	return v
}

// unprivileged returns credentials PostgreSQL accepts (it refuses to run as root) and hands dir
// to that user.
func unprivileged(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		u, err = user.Lookup("nobody")
		if err != nil {
			return nil, fmt.Errorf("running as root and no postgres user: %w", err)
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitReady(u string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		db, err := sql.Open("pgx", u)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err = db.PingContext(ctx)
			cancel()
			db.Close()
			if err == nil {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not ready after %s: %w", d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
