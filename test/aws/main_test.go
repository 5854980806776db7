// Package aws proves the AWS families end to end through a running Groundwork server (app.Run
// in-process, over its HTTP API) against moto: jobs complete, DELETE tears everything down, VM
// operations apply to a live pool.
package aws

import (
	"os"
	"testing"

	"github.com/groundworkhq/groundwork/internal/testenv/moto"
)

// motoEnv is the package's moto servers; tests isolate from each other by account ID (moto
// keys its state by the account whose role the credentials assumed).
var motoEnv *moto.Harness

func TestMain(m *testing.M) {
	if os.Getenv(envServe) == "1" {
		os.Exit(serve())
	}
	// The accounts authenticate by assume_role from the SDK's default chain, as a server on an
	// instance would; here the chain finds these environment keys, which moto accepts.
	os.Setenv("AWS_ACCESS_KEY_ID", "testing")
	os.Setenv("AWS_SECRET_ACCESS_KEY", "testing")
	os.Unsetenv("AWS_PROFILE")
	motoEnv = moto.NewHarness()
	code := m.Run()
	motoEnv.Close()
	os.Exit(code)
}
