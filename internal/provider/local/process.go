package local

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
)

// findServer returns the pid of the live server whose working directory is dataDir (every
// engine's server chdirs into its data dir, and that survives process-title rewriting, unlike
// the command line). hint is checked first; otherwise /proc is scanned, which also finds a
// server started by a Groundwork that crashed before recording its pid. Helper processes in
// the same directory are never taken for the server: after a server is killed, PostgreSQL's
// backends outlive it for a moment, and one of them taken for the server made Ensure "reuse"
// a process that was about to exit.
func findServer(dataDir string, hint int) int {
	if hint > 0 && cwdIs(hint, dataDir) && isServer(hint) {
		return hint
	}
	var matches []int
	for _, pid := range procsIn(dataDir) {
		if isServer(pid) {
			matches = append(matches, pid)
		}
	}
	for _, pid := range matches {
		if ppid := parentOf(pid); !contains(matches, ppid) {
			return pid
		}
	}
	return 0
}

// procsIn lists the live processes working in dir: a server and any helpers it forked.
func procsIn(dir string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && cwdIs(pid, dir) {
			out = append(out, pid)
		}
	}
	return out
}

// isServer reports whether pid runs one of the server programs Groundwork starts, judged by
// the first word of its command line: PostgreSQL's helpers retitle themselves
// "postgres: checkpointer" and the like, redis's save children "redis-rdb-bgsave", while the
// servers keep their program's path there.
func isServer(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	first, _, _ := strings.Cut(string(b), "\x00")
	if f := strings.Fields(first); len(f) > 0 {
		switch filepath.Base(f[0]) {
		case "postgres", "mariadbd", "mysqld", "redis-server":
			return true
		}
	}
	return false
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// cwdIs reports whether pid is alive (not a zombie) and works in dir.
func cwdIs(pid int, dir string) bool {
	cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	if err != nil || cwd != dir {
		return false
	}
	return procState(pid) != 'Z'
}

func procStat(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	// The command name (field 2) may hold spaces; fields after its closing paren do not.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

func procState(pid int) byte {
	f := procStat(pid)
	if len(f) == 0 || f[0] == "" {
		return 'Z' // gone
	}
	return f[0][0]
}

func parentOf(pid int) int {
	f := procStat(pid)
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// credential returns the account PostgreSQL must run as: itself when Groundwork is not root,
// the configured unprivileged user when it is.
func (p *Provider) credential(e datastore.Engine) (*syscall.Credential, error) {
	if e != datastore.EnginePostgres || os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(p.opts.PostgresUser)
	if err != nil {
		return nil, fault.UserAction(fmt.Errorf("PostgreSQL refuses to run as root and user %q does not exist: %w", p.opts.PostgresUser, err),
			"PostgresUserMissing", "Install the Debian package postgresql (it creates the postgres user), or run Groundwork as a non-root user.", "")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func chownTree(dir string, c *syscall.Credential) error {
	if c == nil {
		return nil
	}
	return filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, int(c.Uid), int(c.Gid))
	})
}

func run(ctx context.Context, c *syscall.Credential, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	// Pdeathsig: an initdb left running by a killed Groundwork would keep writing into a
	// directory the next attempt clears.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", filepath.Base(name), err, errorLines(out))
	}
	return nil
}

// errorLines picks the lines of a tool's output that say what went wrong (MariaDB's tools end
// with a long help text after the actual error).
func errorLines(out []byte) string {
	var picked []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "ERROR") || strings.Contains(l, "FATAL") || strings.Contains(l, "error:") {
			picked = append(picked, strings.TrimSpace(l))
		}
	}
	if len(picked) == 0 {
		return lastLines(out, 5)
	}
	if len(picked) > 5 {
		picked = picked[:5]
	}
	return strings.Join(picked, " | ")
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

func tailLog(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "server.log"))
	if err != nil {
		return "(no log)"
	}
	return lastLines(b, 5)
}

