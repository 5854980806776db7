package local_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/provider/local"
	"github.com/groundworkhq/groundwork/internal/provider/local/localtest"
)

func TestServerLifecycle(t *testing.T) {
	t.Parallel()
	for _, e := range datastore.Engines {
		t.Run(string(e), func(t *testing.T) {
			t.Parallel()
			localtest.RequireEngine(t, e)
			ctx := context.Background()
			dataDir := localtest.DataDir(t)
			p, err := local.New(local.Options{DataDir: dataDir})
			if err != nil {
				t.Fatal(err)
			}
			pw := datastore.GeneratePassword()
			spec := local.ServerSpec{JobID: "job_" + string(e), Engine: e, AdminPassword: pw}
			s, err := p.Ensure(ctx, spec)
			if err != nil {
				t.Fatalf("Ensure: %v", err)
			}
			t.Cleanup(func() { _ = p.Delete(context.Background(), spec.JobID) })
			localtest.WaitReady(t, p, spec.JobID, pw)

			// Ensure again, and from a fresh provider over the same data dir (a Groundwork
			// restart): the same process is found, no second server starts.
			again, err := p.Ensure(ctx, spec)
			if err != nil || again.PID != s.PID || again.Port != s.Port {
				t.Fatalf("second Ensure = %+v, %v; want pid %d port %d", again, err, s.PID, s.Port)
			}
			p2, err := local.New(local.Options{DataDir: dataDir})
			if err != nil {
				t.Fatal(err)
			}
			restarted, err := p2.Ensure(ctx, spec)
			if err != nil || restarted.PID != s.PID {
				t.Fatalf("Ensure after restart = %+v, %v; want pid %d", restarted, err, s.PID)
			}

			// A wrong admin password is refused as needing the user, not waited on.
			if _, err := p.Ready(ctx, spec.JobID, datastore.GeneratePassword()); fault.ClassOf(err) != job.ClassUserAction {
				t.Fatalf("Ready with a wrong password = %v, want user_action", err)
			}

			// A server that died is started again on its data, on the same port.
			if err := syscall.Kill(s.PID, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			localtest.WaitGone(t, s.PID)
			// A killed PostgreSQL leaves its helpers running for a moment; one stands in here,
			// deterministically, as a process titled like them in the data dir. It must be
			// neither taken for the server nor started over.
			helper := lingeringHelper(t, filepath.Join(s.Dir, "data"), "postgres: checkpointer ")
			revived, err := p2.Ensure(ctx, spec)
			if localtest.Alive(helper) {
				t.Fatalf("Ensure started a server while the old server's helper (pid %d) was still in its data dir", helper)
			}
			if err != nil {
				t.Fatalf("Ensure after kill: %v", err)
			}
			if revived.PID == s.PID || revived.Port != s.Port {
				t.Fatalf("revived = %+v, want a new pid on port %d", revived, s.Port)
			}
			localtest.WaitReady(t, p2, spec.JobID, pw)

			if err := p2.Delete(ctx, spec.JobID); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			localtest.WaitGone(t, revived.PID)
			if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
				t.Fatalf("data dir %s still there: %v", s.Dir, err)
			}
			if err := p2.Delete(ctx, spec.JobID); err != nil {
				t.Fatalf("second Delete: %v", err)
			}
			// The admin password is nowhere on disk in clear.
			localtest.AssertNotOnDisk(t, dataDir, pw)
		})
	}
}

func TestEnsureRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	emptyBin := t.TempDir()
	cases := map[string]struct {
		opts     func(dataDir string) local.Options
		spec     local.ServerSpec
		wantCode string
		wantText string
	}{
		"missing postgres names the package": {
			opts:     func(d string) local.Options { return local.Options{DataDir: d, PostgresBinDir: emptyBin} },
			spec:     local.ServerSpec{JobID: "job_a", Engine: datastore.EnginePostgres, AdminPassword: datastore.GeneratePassword()},
			wantCode: "EngineNotInstalled", wantText: "postgresql",
		},
		"version not installed": {
			opts:     func(d string) local.Options { return local.Options{DataDir: d} },
			spec:     local.ServerSpec{JobID: "job_b", Engine: datastore.EngineRedis, Version: "99.1", AdminPassword: datastore.GeneratePassword()},
			wantCode: "VersionUnavailable", wantText: "99.1",
		},
		"unknown engine": {
			opts:     func(d string) local.Options { return local.Options{DataDir: d} },
			spec:     local.ServerSpec{JobID: "job_c", Engine: "oracle", AdminPassword: datastore.GeneratePassword()},
			wantCode: "UnsupportedEngine", wantText: "oracle",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if tc.spec.Engine.Valid() {
				localtest.RequireEngine(t, datastore.EngineRedis)
			}
			dataDir := t.TempDir()
			p, err := local.New(tc.opts(dataDir))
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Ensure(ctx, tc.spec)
			fe := fault.As(err)
			if fe == nil || fe.Class != job.ClassUserAction || fe.Code != tc.wantCode {
				t.Fatalf("Ensure = %v, want user_action %s", err, tc.wantCode)
			}
			if !strings.Contains(fe.Error()+fe.FixHint, tc.wantText) {
				t.Fatalf("error %q / hint %q does not mention %q", fe.Error(), fe.FixHint, tc.wantText)
			}
			entries, _ := os.ReadDir(filepath.Join(dataDir, "datastores"))
			for _, e := range entries {
				if e.IsDir() {
					t.Fatalf("a refused Ensure created %s", e.Name())
				}
			}
		})
	}
}

func TestVersionMatching(t *testing.T) {
	t.Parallel()
	localtest.RequireEngine(t, datastore.EngineRedis)
	ctx := context.Background()
	p, err := local.New(local.Options{DataDir: localtest.DataDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	pw := datastore.GeneratePassword()
	s, err := p.Ensure(ctx, local.ServerSpec{JobID: "job_v", Engine: datastore.EngineRedis, AdminPassword: pw})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Delete(context.Background(), "job_v") })
	major, _, _ := strings.Cut(s.Version, ".")
	for _, v := range []string{major, s.Version} {
		if _, err := p.Ensure(ctx, local.ServerSpec{JobID: "job_v", Engine: datastore.EngineRedis, Version: v, AdminPassword: pw}); err != nil {
			t.Errorf("version %q refused although %s is installed: %v", v, s.Version, err)
		}
	}
}

// lingeringHelper runs a short-lived process in dir whose command line reads title, as a
// server's helper process does, and reaps it when it exits.
func lingeringHelper(t *testing.T, dir, title string) int {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	cmd := &exec.Cmd{Path: sleep, Args: []string{title, "1"}, Dir: dir}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait() }()
	return cmd.Process.Pid
}
