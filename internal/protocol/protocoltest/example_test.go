package protocoltest_test

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/protocol/protocoltest"
)

// TestExampleConforms builds examples/provisioner, starts it as a process and runs the suite.
func TestExampleConforms(t *testing.T) {
	t.Parallel()
	proc := protocoltest.StartExample(t, protocoltest.BuildExample(t), 200*time.Millisecond)
	protocoltest.Run(t, protocoltest.Target{
		BaseURL:         proc.URL(),
		Pair:            catalog.PairBucket,
		Settings:        json.RawMessage(`{"mode":"0750","description":"conformance"}`),
		FailingSettings: json.RawMessage(`{"mode":"rwx"}`),
		Drift: func(t testing.TB, app string) {
			if err := os.Chmod(proc.BucketDir(app), 0o700); err != nil {
				t.Fatalf("change the bucket behind the provisioner's back: %v", err)
			}
		},
	})
}
