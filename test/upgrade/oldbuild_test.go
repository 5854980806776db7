package upgrade

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// oldServer returns a server binary of an earlier commit: the test binary of its test/chaos
// package, whose TestMain (serverproc.Main) serves the same "test" family this package does.
// It is built from git history once and kept under .cache/oldbuild/<commit>, so CI builds it
// once per commit. Without the history the test cannot prove anything: it fails under CI=true
// and skips elsewhere.
func oldServer(t *testing.T, commit string) string {
	t.Helper()
	fail := t.Skipf
	if os.Getenv("CI") == "true" {
		fail = t.Fatalf
	}
	git := func(args ...string) (string, error) {
		out, err := exec.Command("git", args...).Output()
		return strings.TrimSpace(string(out)), err
	}
	root, err := git("rev-parse", "--show-toplevel")
	if err != nil {
		fail("no git work tree to build the old release from: %v", err)
	}
	full, err := git("-C", root, "rev-parse", "--verify", commit+"^{commit}")
	if err != nil {
		fail("commit %s is not in the git history (a shallow clone?); fetch it: %v", commit, err)
	}
	bin := filepath.Join(root, ".cache", "oldbuild", full, "chaos.test")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	src := t.TempDir()
	archive := exec.Command("sh", "-c", `git -C "$1" archive --format=tar "$2" | tar -x -C "$3"`, "sh", root, full, src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", full, err, out)
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := bin + ".tmp-" + filepath.Base(src)
	build := exec.Command("go", "test", "-c", "-o", tmp, "./test/chaos")
	build.Dir = src
	var out bytes.Buffer
	build.Stdout, build.Stderr = &out, &out
	t.Logf("building the server of %s (once; cached at %s)", full[:12], bin)
	if err := build.Run(); err != nil {
		_ = os.Remove(tmp)
		t.Fatalf("build the old release: %v\n%s", err, out.String())
	}
	// The rename makes the cached binary appear whole; a concurrent build's rename wins equally.
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}
