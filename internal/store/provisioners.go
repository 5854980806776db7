package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// CatalogCategory is the kind of thing a catalog type describes (catalog.Category); the
// protocol's API calls it "kind".
type CatalogCategory string

const (
	CategoryTarget           CatalogCategory = "target"
	CategoryTool             CatalogCategory = "tool"
	CategoryDeployment       CatalogCategory = "deployment"
	CategoryManagedResource  CatalogCategory = "managed-resource"
	CategoryConsumedResource CatalogCategory = "consumed-resource"
)

// CatalogCategories lists the categories a provisioner can handle. An artifact has no
// provisioner, so it is not one of them.
var CatalogCategories = []CatalogCategory{
	CategoryTarget, CategoryTool, CategoryDeployment, CategoryManagedResource, CategoryConsumedResource,
}

// Valid reports whether c is a known category.
func (c CatalogCategory) Valid() bool { return slices.Contains(CatalogCategories, c) }

// CatalogPair names one (category, type): the unit a provisioner registers for (catalog.Pair).
type CatalogPair struct {
	Kind CatalogCategory `json:"kind"`
	Type string          `json:"type"`
}

// String spells the pair as "category/type", the form used in URLs and messages.
func (p CatalogPair) String() string { return string(p.Kind) + "/" + p.Type }

// Validate checks that the category is known and the type is a plausible name.
func (p CatalogPair) Validate() error {
	if !p.Kind.Valid() {
		return fmt.Errorf("unknown kind %q (want one of %s)", p.Kind, joinCategories())
	}
	if !validTypeName(p.Type) {
		return fmt.Errorf("type %q must be lower-case letters, digits and dashes, starting with a letter", p.Type)
	}
	return nil
}

func validTypeName(s string) bool {
	if s == "" || len(s) > 63 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

func joinCategories() string {
	s := make([]string, len(CatalogCategories))
	for i, c := range CatalogCategories {
		s[i] = string(c)
	}
	return strings.Join(s, ", ")
}

// Provisioner is a registered provisioner (protocol.Provisioner): who holds which pairs.
type Provisioner struct {
	ID string `json:"id"`
	// OrgID is the organisation the registration belongs to; empty for the built-in one,
	// which serves every organisation.
	OrgID     string        `json:"orgID,omitempty"`
	Name      string        `json:"name"`
	URL       string        `json:"url,omitempty"` // empty for the built-in provisioner
	Pairs     []CatalogPair `json:"pairs"`
	BuiltIn   bool          `json:"builtIn"`
	CreatedAt time.Time     `json:"createdAt"`
}

// Holds reports whether p holds pair.
func (p *Provisioner) Holds(pair CatalogPair) bool { return slices.Contains(p.Pairs, pair) }

// ErrProvisionerNotFound is returned for an unknown provisioner id, or a pair nobody holds.
var ErrProvisionerNotFound = errors.New("provisioner not found")

// PairConflictError refuses a registration claiming a pair another provisioner holds (HTTP 409).
type PairConflictError struct {
	Pair       CatalogPair
	HolderID   string
	HolderName string
}

func (e *PairConflictError) Error() string {
	return fmt.Sprintf("pair %s is already held by provisioner %q (%s)", e.Pair, e.HolderName, e.HolderID)
}

// ProvisionerStore persists registrations, each in its organisation (p.OrgID). InsertProvisioner
// must refuse, atomically, a provisioner claiming a pair another one of the same organisation
// holds, returning *PairConflictError: the registry checks first for a good message, but two
// replicas may register at once, and only the store can settle that (a unique index on
// (org, kind, type)). Every read and delete names the organisation: another one's registration
// is not found.
type ProvisionerStore interface {
	InsertProvisioner(ctx context.Context, p Provisioner) error
	ListProvisioners(ctx context.Context, orgID string) ([]Provisioner, error)
	// GetProvisioner and DeleteProvisioner return ErrProvisionerNotFound for an unknown id.
	GetProvisioner(ctx context.Context, orgID, id string) (Provisioner, error)
	DeleteProvisioner(ctx context.Context, orgID, id string) error
	// ProvisionerForPair returns the holder of pair in orgID, or ErrProvisionerNotFound.
	ProvisionerForPair(ctx context.Context, orgID string, pair CatalogPair) (Provisioner, error)
}
