package local

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
)

// binaries are the executables one engine needs, resolved on this machine.
type binaries struct {
	server  string // postgres, mariadbd, redis-server
	init    string // initdb, mariadb-install-db; empty for redis
	version string // the installed version, e.g. "15.18"
}

// debianPackage names what to install when an engine's binaries are missing.
var debianPackage = map[datastore.Engine]string{
	datastore.EnginePostgres: "postgresql",
	datastore.EngineMySQL:    "mariadb-server",
	datastore.EngineRedis:    "redis-server",
}

func missing(e datastore.Engine, what string) error {
	pkg := debianPackage[e]
	return fault.UserAction(fmt.Errorf("%s is not installed on this machine (%s not found)", e, what),
		"EngineNotInstalled", fmt.Sprintf("Install the Debian package %q (apt-get install -y %s) on the Groundwork host.", pkg, pkg), "")
}

// lookup finds a binary on PATH or in the given directories (sbin is often off PATH for
// non-login shells, which is where Debian puts mariadbd).
func lookup(name string, dirs ...string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range dirs {
		if inDir(d, name) {
			return filepath.Join(d, name)
		}
	}
	return ""
}

// postgresBinDir returns the newest /usr/lib/postgresql/<major>/bin holding postgres and
// initdb; Debian keeps them off PATH so that several majors can sit side by side.
func postgresBinDir(root string) string {
	dirs, _ := filepath.Glob(filepath.Join(root, "*", "bin"))
	sort.Slice(dirs, func(i, j int) bool {
		return majorOf(dirs[i]) > majorOf(dirs[j])
	})
	for _, d := range dirs {
		if inDir(d, "postgres") && inDir(d, "initdb") {
			return d
		}
	}
	return ""
}

func inDir(dir, name string) bool {
	st, err := os.Stat(filepath.Join(dir, name))
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

func majorOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func (p *Provider) resolve(ctx context.Context, e datastore.Engine) (binaries, error) {
	var b binaries
	switch e {
	case datastore.EnginePostgres:
		dir := p.opts.PostgresBinDir
		if dir == "" {
			dir = postgresBinDir("/usr/lib/postgresql")
		}
		if dir == "" || !inDir(dir, "postgres") || !inDir(dir, "initdb") {
			return b, missing(e, "postgres and initdb under /usr/lib/postgresql/*/bin")
		}
		b.server, b.init = filepath.Join(dir, "postgres"), filepath.Join(dir, "initdb")
	case datastore.EngineMySQL:
		b.server = lookup("mariadbd", "/usr/sbin", "/usr/local/sbin")
		b.init = lookup("mariadb-install-db", "/usr/bin", "/usr/local/bin")
		if b.server == "" || b.init == "" {
			return b, missing(e, "mariadbd and mariadb-install-db")
		}
	case datastore.EngineRedis:
		b.server = lookup("redis-server", "/usr/bin", "/usr/local/bin")
		if b.server == "" {
			return b, missing(e, "redis-server")
		}
	default:
		return b, fault.UserAction(fmt.Errorf("engine %q is not served by the local provider", e),
			"UnsupportedEngine", "Use one of postgres, mysql, redis.", "")
	}
	out, err := exec.CommandContext(ctx, b.server, "--version").Output()
	if err != nil {
		return b, fault.System(fmt.Errorf("%s --version: %w", b.server, err))
	}
	b.version = versionRe.FindString(string(out))
	if b.version == "" {
		return b, fault.System(fmt.Errorf("cannot read a version from %q", strings.TrimSpace(string(out))))
	}
	return b, nil
}

var versionRe = regexp.MustCompile(`\d+\.\d+(\.\d+)?`)

// versionMatches reports whether the installed version satisfies the requested one: each part
// the user gave must equal the installed part ("15" and "15.18" match 15.18; "16" does not).
func versionMatches(requested, installed string) bool {
	if requested == "" {
		return true
	}
	want, have := strings.Split(requested, "."), strings.Split(installed, ".")
	if len(want) > len(have) {
		return false
	}
	for i := range want {
		if want[i] != have[i] {
			return false
		}
	}
	return true
}

func checkVersion(e datastore.Engine, requested string, b binaries) error {
	if versionMatches(requested, b.version) {
		return nil
	}
	served := string(e)
	if e == datastore.EngineMySQL {
		served = "mysql (MariaDB)"
	}
	return fault.UserAction(fmt.Errorf("%s version %s is requested but this machine has %s", served, requested, b.version),
		"VersionUnavailable", fmt.Sprintf("Request version %s (or leave version empty), or install that version's Debian package.", b.version), "")
}

// Installed returns the installed version of e's server, or a user_action error naming the
// Debian package when it is missing.
func (p *Provider) Installed(ctx context.Context, e datastore.Engine) (string, error) {
	b, err := p.resolve(ctx, e)
	return b.version, err
}
