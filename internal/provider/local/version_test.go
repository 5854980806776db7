package local

import "testing"

func TestVersionMatches(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		requested, installed string
		want                 bool
	}{
		"any":           {"", "15.18", true},
		"major":         {"15", "15.18", true},
		"exact":         {"15.18", "15.18", true},
		"other major":   {"16", "15.18", false},
		"other minor":   {"15.4", "15.18", false},
		"prefix is not": {"1", "15.18", false},
		"too precise":   {"7.0.15.1", "7.0.15", false},
		"mariadb":       {"10.11", "10.11.19", true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := versionMatches(tc.requested, tc.installed); got != tc.want {
				t.Fatalf("versionMatches(%q, %q) = %v, want %v", tc.requested, tc.installed, got, tc.want)
			}
		})
	}
}
