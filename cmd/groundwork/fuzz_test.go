package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// The spec loader turns any file into a JSON-ready value or an error, never a panic; what it
// reads, the client can send.
func FuzzReadSpec(f *testing.F) {
	f.Add([]byte("spaceID: spc_1\nkind: datastore\nconfig:\n  engine: postgres\n"))
	f.Add([]byte(`{"spaceID":"spc_1","kind":"network"}`))
	f.Add([]byte("a: &x [*x]\n"))
	f.Fuzz(func(t *testing.T, spec []byte) {
		path := filepath.Join(t.TempDir(), "spec.yaml")
		if err := os.WriteFile(path, spec, 0o600); err != nil {
			t.Fatal(err)
		}
		v, err := readSpec(path)
		if err != nil {
			return
		}
		if _, err := json.Marshal(v); err != nil {
			t.Fatalf("a spec read from %q cannot be sent: %v", spec, err)
		}
	})
}
