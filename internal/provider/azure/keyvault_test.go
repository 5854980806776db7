package azure

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/provider/azure/azurefake"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/secrets/secretstest"
)

const testVault = "https://gw-test.vault.azure.net/"

func vaultClient(t *testing.T) (*Client, *azurefake.Cloud) {
	t.Helper()
	cloud := azurefake.New(t)
	c, err := Open(Account{AuthMethod: AuthNone, SubscriptionID: azurefake.Subscription, Location: "westeurope",
		ResourceGroup: "rg-kv", Endpoint: cloud.URL, Transport: azurefake.Transport(cloud.URL), KeyVaultURL: testVault})
	if err != nil {
		t.Fatal(err)
	}
	return c, cloud
}

// The Key Vault store keeps the contract every secret store does.
func TestKeyVaultConformance(t *testing.T) {
	t.Parallel()
	secretstest.Run(t, func(t *testing.T) secrets.SecretStore {
		c, _ := vaultClient(t)
		st, err := c.Secrets(&job.Job{ID: "job_01JKEYVAULTCONFORM", OrgID: "org_a"})
		if err != nil || st == nil {
			t.Fatalf("secrets: %v %v", st, err)
		}
		return st
	})
}

// A secret of the job's name that another job made is never overwritten; a deleted secret is
// purged, so nothing of it stays recoverable.
func TestKeyVaultOwnershipAndPurge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, cloud := vaultClient(t)
	mine, _ := c.Secrets(&job.Job{ID: "job_01JMINE", OrgID: "org_a"})
	theirs, _ := c.Secrets(&job.Job{ID: "job_01JTHEIRS", OrgID: "org_a"})
	ref, err := theirs.Put(ctx, "job_01JMINE/admin", "theirs")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mine.Put(ctx, "job_01JMINE/admin", "mine"); !errors.Is(err, errNotOurs) {
		t.Fatalf("overwriting another job's secret: %v; want refused", err)
	}
	if v, _ := theirs.Get(ctx, ref); v != "theirs" {
		t.Fatalf("the other job's secret now reads %q", v)
	}
	if !strings.HasPrefix(ref, "azkv:"+testVault+"secrets/job-01JMINE--admin") {
		t.Fatalf("reference %q", ref)
	}
	if err := theirs.Delete(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if left := cloud.VaultSecrets("gw-test"); len(left) != 0 {
		t.Fatalf("after delete the vault holds %+v; want it purged", left)
	}
}
