package postgres_test

import (
	"testing"

	"github.com/groundworkhq/groundwork/internal/protocol"
	"github.com/groundworkhq/groundwork/internal/protocol/protocoltest"
	"github.com/groundworkhq/groundwork/internal/testenv/pgtest"
)

// TestProvisionerStore holds the PostgreSQL store to the promises every registry store keeps;
// with several replicas sharing the database, only its unique key keeps a pair to one holder.
func TestProvisionerStore(t *testing.T) {
	t.Parallel()
	protocoltest.RunStore(t, func(t *testing.T) protocol.ProvisionerStore { return open(t, pgtest.NewDatabase(t)) })
}
