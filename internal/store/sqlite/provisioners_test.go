package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/groundworkhq/groundwork/internal/protocol"
	"github.com/groundworkhq/groundwork/internal/protocol/protocoltest"
	"github.com/groundworkhq/groundwork/internal/store/sqlite"
)

// TestProvisionerStore holds the SQLite store to the promises every registry store keeps.
func TestProvisionerStore(t *testing.T) {
	t.Parallel()
	protocoltest.RunStore(t, func(t *testing.T) protocol.ProvisionerStore {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "gw.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
