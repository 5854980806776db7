package app

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/groundworkhq/groundwork/internal/api"
	"github.com/groundworkhq/groundwork/internal/auth"
	"github.com/groundworkhq/groundwork/internal/orgs"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
)

// BootstrapEmail is the first org's admin, whom the bootstrap token belongs to.
const BootstrapEmail = "admin@local"

// ActorBootstrap records the changes the server makes to itself at first start.
const ActorBootstrap = orgs.ActorBootstrap

// setupAccess seeds the default org with its admin (once, on the record) and returns the
// authenticator for stored API tokens and the bootstrap token, and the secret store that
// cloud account credentials go to.
func setupAccess(ctx context.Context, o Options, st store.Store) (api.Authenticator, secrets.SecretStore, error) {
	hash, err := bootstrapAuth(o)
	if err != nil {
		return nil, nil, err
	}
	if err := orgs.SeedDefault(ctx, st, DefaultOrg, BootstrapEmail, time.Now()); err != nil {
		return nil, nil, err
	}
	sec, err := secrets.OpenLocal(o.DataDir, os.Getenv(secrets.KeyEnv))
	if err != nil {
		return nil, nil, fmt.Errorf("secret store: %w", err)
	}
	a := &auth.Authenticator{Store: st, Logger: o.Logger, MaxTTL: o.MaxTokenTTL,
		Bootstrap: &auth.Bootstrap{Hash: hash, OrgID: DefaultOrg, Email: BootstrapEmail}}
	return api.TokenAuth{Auth: a}, sec, nil
}
