// Package auth turns bearer tokens into principals. API tokens are random 256-bit secrets
// shown once; the store keeps only their SHA-256 (a slow hash buys nothing against a secret
// with that much entropy), so a dump of the database cannot be replayed as a token.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/groundworkhq/groundwork/internal/rbac"
	"github.com/groundworkhq/groundwork/internal/store"
)

// Prefix starts every token so that secret scanners can spot a leaked one.
const Prefix = "gw_"

// NewSecret returns a fresh token secret.
func NewSecret() (string, error) {
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("token secret: %w", err)
	}
	return Prefix + base64.RawURLEncoding.EncodeToString(buf), nil
}

// Hash is what the store keeps of a secret.
func Hash(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// Lookup is what the authenticator reads.
type Lookup interface {
	rbac.Source
	GetTokenByHash(ctx context.Context, hash string) (*store.Token, error)
	GetUser(ctx context.Context, orgID, email string) (*store.User, error)
}

// ErrUnauthenticated: the token is unknown, expired or revoked, or its user is gone.
var ErrUnauthenticated = errors.New("unauthenticated")

// Identity is who a token belongs to and what they may do.
type Identity struct {
	OrgID   string
	Email   string
	TokenID string // empty for the bootstrap token
	Perms   *rbac.Permissions
}

// Bootstrap is the break-glass admin token: it always holds every policy in its org, so that
// an org whose assignments were edited badly can still be repaired.
type Bootstrap struct {
	Hash  [sha256.Size]byte
	OrgID string
	Email string
}

// Authenticator accepts the bootstrap token and stored API tokens that are neither expired nor
// revoked and whose user still exists.
type Authenticator struct {
	Store     Lookup
	Bootstrap *Bootstrap
	Now       func() time.Time
	Logger    *slog.Logger
	// MaxTTL, if positive, is the longest a stored token lives from its creation, whatever
	// expiry it was given (a cap set after tokens were made applies to them too).
	MaxTTL time.Duration
}

// Identify resolves token to an identity with its effective permissions.
func (a *Authenticator) Identify(ctx context.Context, token string) (*Identity, error) {
	h := sha256.Sum256([]byte(token))
	if b := a.Bootstrap; b != nil && subtle.ConstantTimeCompare(h[:], b.Hash[:]) == 1 {
		return &Identity{OrgID: b.OrgID, Email: b.Email, Perms: rbac.All()}, nil
	}
	t, err := a.Store.GetTokenByHash(ctx, hex.EncodeToString(h[:]))
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrUnauthenticated
	}
	if err != nil {
		return nil, err
	}
	now := time.Now()
	if a.Now != nil {
		now = a.Now()
	}
	if t.RevokedAt != nil || (t.ExpiresAt != nil && !now.Before(*t.ExpiresAt)) {
		return nil, ErrUnauthenticated
	}
	if a.MaxTTL > 0 && !now.Before(t.CreatedAt.Add(a.MaxTTL)) {
		return nil, ErrUnauthenticated
	}
	if _, err := a.Store.GetUser(ctx, t.OrgID, t.Email); errors.Is(err, store.ErrNotFound) {
		return nil, ErrUnauthenticated
	} else if err != nil {
		return nil, err
	}
	perms, err := rbac.Effective(ctx, a.Store, t.OrgID, t.Email)
	if err != nil {
		return nil, err
	}
	return &Identity{OrgID: t.OrgID, Email: t.Email, TokenID: t.ID, Perms: perms}, nil
}
