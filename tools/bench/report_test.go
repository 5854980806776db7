package main

import (
	"strings"
	"testing"
)

func TestGrowth(t *testing.T) {
	t.Parallel()
	pts := func(rates ...float64) []ScalePoint {
		var out []ScalePoint
		for i, r := range rates {
			out = append(out, ScalePoint{Workers: 1 << (2 * i), Groundwork1: Throughput{JobsPerSec: r}})
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		rates []float64
		want  float64
	}{
		{"grows", []float64{1000, 3000, 9000}, 3},
		{"levels off at the database's limit", []float64{1000, 4000, 4000}, 1},
		{"falls back", []float64{1000, 4000, 2000}, 0.5},
		{"falls below an earlier best, not only the last", []float64{1000, 4000, 3800, 3600}, 0.9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := growth(pts(tc.rates...)); got != tc.want {
				t.Errorf("growth(%v) = %v, want %v", tc.rates, got, tc.want)
			}
		})
	}
}

func TestCheckScalingWithoutRounds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		rates []float64
		met   bool
	}{
		{"grows", []float64{800, 3000, 12000}, true},
		{"more workers do less", []float64{248, 223}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := &DBReport{Database: "postgres"}
			for i, r := range tc.rates {
				d.Scaling = append(d.Scaling, ScalePoint{Workers: 8 * (i + 1), Groundwork1: Throughput{JobsPerSec: r}})
			}
			rep := &Report{Databases: []*DBReport{d}}
			rep.check()
			var found bool
			for _, tg := range rep.Targets {
				if strings.Contains(tg.Name, "ratio to River") {
					t.Errorf("a run without rounds checked %q", tg.Name)
				}
				if strings.Contains(tg.Name, "workers, worst over best at fewer") {
					found = true
					if tg.Met != tc.met {
						t.Errorf("%s: met = %v, want %v (got %.2f)", tg.Name, tg.Met, tc.met, tg.Got)
					}
				}
			}
			if !found {
				t.Fatalf("no scaling target among %+v", rep.Targets)
			}
		})
	}
}
