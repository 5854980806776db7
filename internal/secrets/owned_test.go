package secrets_test

import (
	"context"
	"errors"
	"testing"

	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/secrets/secretstest"
)

// A reference answers only to the owner it was stored for: another org, or another object of
// the same org, finds nothing, cannot replace it, and deleting it deletes nothing.
func TestVaultAnswersOnlyTheOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	local, err := secrets.OpenLocal(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	v := secretstest.Vault(local)
	owner := secrets.Owner{OrgID: "org_a", Kind: secrets.OwnerAccount, ID: "acc_1"}
	ref, err := v.For(owner).Put(ctx, "cloud-account-acc_1", "keys")
	if err != nil {
		t.Fatal(err)
	}
	others := map[string]secrets.Owner{
		"another org":            {OrgID: "org_b", Kind: secrets.OwnerAccount, ID: "acc_1"},
		"another object":         {OrgID: "org_a", Kind: secrets.OwnerAccount, ID: "acc_2"},
		"another kind of object": {OrgID: "org_a", Kind: secrets.OwnerJob, ID: "acc_1"},
		"no owner":               {},
	}
	for name, o := range others {
		t.Run(name, func(t *testing.T) {
			s := v.For(o)
			if _, err := s.Get(ctx, ref); !errors.Is(err, secrets.ErrNotFound) {
				t.Errorf("Get: %v, want ErrNotFound", err)
			}
			if _, err := s.Put(ctx, ref, "replaced"); !errors.Is(err, secrets.ErrNotFound) {
				t.Errorf("Put by reference: %v, want ErrNotFound", err)
			}
			if err := s.Delete(ctx, ref); err != nil {
				t.Errorf("Delete: %v, want nil (nothing of theirs to delete)", err)
			}
		})
	}
	if got, err := v.For(owner).Get(ctx, ref); err != nil || got != "keys" {
		t.Fatalf("the owner reads %q, %v after the others tried", got, err)
	}
	if got, err := v.Owner(ctx, ref); err != nil || got != owner {
		t.Fatalf("Owner = %+v, %v", got, err)
	}
	if err := v.For(owner).Delete(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if _, err := local.Get(ctx, ref); !errors.Is(err, secrets.ErrNotFound) {
		t.Fatalf("the owner's delete left the value: %v", err)
	}
	if _, err := v.Owner(ctx, ref); !errors.Is(err, secrets.ErrNotFound) {
		t.Fatalf("the owner's delete left the record: %v", err)
	}
}
