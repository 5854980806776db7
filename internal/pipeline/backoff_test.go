package pipeline_test

import (
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/pipeline"
)

func TestBackoffDelay(t *testing.T) {
	t.Parallel()
	s := time.Second
	for _, tc := range []struct {
		name  string
		b     pipeline.Backoff
		first time.Duration
		n     int
		want  time.Duration
	}{
		{"none polls every first", pipeline.Backoff{}, 10 * s, 7, 10 * s},
		{"first wait", pipeline.Backoff{Factor: 2, Max: time.Minute}, 10 * s, 1, 10 * s},
		{"second wait", pipeline.Backoff{Factor: 2, Max: time.Minute}, 10 * s, 2, 20 * s},
		{"third wait", pipeline.Backoff{Factor: 1.5, Max: time.Minute}, 10 * s, 3, 22500 * time.Millisecond},
		{"capped", pipeline.Backoff{Factor: 2, Max: time.Minute}, 10 * s, 4, time.Minute},
		{"long waits stay capped", pipeline.Backoff{Factor: 2, Max: time.Minute}, 10 * s, 10_000, time.Minute},
		{"factor 1 is fixed", pipeline.Backoff{Factor: 1, Max: time.Minute}, 10 * s, 5, 10 * s},
		{"a max below first keeps first", pipeline.Backoff{Factor: 2, Max: s}, 10 * s, 5, 10 * s},
		{"no max keeps first", pipeline.Backoff{Factor: 2}, 10 * s, 5, 10 * s},
		{"count zero", pipeline.Backoff{Factor: 2, Max: time.Minute}, 10 * s, 0, 10 * s},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.b.Delay(tc.first, tc.n); got != tc.want {
				t.Fatalf("Delay(%s, %d) = %s, want %s", tc.first, tc.n, got, tc.want)
			}
		})
	}
}
