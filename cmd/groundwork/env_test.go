package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// A duration comes from its environment variable unless its flag was given; a bad value is
// refused with the variable's name. (t.Setenv rules out t.Parallel here.)
func TestDurationFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name, env, args string
		want            time.Duration
		err             string
	}{
		{name: "neither", want: time.Minute},
		{name: "env", env: "2h", want: 2 * time.Hour},
		{name: "flag wins", env: "2h", args: "--ttl=3h", want: 3 * time.Hour},
		{name: "flag alone", args: "--ttl=4h", want: 4 * time.Hour},
		{name: "bad env", env: "two hours", err: "GW_TEST_TTL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GW_TEST_TTL", tc.env)
			var d time.Duration
			cmd := &cobra.Command{}
			cmd.Flags().DurationVar(&d, "ttl", time.Minute, "")
			if err := cmd.Flags().Parse(strings.Fields(tc.args)); err != nil {
				t.Fatal(err)
			}
			err := durationFromEnv(cmd, "ttl", "GW_TEST_TTL", &d)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil || d != tc.want {
				t.Fatalf("got %s, %v; want %s", d, err, tc.want)
			}
		})
	}
	// Without a flag the variable always applies.
	t.Setenv("GW_TEST_POLL", "5s")
	var poll time.Duration
	if err := durationFromEnv(&cobra.Command{}, "", "GW_TEST_POLL", &poll); err != nil || poll != 5*time.Second {
		t.Fatalf("no flag: %s, %v", poll, err)
	}
}
