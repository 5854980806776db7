package serverproc

import (
	"encoding/json"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/groundworkhq/groundwork/internal/app"
)

func TestMain(m *testing.M) {
	Main(m, func(o *app.Options) error {
		o.Workers = 1
		return nil
	})
}

// A child answers with its token and refuses a wrong one; a space it stored is there after a
// SIGKILL and restart on the same data dir, and the kill is reported; Stop ends it gracefully
// and its log holds what the server wrote.
func TestKillRestartStop(t *testing.T) {
	t.Parallel()
	var killed []int
	p := Start(t, Options{Killed: func(pid int) { killed = append(killed, pid) }})
	if st, raw := p.Call(t, "POST", "/api/spaces", map[string]string{"name": "kept", "provider": "local", "region": "local"}); st != http.StatusCreated {
		t.Fatalf("create space: %d %s", st, raw)
	}
	if st, _ := p.CallAs(t, "not-the-token", "GET", "/api/spaces", nil); st != http.StatusUnauthorized {
		t.Fatalf("wrong token answered %d, want 401", st)
	}

	first := p.Pid()
	q := p.Restart()
	select {
	case <-p.Done():
	default:
		t.Fatal("the first server still runs after Restart")
	}
	if len(killed) != 1 || killed[0] != first {
		t.Fatalf("killed = %v, want [%d]", killed, first)
	}
	if q.Pid() == first || q.Token != p.Token {
		t.Fatalf("restart: pid %d (was %d), same token %v", q.Pid(), first, q.Token == p.Token)
	}
	st, raw := q.Call(t, "GET", "/api/spaces", nil)
	var list struct {
		Data []struct{ Name string } `json:"data"`
	}
	if err := json.Unmarshal(raw, &list); st != http.StatusOK || err != nil || len(list.Data) != 1 || list.Data[0].Name != "kept" {
		t.Fatalf("spaces after restart: %d %s (%v)", st, raw, err)
	}

	q.Stop()
	select {
	case <-q.Done():
	default:
		t.Fatal("Stop returned before the server exited")
	}
	if q.cmd.ProcessState.Sys().(syscall.WaitStatus).Signaled() {
		t.Fatalf("Stop killed the server: %v\n%s", q.cmd.ProcessState, q.Log())
	}
	if len(killed) != 1 {
		t.Fatalf("Stop reported a kill: %v", killed)
	}
	if !strings.Contains(q.Log(), "groundwork serving") {
		t.Fatalf("log lacks the serving line:\n%s", q.Log())
	}
}

// A frozen child is killed all the same.
func TestKillFrozen(t *testing.T) {
	t.Parallel()
	p := Start(t, Options{})
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	p.Kill()
	select {
	case <-p.Done():
	default:
		t.Fatal("Kill returned before the process was gone")
	}
}
