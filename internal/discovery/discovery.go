// Package discovery lists what a space's account and region already have (networks, subnets,
// DNS zones, clusters, instance types, versions), so that forms offer real choices instead of
// free text. Each provider lists through the cloud's own paging; the answer is kept for a
// short TTL and served a page at a time.
package discovery

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Kinds that can be discovered.
const (
	KindNetworks      = "networks"
	KindSubnets       = "subnets"
	KindDNSZones      = "dns-zones"
	KindClusters      = "clusters"
	KindInstanceTypes = "instance-types"
	KindVersions      = "versions"
)

// Kinds lists every kind, in the order docs show them.
var Kinds = []string{KindNetworks, KindSubnets, KindDNSZones, KindClusters, KindInstanceTypes, KindVersions}

// ErrUnknownKind is returned for a kind not in Kinds.
var ErrUnknownKind = errors.New("unknown discovery kind")

// ErrBadCursor is returned for a cursor this service did not give.
var ErrBadCursor = errors.New("invalid cursor")

// Item is one thing found, with the fields a form needs.
type Item struct {
	ID   string            `json:"id"`
	Name string            `json:"name"`
	CIDR string            `json:"cidr"`
	AZ   string            `json:"az"`
	Tags map[string]string `json:"tags"`
	// Managed is true when Groundwork created it (it carries Groundwork's tags).
	Managed bool `json:"managed"`
	// VPCID is a subnet's network.
	VPCID string `json:"vpcId,omitempty"`
	// Version is a cluster's or an engine's version; Engine names the engine of a version.
	Version string `json:"version,omitempty"`
	Engine  string `json:"engine,omitempty"`
}

// Page is one page of a listing; NextCursor is empty on the last.
type Page struct {
	Items      []Item `json:"items"`
	NextCursor string `json:"nextCursor"`
}

// Lister lists every item of a kind in one account and region, following the cloud's pages.
type Lister interface {
	Discover(ctx context.Context, kind string) ([]Item, error)
}

// Opener returns the lister of an organisation's space.
type Opener func(ctx context.Context, orgID, spaceID string) (Lister, error)

// Service serves listings from a short-lived cache.
type Service struct {
	open     Opener
	ttl      time.Duration
	pageSize int
	now      func() time.Time

	mu    sync.Mutex
	cache map[string]snapshot
}

type snapshot struct {
	items []Item
	at    time.Time
}

// Options configure a Service.
type Options struct {
	// TTL is how long a listing is served before the cloud is asked again (default 60s).
	TTL time.Duration
	// PageSize is how many items a page holds (default 100).
	PageSize int
	Now      func() time.Time
}

// New returns a Service opening listers with open.
func New(open Opener, o Options) *Service {
	if o.TTL <= 0 {
		o.TTL = time.Minute
	}
	if o.PageSize <= 0 {
		o.PageSize = 100
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Service{open: open, ttl: o.TTL, pageSize: o.PageSize, now: o.Now, cache: map[string]snapshot{}}
}

// List answers one page of kind in the space; refresh asks the cloud again whatever the cache
// holds. A cursor is the position in the listing it came from.
func (s *Service) List(ctx context.Context, orgID, spaceID, kind, cursor string, refresh bool) (Page, error) {
	if !slices.Contains(Kinds, kind) {
		return Page{}, fmt.Errorf("%w %q", ErrUnknownKind, kind)
	}
	offset := 0
	if cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil {
			return Page{}, ErrBadCursor
		}
		if offset, err = strconv.Atoi(string(raw)); err != nil || offset < 0 {
			return Page{}, ErrBadCursor
		}
	}
	key := orgID + "|" + spaceID + "|" + kind
	s.mu.Lock()
	snap, ok := s.cache[key]
	s.mu.Unlock()
	if !ok || refresh || s.now().Sub(snap.at) >= s.ttl {
		l, err := s.open(ctx, orgID, spaceID)
		if err != nil {
			return Page{}, err
		}
		items, err := l.Discover(ctx, kind)
		if err != nil {
			return Page{}, err
		}
		snap = snapshot{items: items, at: s.now()}
		s.mu.Lock()
		for k, old := range s.cache { // what expired is never served again
			if snap.at.Sub(old.at) >= s.ttl {
				delete(s.cache, k)
			}
		}
		s.cache[key] = snap
		s.mu.Unlock()
	}
	page := Page{Items: []Item{}}
	if offset < len(snap.items) {
		end := min(offset+s.pageSize, len(snap.items))
		page.Items = snap.items[offset:end]
		if end < len(snap.items) {
			page.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(end)))
		}
	}
	return page, nil
}

// ErrUnsupported is returned by an Opener for a space whose provider has no lister.
var ErrUnsupported = errors.New("no discovery for this provider")
