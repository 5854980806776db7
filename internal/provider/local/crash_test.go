package local_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/provider/local"
	"github.com/groundworkhq/groundwork/internal/provider/local/localtest"
)

// TestHelperEnsure is not a test: it is the "Groundwork" process the crash tests SIGKILL. It
// runs only when re-executed with GW_CRASH_HELPER set.
func TestHelperEnsure(t *testing.T) {
	if os.Getenv("GW_CRASH_HELPER") == "" {
		t.Skip("helper process only")
	}
	p, err := local.New(local.Options{DataDir: os.Getenv("GW_DATA_DIR")})
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.Ensure(context.Background(), local.ServerSpec{JobID: "job_crash",
		Engine: datastore.Engine(os.Getenv("GW_ENGINE")), AdminPassword: os.Getenv("GW_PW")})
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("started " + strconv.Itoa(s.PID) + "\n")
	select {} // wait to be killed
}

// serverCount counts live processes working in dataDir whose parent does not (servers, not
// PostgreSQL's own children).
func serverCount(t *testing.T, dataDir string) int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	in := map[int]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !localtest.Alive(pid) {
			continue
		}
		if cwd, _ := os.Readlink("/proc/" + e.Name() + "/cwd"); cwd == dataDir {
			b, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
			f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
			in[pid], _ = strconv.Atoi(f[1])
		}
	}
	n := 0
	for _, ppid := range in {
		if _, ok := in[ppid]; !ok {
			n++
		}
	}
	return n
}

func TestCrashDuringServerCreation(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		engine datastore.Engine
		// killWhen says when to SIGKILL the helper: while initialising, or once started.
		killWhen string
	}{
		"postgres during initdb":  {datastore.EnginePostgres, "init"},
		"postgres after start":    {datastore.EnginePostgres, "started"},
		"mysql during install-db": {datastore.EngineMySQL, "init"},
		"mysql after start":       {datastore.EngineMySQL, "started"},
		"redis after start":       {datastore.EngineRedis, "started"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			localtest.RequireEngine(t, tc.engine)
			dataDir := localtest.DataDir(t)
			pw := datastore.GeneratePassword()
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperEnsure$")
			cmd.Env = append(os.Environ(), "GW_CRASH_HELPER=1", "GW_DATA_DIR="+dataDir, "GW_ENGINE="+string(tc.engine), "GW_PW="+pw)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			jobData := filepath.Join(dataDir, "datastores", "job_crash", "data")
			if tc.killWhen == "init" {
				// Kill as soon as the init tool has written something.
				deadline := time.Now().Add(time.Minute)
				for {
					if entries, _ := os.ReadDir(jobData); len(entries) > 0 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("init never started")
					}
					time.Sleep(5 * time.Millisecond)
				}
			} else {
				sc := bufio.NewScanner(out)
				var said []string
				started := false
				for !started && sc.Scan() {
					started = strings.HasPrefix(sc.Text(), "started")
					said = append(said, sc.Text())
				}
				if !started {
					t.Fatalf("helper failed: %s", strings.Join(said, "\n"))
				}
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()

			// The restarted Groundwork completes the job with exactly one server.
			p, err := local.New(local.Options{DataDir: dataDir})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Delete(context.Background(), "job_crash") })
			var s local.Server
			deadline := time.Now().Add(time.Minute)
			for {
				// A server whose state was cut short may report a transient error once.
				s, err = p.Ensure(context.Background(), local.ServerSpec{JobID: "job_crash", Engine: tc.engine, AdminPassword: pw})
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("Ensure after crash: %v", err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			localtest.WaitReady(t, p, "job_crash", pw)
			realData, _ := filepath.EvalSymlinks(jobData)
			if n := serverCount(t, realData); n != 1 {
				t.Fatalf("%d server processes after the crash, want 1", n)
			}
			if _, err := p.Ensure(context.Background(), local.ServerSpec{JobID: "job_crash", Engine: tc.engine, AdminPassword: pw}); err != nil {
				t.Fatal(err)
			}
			if n := serverCount(t, realData); n != 1 {
				t.Fatalf("%d server processes after a second Ensure, want 1", n)
			}
			if err := p.Delete(context.Background(), "job_crash"); err != nil {
				t.Fatal(err)
			}
			localtest.WaitGone(t, s.PID)
		})
	}
}
