// Package orgs creates organisations with their first admin: the default org a fresh server
// seeds, and the orgs an operator makes with server-side commands. No API principal belongs to
// more than one org, so no API request can make one.
package orgs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/groundworkhq/groundwork/internal/audit"
	"github.com/groundworkhq/groundwork/internal/auth"
	"github.com/groundworkhq/groundwork/internal/rbac"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// Actors on the audit record of the orgs made here.
const (
	// ActorBootstrap seeds the default org.
	ActorBootstrap = "system:bootstrap"
	// ActorCLI records the changes an operator makes with server-side commands (groundwork orgs).
	ActorCLI = "system:cli"
)

// SeedDefault creates the org id (named Default), its admin email and their Admin assignment
// when the org is missing. Replicas starting together may race: the loser's insert conflicts
// and is dropped.
func SeedDefault(ctx context.Context, st store.Store, id, email string, now time.Time) error {
	if _, err := st.GetOrg(ctx, id); err == nil {
		return nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("read default org: %w", err)
	}
	err := createWithAdmin(ctx, st, &store.Org{ID: id, Name: "Default", CreatedAt: now},
		&store.User{OrgID: id, Email: email, Name: "Bootstrap admin", CreatedAt: now}, nil, ActorBootstrap, nil)
	if err != nil && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("seed default org: %w", err)
	}
	return nil
}

// New is what Create made: the org, and the secret of its admin's first token, which
// is shown once and kept only as a hash.
type New struct {
	Org         *store.Org
	AdminEmail  string
	TokenID     string
	TokenSecret string
}

// Create makes a new organisation with its first admin and an API token for them, in one
// audited transaction. Orgs are made by the operator, on the server's own database, because no
// API principal belongs to more than one org (each org's admin can only see their own).
func Create(ctx context.Context, st store.Store, name, adminEmail string, tokenTTL time.Duration, now time.Time) (*New, error) {
	name, adminEmail = strings.TrimSpace(name), strings.ToLower(strings.TrimSpace(adminEmail))
	if name == "" || len(name) > 200 {
		return nil, fmt.Errorf("--name: must be 1 to 200 characters")
	}
	if !validation.Email(adminEmail) {
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
	if err := createWithAdmin(ctx, st, o, &store.User{OrgID: o.ID, Email: adminEmail, CreatedAt: now}, tok, ActorCLI, unique); err != nil {
		return nil, fmt.Errorf("create org: %w", err)
	}
	return &New{Org: o, AdminEmail: adminEmail, TokenID: tok.ID, TokenSecret: secret}, nil
}

// createWithAdmin writes the org, its admin with the Admin role org-wide and, when given,
// the admin's token, with one audit entry in the new org, all in one transaction.
// check, when set, runs first in the transaction and refuses the org by failing.
func createWithAdmin(ctx context.Context, st store.Store, o *store.Org, admin *store.User, tok *store.Token, actor string, check func(tx store.Tx) error) error {
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
