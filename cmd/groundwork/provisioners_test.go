package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/protocol"
	"github.com/groundworkhq/groundwork/internal/protocol/protocoltest"
)

// The CLI registers the example provisioner (a real process), lists it after the built-in
// one, is refused a second holder for the pair with the holder named, and removes it.
func TestProvisionersCLI(t *testing.T) {
	t.Parallel()
	proc := protocoltest.StartExample(t, protocoltest.BuildExample(t), 0)
	srv := apptest.Start(t, app.Options{})
	out, err := run(t, srv.URL, srv.Token, "-o", "json", "provisioners", "register", "--name", "buckets",
		"--server", srv.URL, "--url", proc.URL(), "--pair", "managed-resource/bucket")
	if err != nil {
		t.Fatalf("register: %v\n%s", err, out)
	}
	var p protocol.Provisioner
	if err := json.Unmarshal([]byte(out), &p); err != nil || p.ID == "" {
		t.Fatalf("register printed %q: %v", out, err)
	}
	_, err = run(t, srv.URL, srv.Token, "provisioners", "register", "--name", "again", "--server", srv.URL, "--url", proc.URL(), "--pair", "managed-resource/bucket")
	if err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), p.ID) {
		t.Fatalf("second holder: %v, want 409 naming %s", err, p.ID)
	}
	if _, err := run(t, srv.URL, srv.Token, "provisioners", "register", "--name", "x", "--server", srv.URL, "--url", proc.URL(), "--pair", "bucket"); err == nil || !strings.Contains(err.Error(), "--pair") {
		t.Fatalf("a pair without its category: %v, want the flag named", err)
	}
	out, err = run(t, srv.URL, srv.Token, "provisioners", "list")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], "(built-in)") || !strings.Contains(lines[2], p.ID) || !strings.Contains(lines[2], "managed-resource/bucket") {
		t.Fatalf("list:\n%s", out)
	}
	// -o is honoured by a removal too: a script reads {id, status}, not a sentence.
	out, err = run(t, srv.URL, srv.Token, "-o", "json", "provisioners", "remove", p.ID)
	var removed struct{ ID, Status string }
	if err != nil || json.Unmarshal([]byte(out), &removed) != nil || removed.ID != p.ID || removed.Status != "removed" {
		t.Fatalf("remove -o json printed %q: %v", out, err)
	}
	if _, err := run(t, srv.URL, srv.Token, "provisioners", "get", p.ID); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("get after remove: %v", err)
	}
}
