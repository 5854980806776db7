package aws

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/testenv/moto"
)

// motoEnv is the test package's one moto server; tests isolate from each other by account ID
// (moto keys its state by the account of the credentials, which assume_role sets).
var motoEnv *moto.Harness

func TestMain(m *testing.M) {
	motoEnv = moto.NewHarness()
	code := m.Run()
	motoEnv.Close()
	os.Exit(code)
}

var accountSeq atomic.Int64

// newAccount returns a fresh moto account ID, so a test sees only its own resources.
func newAccount() string {
	return fmt.Sprintf("%012d", 100000000000+accountSeq.Add(1)+int64(os.Getpid()%1000)*1000)
}

// testProvider opens a provider for a fresh account in region through the real assume_role
// path: moto's STS hands out keys that belong to the role's account.
func testProvider(t *testing.T, region string) (*Provider, string) {
	t.Helper()
	endpoint := motoEnv.Endpoint(t)
	acct := newAccount()
	ctx := testCtx(t)
	p, err := Open(ctx, Account{
		AuthMethod: AuthAssumeRole, Region: region, Endpoint: endpoint,
		AccessKeyID: "testing", SecretAccessKey: "testing",
		RoleARN: "arn:aws:iam::" + acct + ":role/groundwork",
	})
	if err != nil {
		t.Fatalf("open provider: %v", err)
	}
	got, err := p.AccountID(ctx)
	if err != nil {
		t.Fatalf("caller identity: %v", err)
	}
	if got != acct {
		t.Fatalf("account = %s, want %s (moto did not isolate the account)", got, acct)
	}
	return p, acct
}

func testTags(t *testing.T) Tags {
	return Tags{OrgID: "org_test", JobID: "job_" + sanitize(t.Name())}
}

func sanitize(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			out = append(out, c)
		}
	}
	if len(out) > 40 {
		out = out[len(out)-40:]
	}
	return string(out)
}

func testCtx(t *testing.T) context.Context {
	// Generous: one moto process answers one call at a time for many parallel tests.
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
