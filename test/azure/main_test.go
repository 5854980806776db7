// Package azure proves the Azure families end to end through a running Groundwork server
// (over its HTTP API) against azurefake, the arm* modules' fake servers with state: jobs
// complete, a crashed server resumes from the recorded operations, DELETE leaves nothing of
// the job, and each class of Azure refusal reaches the user with its fix.
package azure

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	if os.Getenv(envServe) == "1" {
		os.Exit(serve())
	}
	os.Exit(m.Run())
}
