package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/groundworkhq/groundwork/internal/api"
	"github.com/groundworkhq/groundwork/internal/audit"
	"github.com/groundworkhq/groundwork/internal/auth"
	"github.com/groundworkhq/groundwork/internal/rbac"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
)

// BootstrapEmail is the first org's admin, whom the bootstrap token belongs to.
const BootstrapEmail = "admin@local"

// ActorBootstrap records the changes the server makes to itself at first start.
const ActorBootstrap = "system:bootstrap"

// setupAccess seeds the default org with its admin (once, on the record) and returns the
// authenticator for stored API tokens and the bootstrap token, and the secret store that
// cloud account credentials go to.
func setupAccess(ctx context.Context, o Options, st store.Store) (api.Authenticator, secrets.SecretStore, error) {
	hash, err := bootstrapAuth(o)
	if err != nil {
		return nil, nil, err
	}
	if err := seedDefaultOrg(ctx, st, time.Now()); err != nil {
		return nil, nil, err
	}
	sec, err := secrets.OpenLocal(o.DataDir, os.Getenv(secrets.KeyEnv))
	if err != nil {
		return nil, nil, fmt.Errorf("secret store: %w", err)
	}
	a := &auth.Authenticator{Store: st, Logger: o.Logger,
		Bootstrap: &auth.Bootstrap{Hash: hash, OrgID: DefaultOrg, Email: BootstrapEmail}}
	return api.TokenAuth{Auth: a}, sec, nil
}

// seedDefaultOrg creates org_default, admin@local and their Admin assignment when the org is
// missing. Replicas starting together may race: the loser's insert conflicts and is dropped.
func seedDefaultOrg(ctx context.Context, st store.Store, now time.Time) error {
	if _, err := st.GetOrg(ctx, DefaultOrg); err == nil {
		return nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("read default org: %w", err)
	}
	e := audit.New(DefaultOrg, audit.ScopePlatform, "org.create", ActorBootstrap, "org", DefaultOrg,
		map[string]any{"admin": BootstrapEmail, "roleID": rbac.RoleAdmin})
	e.CreatedAt = now
	err := st.Audited(ctx, e, func(tx store.Store) error {
		if err := tx.CreateOrg(ctx, &store.Org{ID: DefaultOrg, Name: "Default", CreatedAt: now}); err != nil {
			return err
		}
		if err := tx.CreateUser(ctx, &store.User{OrgID: DefaultOrg, Email: BootstrapEmail, Name: "Bootstrap admin", CreatedAt: now}); err != nil {
			return err
		}
		return tx.CreateAssignment(ctx, &rbac.Assignment{ID: "ras_" + ulid.Make().String(), OrgID: DefaultOrg,
			Email: BootstrapEmail, RoleID: rbac.RoleAdmin, CreatedAt: now})
	})
	if err != nil && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("seed default org: %w", err)
	}
	return nil
}
