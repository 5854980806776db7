package main

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
)

// sqliteURL is how both Groundwork's store and River's driver open the bench's SQLite file:
// the same pragmas, so neither gets a cheaper durability setting than the other.
func sqliteURL(path string) string {
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_txlock", "immediate")
	return "file:" + path + "?" + q.Encode()
}

// throwawayPostgres starts a PostgreSQL server from the machine's binaries with its stock
// durability settings (fsync and synchronous_commit on), in a temporary directory.
func throwawayPostgres(bin string) (adminURL string, pid int, stop func(), err error) {
	dir, err := os.MkdirTemp("", "gw-bench-pg-")
	if err != nil {
		return "", 0, nil, err
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 { // initdb refuses to run as root
		u, err := user.Lookup("postgres")
		if err != nil {
			return "", 0, nil, fmt.Errorf("running as root and no postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return "", 0, nil, err
		}
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", 0, nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", 0, nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	// Only where to listen is set: durability stays as initdb wrote it (fsync on,
	// synchronous_commit on, full_page_writes on).
	srv := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-h", "127.0.0.1",
		"-k", dir, "-c", "max_connections=200")
	srv.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	logf, _ := os.Create(filepath.Join(dir, "postgres.log"))
	srv.Stdout, srv.Stderr = logf, logf
	if err := srv.Start(); err != nil {
		os.RemoveAll(dir)
		return "", 0, nil, err
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = srv.Process.Signal(syscall.SIGINT)
			_, _ = srv.Process.Wait()
			os.RemoveAll(dir)
		})
	}
	adminURL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		db, _ := sql.Open("pgx", adminURL)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = db.PingContext(ctx)
		cancel()
		db.Close()
		if err == nil {
			return adminURL, srv.Process.Pid, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return "", 0, nil, fmt.Errorf("postgres not ready: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pgSettings reads the durability settings of the server under test, for the report.
func pgSettings(ctx context.Context, db *sql.DB) (string, error) {
	var fsync, sc string
	if err := db.QueryRowContext(ctx, `SELECT current_setting('fsync'), current_setting('synchronous_commit')`).Scan(&fsync, &sc); err != nil {
		return "", err
	}
	return "fsync=" + fsync + " synchronous_commit=" + sc, nil
}

// commitCeiling measures the database's raw rate of single-row committed updates: one
// connection in a loop (serial), and `workers` connections each on its own row (concurrent,
// where the database may group their commits).
func commitCeiling(ctx context.Context, db *sql.DB, workers int, d time.Duration) (serial, concurrent float64, err error) {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS bench_commit (id INTEGER PRIMARY KEY, n BIGINT NOT NULL)`); err != nil {
		return 0, 0, err
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM bench_commit`); err != nil {
		return 0, 0, err
	}
	for i := 0; i < workers; i++ {
		if _, err := db.ExecContext(ctx, `INSERT INTO bench_commit (id, n) VALUES ($1, 0)`, i); err != nil {
			return 0, 0, err
		}
	}
	run := func(conc int) (float64, error) {
		var wg sync.WaitGroup
		var total int64
		var mu sync.Mutex
		var firstErr error
		end := time.Now().Add(d)
		start := time.Now()
		for w := 0; w < conc; w++ {
			wg.Add(1)
			go func(id int) {
				defer wg.Done()
				var n int64
				for time.Now().Before(end) {
					if _, err := db.ExecContext(ctx, `UPDATE bench_commit SET n = n + 1 WHERE id = $1`, id); err != nil {
						mu.Lock()
						firstErr = err
						mu.Unlock()
						return
					}
					n++
				}
				mu.Lock()
				total += n
				mu.Unlock()
			}(w)
		}
		wg.Wait()
		return float64(total) / time.Since(start).Seconds(), firstErr
	}
	if serial, err = run(1); err != nil {
		return 0, 0, err
	}
	concurrent, err = run(workers)
	_, _ = db.ExecContext(ctx, `DROP TABLE bench_commit`)
	return serial, concurrent, err
}
