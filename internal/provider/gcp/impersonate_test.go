package gcp

import (
	"context"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/dnszone"
	"github.com/groundworkhq/groundwork/internal/provider/gcp/gcpfake"
)

// An impersonating account calls every service with the target account's token, which the
// base key's token minted through the IAM Credentials API; a base credential that may not
// act as the target is the user's to fix, with the role to grant.
func TestImpersonationActsAsTheTarget(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cloud := gcpfake.New(t)
	base := "ya29.base-credential"
	target := "deployer@" + gcpfake.Project + ".iam.gserviceaccount.com"
	open := func(t *testing.T) *Client {
		c, err := Open(ctx, Account{AuthMethod: AuthImpersonation, ServiceAccountKey: string(serviceAccountKey(t, base)),
			TargetServiceAccount: target, Region: "europe-west1", Endpoints: cloud.Endpoints(), Poll: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := open(t)
	if c.ProjectID != gcpfake.Project {
		t.Fatalf("project %q, want the base key's", c.ProjectID)
	}
	j := &job.Job{ID: "job_imp", OrgID: "org_imp", Family: job.FamilyDNSZone, Provider: Name}
	if _, err := (DNSZoneDriver{C: c}).EnsureZone(ctx, j, dnszone.Config{Name: "imp.example.org"}); err != nil {
		t.Fatal(err)
	}
	minted, dns := 0, 0
	for _, call := range cloud.Calls() {
		switch call.Service {
		case gcpfake.HostIAMCredentials:
			minted++
			if call.Token != base {
				t.Errorf("generateAccessToken carried %q, want the base credential's token", call.Token)
			}
		case gcpfake.HostDNS:
			dns++
			if call.Token != gcpfake.ImpersonatedToken(target) {
				t.Errorf("%s %s carried %q, want the target's token", call.Method, call.Path, call.Token)
			}
		}
	}
	if minted != 1 || dns == 0 {
		t.Fatalf("%d tokens minted for %d DNS calls; want one token, reused", minted, dns)
	}

	cloud.Deny(gcpfake.HostIAMCredentials, "/serviceAccounts/", "iam.serviceAccounts.getAccessToken")
	_, err := (DNSZoneDriver{C: open(t)}).EnsureZone(ctx, j, dnszone.Config{Name: "imp.example.org"})
	if fe := fault.As(err); fe == nil || fe.Class != job.ClassUserAction || fe.Code != "ImpersonationDenied" {
		t.Fatalf("a base credential that may not act as the target: %v, want user_action ImpersonationDenied", err)
	}
}
