// Package gcp proves the GCP families end to end through a running Groundwork server (over
// its HTTP API) against gcpfake, a fake project whose services are reached through the
// account's config.endpoints, as any GCP-compatible target is: jobs complete, a crashed server
// resumes from the recorded operations, DELETE leaves nothing of the job, and each class of
// Google refusal reaches the user with its fix and a Cloud Console link.
package gcp

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
