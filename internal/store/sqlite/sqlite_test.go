package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/store/sqlite"
	"github.com/groundworkhq/groundwork/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "gw.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestMigrateTwiceIsHarmless(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "gw.db")
	for i := 0; i < 2; i++ {
		s, err := sqlite.Open(context.Background(), path)
		if err != nil {
			t.Fatalf("open #%d: %v", i+1, err)
		}
		s.Close()
	}
}

// The API's readers run beside each other; each reader released must stay open with its
// prepared statements for the next read.
func TestReadPoolKeepsIdleConnections(t *testing.T) {
	t.Parallel()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	storetest.KeepsIdle(t, s.ReadDB(), 4)
}