func (p *Provider) initPostgres(ctx context.Context, dir, password string, bins binaries) error {
	cred, err := p.credential(datastore.EnginePostgres)
	if err != nil {
		return err
	}
	if err := chownTree(dir, cred); err != nil {
		return fmt.Errorf("hand %s to the postgres user: %w", dir, err)
	}
	// initdb reads the superuser password from a file; it lives only for initdb's run.
	pwfile := filepath.Join(dir, ".pwfile")
	if err := os.WriteFile(pwfile, []byte(password+"\n"), 0o600); err != nil {
		return fmt.Errorf("write password file: %w", err)
	}
	defer func() { _ = os.Remove(pwfile) }()
	if err := chownTree(pwfile, cred); err != nil {
		return fmt.Errorf("hand password file to postgres: %w", err)
	}
	err = run(ctx, cred, bins.init, "-D", filepath.Join(dir, "data"), "-U", "postgres", "--pwfile="+pwfile,
		"--auth=scram-sha-256", "--encoding=UTF8", "--locale=C", "--no-instructions")
	if err != nil && strings.Contains(err.Error(), "ermission denied") {
		return fault.UserAction(err, "DataDirNotReachable",
			"The postgres user must be able to reach the data dir: make its parent directories traversable (chmod o+x) or run Groundwork as a non-root user.", "")
	}
	return err
}

func (p *Provider) initMySQL(ctx context.Context, dir string, bins binaries) error {
	u, err := user.Current()
	if err != nil {
		return fmt.Errorf("current user: %w", err)
	}
	// A private tmpdir: concurrent bootstraps sharing /tmp collide on Aria temporary table
	// names and crash (signal 11 in ha_maria::drop_table). --skip-test-db: no anonymous users
	// and no world-writable test database.
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o700); err != nil {
		return fmt.Errorf("create tmpdir: %w", err)
	}
	return run(ctx, nil, bins.init, "--no-defaults", "--datadir="+filepath.Join(dir, "data"), "--tmpdir="+filepath.Join(dir, "tmp"),
		"--user="+u.Username, "--skip-test-db", "--auth-root-authentication-method=socket")
}

// initRedis writes the server's config and ACL file. The ACL file holds the admin password's
// SHA-256 only; redis ACL SAVE keeps that form for users created later.
func initRedis(dir string, port int, password string) error {
	if strings.ContainsAny(dir, "\"\n\\") {
		return fault.UserAction(fmt.Errorf("data dir %q holds characters redis.conf cannot quote", dir), "DataDirPath", "Use a data dir path without quotes, backslashes or newlines.", "")
	}
	sum := sha256.Sum256([]byte(password))
	acl := "user default on #" + hex.EncodeToString(sum[:]) + " ~* &* +@all\n"
	if err := os.WriteFile(filepath.Join(dir, "users.acl"), []byte(acl), 0o600); err != nil {
		return fmt.Errorf("write redis acl: %w", err)
	}
	conf := fmt.Sprintf("bind 127.0.0.1\nport %d\nprotected-mode yes\ndaemonize no\ndir \"%s\"\naclfile \"%s\"\nappendonly yes\nlogfile \"\"\n",
		port, filepath.Join(dir, "data"), filepath.Join(dir, "users.acl"))
	if err := os.WriteFile(filepath.Join(dir, "redis.conf"), []byte(conf), 0o600); err != nil {
		return fmt.Errorf("write redis config: %w", err)
	}
	return nil
}

// mysqlSocket returns where mariadbd puts its unix socket; unix socket paths are limited to
// 107 bytes, so a deep data dir falls back to a name in the temp dir.
func mysqlSocket(dir string) string {
	p := filepath.Join(dir, "mysqld.sock")
	if len(p) < 100 {
		return p
	}
	sum := sha256.Sum256([]byte(dir))
	return filepath.Join(os.TempDir(), "groundwork-mysqld-"+hex.EncodeToString(sum[:8])+".sock")
}

