package cloudinit

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestRenderGolden(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		opts      Options
		wantNginx bool
	}{
		"default": {opts: Options{JobID: "job_01TEST"}, wantNginx: true},
		"bare":    {opts: Options{JobID: "job_01TEST", Bare: true}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := Render(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Fatalf("rendered user data differs from %s (run with -update to accept):\n%s", path, got)
			}
			for _, must := range []string{"docker network create --driver bridge nginx-on-zop-net", SentinelPath, "systemctl enable --now docker"} {
				if !strings.Contains(got, must) {
					t.Errorf("missing %q", must)
				}
			}
			if strings.Contains(got, "groundwork-nginx") != tc.wantNginx {
				t.Errorf("nginx present = %v, want %v", !tc.wantNginx, tc.wantNginx)
			}
			// The sentinel is written after everything else.
			if strings.LastIndex(got, SentinelPath) < strings.LastIndex(got, "docker network") {
				t.Error("sentinel written before the network")
			}
		})
	}
}
