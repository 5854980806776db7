package provider

import (
	"context"
	"errors"
	"fmt"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
)

// AccountRecords is what finding a space's cloud account reads of the store.
type AccountRecords interface {
	GetSpace(ctx context.Context, orgID, id string) (*store.Space, error)
	GetCloudAccount(ctx context.Context, orgID, id string) (*store.CloudAccount, error)
}

// CredentialVault reads a cloud account's credentials as the account (*secrets.Vault has it).
type CredentialVault interface {
	For(owner secrets.Owner) secrets.SecretStore
}

// SpaceAccount is what a module opens a space's cloud with: the space, its cloud account and
// the value of the account's credentials secret ("" when the account keeps none).
type SpaceAccount struct {
	Space       *store.Space
	Account     *store.CloudAccount
	Credentials string
}

// OpenSpaceAccount reads a space, its cloud account and the account's credentials, with the
// faults every module gives: a space or account that is gone, or a space without an account,
// is the user's to fix (title names the cloud: "an AWS cloud account"); a store that does not
// answer is transient.
func OpenSpaceAccount(ctx context.Context, r AccountRecords, v CredentialVault, orgID, spaceID, title string) (*SpaceAccount, error) {
	sp, err := r.GetSpace(ctx, orgID, spaceID)
	if err != nil {
		return nil, LookupErr("space "+spaceID, err)
	}
	if sp.CloudAccountID == "" {
		return nil, fault.UserAction(fmt.Errorf("space %s names no cloud account", sp.ID), "NoCloudAccount",
			"Give the space a cloudAccountID of "+title+".", "")
	}
	acc, err := r.GetCloudAccount(ctx, orgID, sp.CloudAccountID)
	if err != nil {
		return nil, LookupErr("cloud account "+sp.CloudAccountID, err)
	}
	out := &SpaceAccount{Space: sp, Account: acc}
	if acc.CredentialsRef == "" {
		return out, nil
	}
	if v == nil {
		return nil, fault.System(errors.New("cloud account credentials by reference, but this server has no secret store"))
	}
	out.Credentials, err = v.For(secrets.Owner{OrgID: acc.OrgID, Kind: secrets.OwnerAccount, ID: acc.ID}).Get(ctx, acc.CredentialsRef)
	if errors.Is(err, secrets.ErrNotFound) {
		return nil, fault.UserAction(fmt.Errorf("credentials of %s: %w", acc.ID, err), "CredentialsMissing",
			"The cloud account's credentials secret is gone; update the account's credentials.", "")
	}
	if err != nil {
		return nil, fault.Transient(fmt.Errorf("read credentials of %s: %w", acc.ID, err))
	}
	return out, nil
}

// LookupErr classifies a failed read of a record a job depends on: gone is the user's to fix,
// anything else is the store not answering.
func LookupErr(what string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return fault.UserAction(fmt.Errorf("%s: %w", what, err), "NotFound", "The job's "+what+" was deleted; recreate it.", "")
	}
	return fault.Transient(fmt.Errorf("read %s: %w", what, err))
}