// mysqlInitSQL creates the TCP admin account. It reaches mariadbd through a pipe (init-file),
// so the password never sits in a file; the password alphabet was checked by CheckPassword,
// which is what makes the literal safe (the server offers no parameters here).
func mysqlInitSQL(password string) string {
	return "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '" + password + "';\n" +
		"ALTER USER 'root'@'127.0.0.1' IDENTIFIED BY '" + password + "';\n" +
		"GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;\n"
}

// start launches the server detached (own session, so a signal to Groundwork's process group
// does not reach it and it outlives Groundwork) and returns its pid.
func (p *Provider) start(ctx context.Context, dir string, spec ServerSpec, st state, bins binaries) (int, error) {
	data := filepath.Join(dir, "data")
	cred, err := p.credential(spec.Engine)
	if err != nil {
		return 0, err
	}
	var args []string
	var extra []*os.File
	switch spec.Engine {
	case datastore.EnginePostgres:
		args = []string{"-D", data, "-p", strconv.Itoa(st.Port), "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="}
	case datastore.EngineMySQL:
		u, err := user.Current()
		if err != nil {
			return 0, fmt.Errorf("current user: %w", err)
		}
		args = []string{"--no-defaults", "--datadir=" + data, "--tmpdir=" + filepath.Join(dir, "tmp"), "--port=" + strconv.Itoa(st.Port), "--bind-address=127.0.0.1",
			"--skip-name-resolve", "--socket=" + mysqlSocket(dir), "--pid-file=" + filepath.Join(dir, "mysqld.pid"), "--user=" + u.Username}
		if !st.AdminReady {
			r, w, err := os.Pipe()
			if err != nil {
				return 0, fmt.Errorf("pipe: %w", err)
			}
			defer func() { _ = r.Close() }()
			_, werr := w.WriteString(mysqlInitSQL(spec.AdminPassword))
			if err := errors.Join(werr, w.Close()); err != nil {
				return 0, fmt.Errorf("write init sql: %w", err)
			}
			extra = []*os.File{r}
			args = append(args, "--init-file=/dev/fd/3")
		}
	case datastore.EngineRedis:
		args = []string{filepath.Join(dir, "redis.conf")}
	}
	logf, err := os.OpenFile(filepath.Join(dir, "server.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return 0, fmt.Errorf("open server log: %w", err)
	}
	defer func() { _ = logf.Close() }()
	// Not CommandContext: the server must outlive the request that started it.
	cmd := exec.Command(bins.server, args...)
	cmd.Dir = data
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = extra
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: cred}
	if err := cmd.Start(); err != nil {
		return 0, fault.System(fmt.Errorf("start %s: %w", filepath.Base(bins.server), err))
	}
	// Reap the child if it exits while this process lives, so it does not linger as a zombie.
	go func() { _ = cmd.Wait() }()
	return cmd.Process.Pid, nil
}

// stopServer ends the server found for dataDir and waits until it is gone. PostgreSQL gets
// SIGINT (fast shutdown: SIGTERM would wait for clients to leave); the others SIGTERM. The
// whole session's process group is signalled so that PostgreSQL's children go too.
func stopServer(ctx context.Context, dataDir string, st state) error {
	pid := findServer(dataDir, st.PID)
	if pid == 0 {
		return nil
	}
	sig := syscall.SIGTERM
	if st.Engine == datastore.EnginePostgres {
		sig = syscall.SIGINT
	}
	_ = syscall.Kill(pid, sig)
	if waitGone(ctx, dataDir, 30*time.Second) {
		return nil
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	if waitGone(ctx, dataDir, 10*time.Second) {
		return nil
	}
	return fault.Transientf("server pid %d did not stop", pid)
}

// waitGone polls until no live process works in dataDir (the server and its helpers), or the
// deadline passes.
func waitGone(ctx context.Context, dataDir string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if len(procsIn(dataDir)) == 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
	return len(procsIn(dataDir)) == 0
}
