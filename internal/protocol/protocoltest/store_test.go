package protocoltest_test

import (
	"testing"

	"github.com/groundworkhq/groundwork/internal/protocol"
	"github.com/groundworkhq/groundwork/internal/protocol/protocoltest"
)

func TestMemoryStore(t *testing.T) {
	t.Parallel()
	protocoltest.RunStore(t, func(*testing.T) protocol.ProvisionerStore { return protocol.NewMemoryStore() })
}
