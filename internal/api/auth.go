package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/groundworkhq/groundwork/internal/audit"
	"github.com/groundworkhq/groundwork/internal/auth"
	"github.com/groundworkhq/groundwork/internal/store"
)

// TokenAuth authenticates bearer tokens with an auth.Authenticator (stored API tokens and the
// bootstrap token).
type TokenAuth struct{ Auth *auth.Authenticator }

var _ Authenticator = TokenAuth{}

func (t TokenAuth) Authenticate(ctx context.Context, token string) (*Principal, error) {
	id, err := t.Auth.Identify(ctx, token)
	if errors.Is(err, auth.ErrUnauthenticated) {
		return nil, ErrUnauthenticated
	}
	if err != nil {
		return nil, err
	}
	return &Principal{OrgID: id.OrgID, Actor: id.Email, Perms: id.Perms, TokenID: id.TokenID}, nil
}

// CreatedToken is the answer to POST /tokens: the only time the secret is shown.
type CreatedToken struct {
	*store.Token
	Secret string `json:"secret"`
}

type createTokenRequest struct {
	Name string `json:"name"`
	// Email is whose token it is; the caller's by default.
	Email string `json:"email"`
	// ExpiresIn is a Go duration ("720h"); ExpiresAt an RFC 3339 time. Neither: no expiry.
	ExpiresIn string     `json:"expiresIn"`
	ExpiresAt *time.Time `json:"expiresAt"`
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var req createTokenRequest
	if pr := decode(r, &req); pr != nil {
		return pr
	}
	if req.Email == "" {
		req.Email = p.Actor
	}
	if strings.TrimSpace(req.Name) == "" || len(req.Name) > 100 {
		return badRequest("bad name", FieldError{Field: "name", Rule: "required", Message: "is required, at most 100 characters"})
	}
	now := s.cfg.Now()
	exp := req.ExpiresAt
	if req.ExpiresIn != "" {
		d, err := time.ParseDuration(req.ExpiresIn)
		if err != nil || d <= 0 {
			return badRequest("bad expiresIn", FieldError{Field: "expiresIn", Rule: "duration", Message: "must be a positive duration such as 720h"})
		}
		t := now.Add(d)
		exp = &t
	}
	if exp != nil && !exp.After(now) {
		return badRequest("bad expiry", FieldError{Field: "expiresAt", Rule: "future", Message: "must be in the future"})
	}
	if maxTTL := s.cfg.MaxTokenTTL; maxTTL > 0 {
		limit := now.Add(maxTTL)
		switch {
		case exp == nil:
			exp = &limit // no expiry asked for: the longest this server gives
		case exp.After(limit):
			field := "expiresAt"
			if req.ExpiresIn != "" {
				field = "expiresIn"
			}
			return badRequest("the token would outlive this server's maximum token lifetime",
				FieldError{Field: field, Rule: "maximum", Message: "must be at most " + maxTTL.String() + " from now"})
		}
	}
	ctx := r.Context()
	if _, err := s.cfg.Store.GetUser(ctx, p.OrgID, req.Email); errors.Is(err, store.ErrNotFound) {
		return problem(http.StatusNotFound, "user not found", FieldError{Field: "email", Rule: "exists", Message: "no user " + req.Email + " in your organisation"})
	} else if err != nil {
		return err
	}
	secret, err := auth.NewSecret()
	if err != nil {
		return err
	}
	t := &store.Token{ID: "tok_" + ulid.Make().String(), OrgID: p.OrgID, Email: req.Email, Name: req.Name,
		Hash: auth.Hash(secret), ExpiresAt: exp, CreatedAt: now}
	err = s.audited(ctx, p, entry(audit.ScopePlatform, "token.create", "token", t.ID, map[string]any{"email": t.Email, "name": t.Name, "expiresAt": t.ExpiresAt}),
		func(tx store.Tx) error { return tx.CreateToken(ctx, t) })
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, CreatedToken{Token: t, Secret: secret})
	return nil
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request, p *Principal) error {
	list, err := s.cfg.Store.ListTokens(r.Context(), p.OrgID, r.URL.Query().Get("email"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, tokenList{Data: list})
	return nil
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request, p *Principal) error {
	id := r.PathValue("id")
	ctx := r.Context()
	now := s.cfg.Now()
	err := s.audited(ctx, p, entry(audit.ScopePlatform, "token.revoke", "token", id, nil), func(tx store.Tx) error {
		_, changed, err := tx.RevokeToken(ctx, p.OrgID, id, now)
		if err == nil && !changed {
			return errNoChange // revoked before: nothing happened now
		}
		return err
	})
	if err != nil && !errors.Is(err, errNoChange) {
		return storeErr(err, "token")
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
