package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
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
	a := &auth.Authenticator{Store: st, Logger: o.Logger, MaxTTL: o.MaxTokenTTL,
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
	err := createOrgWithAdmin(ctx, st, &store.Org{ID: DefaultOrg, Name: "Default", CreatedAt: now},
		&store.User{OrgID: DefaultOrg, Email: BootstrapEmail, Name: "Bootstrap admin", CreatedAt: now}, nil, ActorBootstrap, nil)
	if err != nil && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("seed default org: %w", err)
	}
	return nil
}

// ActorCLI records the changes an operator makes with server-side commands (groundwork orgs).
const ActorCLI = "system:cli"

// NewOrg is what CreateOrg made: the org, and the secret of its admin's first token, which
// is shown once and kept only as a hash.
type NewOrg struct {
	Org         *store.Org
	AdminEmail  string
	TokenID     string
	TokenSecret string
}

// CreateOrg makes a new organisation with its first admin and an API token for them, in one
// audited transaction. Orgs are made by the operator, on the server's own database, because no
// API principal belongs to more than one org (each org's admin can only see their own).
func CreateOrg(ctx context.Context, st store.Store, name, adminEmail string, tokenTTL time.Duration, now time.Time) (*NewOrg, error) {
	name, adminEmail = strings.TrimSpace(name), strings.ToLower(strings.TrimSpace(adminEmail))
	if name == "" || len(name) > 200 {
		return nil, fmt.Errorf("--name: must be 1 to 200 characters")
	}
	if !api.ValidEmail(adminEmail) {
		return nil, fmt.Errorf("--admin-email: %q is not an email address", adminEmail)
	}
	secret, err := auth.NewSecret()
	if err != nil {
		return nil, err
	}
	o := &store.Org{ID: "org_" + ulid.Make().String(), Name: name, CreatedAt: now}
	tok := &store.Token{ID: "tok_" + ulid.Make().String(), OrgID: o.ID, Email: adminEmail, Name: "first admin token",
		Hash: auth.Hash(secret), CreatedAt: now}
	if tokenTTL > 0 {
		exp := now.Add(tokenTTL)
		tok.ExpiresAt = &exp
	}
	// Names are how an operator tells orgs apart (the ids are random), so running the same
	// command twice must not make a second org of the same name.
	unique := func(tx store.Tx) error {
		orgs, err := tx.ListOrgs(ctx)
		if err != nil {
			return err
		}
		for _, other := range orgs {
			if strings.EqualFold(other.Name, name) {
				return fmt.Errorf("an organisation named %q exists already (%s): %w", other.Name, other.ID, store.ErrConflict)
			}
		}
		return nil
	}
	if err := createOrgWithAdmin(ctx, st, o, &store.User{OrgID: o.ID, Email: adminEmail, CreatedAt: now}, tok, ActorCLI, unique); err != nil {
		return nil, fmt.Errorf("create org: %w", err)
	}
	return &NewOrg{Org: o, AdminEmail: adminEmail, TokenID: tok.ID, TokenSecret: secret}, nil
}

// createOrgWithAdmin writes the org, its admin with the Admin role org-wide and, when given,
// the admin's token, with one audit entry in the new org, all in one transaction.
// check, when set, runs first in the transaction and refuses the org by failing.
func createOrgWithAdmin(ctx context.Context, st store.Store, o *store.Org, admin *store.User, tok *store.Token, actor string, check func(tx store.Tx) error) error {
	meta := map[string]any{"name": o.Name, "admin": admin.Email, "roleID": rbac.RoleAdmin}
	if tok != nil {
		meta["tokenID"] = tok.ID
	}
	e := audit.New(o.ID, audit.ScopePlatform, "org.create", actor, "org", o.ID, meta)
	e.CreatedAt = o.CreatedAt
	return st.Audited(ctx, e, func(tx store.Tx) error {
		if check != nil {
			if err := check(tx); err != nil {
				return err
			}
		}
		if err := tx.CreateOrg(ctx, o); err != nil {
			return err
		}
		if err := tx.CreateUser(ctx, admin); err != nil {
			return err
		}
		if err := tx.CreateAssignment(ctx, &rbac.Assignment{ID: "ras_" + ulid.Make().String(), OrgID: o.ID,
			Email: admin.Email, RoleID: rbac.RoleAdmin, CreatedAt: o.CreatedAt}); err != nil {
			return err
		}
		if tok == nil {
			return nil
		}
		return tx.CreateToken(ctx, tok)
	})
}
