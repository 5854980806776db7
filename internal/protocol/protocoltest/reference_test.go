package protocoltest_test

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/protocol"
	"github.com/groundworkhq/groundwork/internal/protocol/protocoltest"
)

// TestReferenceConforms runs the suite against the in-process reference provisioner served by
// protocol.Server, which also proves the server's part: decoding, dispatch, status codes.
func TestReferenceConforms(t *testing.T) {
	t.Parallel()
	pair := catalog.Pair{Kind: catalog.CategoryConsumedResource, Type: "reference"}
	ref := protocoltest.NewReference(pair, 2)
	srv := httptest.NewServer(protocol.NewServer(ref.Backend(), protocol.ServerOptions{Name: "reference"}))
	t.Cleanup(srv.Close)
	protocoltest.Run(t, protocoltest.Target{
		BaseURL:         srv.URL,
		Pair:            pair,
		Settings:        json.RawMessage(`{"size":3}`),
		FailingSettings: json.RawMessage(`{"fail":"the reference was told to fail"}`),
		Drift:           func(_ testing.TB, app string) { ref.Tamper(app) },
	})
}
